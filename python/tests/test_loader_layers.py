"""kernelize and the layer mapping (reference §6) with real nn.Modules and a real on-disk kernel's layers."""

from __future__ import annotations

import uuid

import kforge
import pytest
import torch
from kernel_trees import make_variant
from kforge import (
    CUDAProperties,
    Device,
    KernelizeFallback,
    LocalLayerRepository,
    Mode,
    kernelize,
    register_kernel_mapping,
    use_kernel_forward_from_hub,
    use_kernel_mapping,
    use_kernelized_func,
)
from torch import nn

LAYERS = """
import torch


class Scale(torch.nn.Module):
    has_backward = False

    def forward(self, x):
        return x * self.weight + 1000


class ScaleTrainable(torch.nn.Module):
    can_torch_compile = True

    def forward(self, x):
        return x * self.weight + 2000


class WithInit(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x


class WrongSignature(torch.nn.Module):
    def forward(self, x, y):
        return x


class ExtraMember(torch.nn.Module):
    helper = 1

    def forward(self, x):
        return x


class Add1(torch.nn.Module):
    def forward(self, x):
        return x + 100
"""


@use_kernel_forward_from_hub("Scale")
class Scale(nn.Module):
    def __init__(self, w: float = 2.0):
        super().__init__()
        self.weight = nn.Parameter(torch.tensor([w]))

    def forward(self, x):
        return x * self.weight


@use_kernel_forward_from_hub("Add1")
def add1(x):
    return x + 1


@use_kernelized_func(add1)
class UsesFunc(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(1, 1)


@pytest.fixture(scope="module")
def kernel_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("layers")
    # torch-cuda too, for kernelize(device="cuda") on a CUDA build of torch (no GPU needed: pure Python)
    for backend in ("cpu", "cuda"):
        make_variant(
            root / "build" / f"torch-{backend}",
            {"__init__.py": "from . import layers\n", "layers.py": LAYERS},
            name="scale",
            id_=f"_scale_{backend}_{uuid.uuid4().hex[:7]}",
        )
    return root


@pytest.fixture(autouse=True)
def _empty_mapping():
    with use_kernel_mapping({}, inherit_mapping=False):
        yield


def repo(kernel_dir, name="Scale"):
    return LocalLayerRepository(kernel_dir, layer_name=name)


X = torch.tensor([1.0, -3.0])


def test_kernelize_replaces_forward_per_instance_and_keeps_state(kernel_dir):
    register_kernel_mapping({"Scale": {"cpu": repo(kernel_dir)}})
    model = nn.Sequential(Scale(2.0), Scale(5.0))
    other = Scale(2.0)
    kernelize(model, mode=Mode.INFERENCE, device="cpu")
    assert model[0](X).tolist() == [1002.0, 994.0]  # the kernel's forward on this instance's weight
    assert model[1](X).tolist() == [1005.0, 985.0]
    assert other(X).tolist() == [2.0, -6.0]  # the class is untouched
    assert model(X).tolist() == [(1.0 * 2 + 1000) * 5 + 1000, (-3.0 * 2 + 1000) * 5 + 1000]


def test_device_is_taken_from_the_parameters(kernel_dir):
    register_kernel_mapping({"Scale": {"cpu": repo(kernel_dir)}})
    m = kernelize(Scale(), mode=Mode.INFERENCE)
    assert m(X).tolist() == [1002.0, 994.0]
    with pytest.raises(ValueError, match="no parameters to infer the device from"):
        kernelize(nn.ReLU(), mode=Mode.INFERENCE)


def test_use_kernel_mapping_is_scoped_and_kernelize_is_reversible(kernel_dir):
    m = Scale()
    with use_kernel_mapping({"Scale": {"cpu": repo(kernel_dir)}}):
        kernelize(m, mode=Mode.INFERENCE, device="cpu")
        assert m(X).tolist() == [1002.0, 994.0]
    kernelize(m, mode=Mode.INFERENCE, device="cpu")  # mapping gone: NO_LAYER falls back to the original
    assert m(X).tolist() == [2.0, -6.0]
    with pytest.raises(ValueError, match="no kernel mapping for layer 'Scale'"):
        kernelize(m, mode=Mode.INFERENCE, device="cpu", use_fallback=False)


def test_modes_and_fallback_chain(kernel_dir):
    m = Scale()
    # A FALLBACK layer without backward is not used for training: the original forward stays.
    register_kernel_mapping({"Scale": {"cpu": repo(kernel_dir)}})
    kernelize(m, mode=Mode.TRAINING, device="cpu")
    assert m(X).tolist() == [2.0, -6.0]
    # Registered for TRAINING explicitly, the same layer is an error.
    register_kernel_mapping({"Scale": {"cpu": {Mode.TRAINING: repo(kernel_dir)}}}, inherit_mapping=False)
    with pytest.raises(ValueError, match="registered for Mode.TRAINING but does not support"):
        kernelize(m, mode=Mode.TRAINING, device="cpu")
    # INFERENCE falls back to INFERENCE|TORCH_COMPILE, then TRAINING... (reference §6.2).
    register_kernel_mapping(
        {
            "Scale": {
                "cpu": {Mode.TRAINING: repo(kernel_dir, "ScaleTrainable"), Mode.FALLBACK: repo(kernel_dir)}
            }
        },
        inherit_mapping=False,
    )
    kernelize(m, mode=Mode.INFERENCE, device="cpu")
    assert m(X).tolist() == [2002.0, 1994.0]
    kernelize(m, mode=Mode.INFERENCE | Mode.TORCH_COMPILE, device="cpu")  # skips TRAINING: goes to FALLBACK
    assert m(X).tolist() == [2.0, -6.0]  # FALLBACK layer cannot torch.compile -> original


def test_mode_rules():
    with pytest.raises(ValueError, match="cannot be combined"):
        _ = Mode.INFERENCE | Mode.TRAINING
    with pytest.raises(ValueError, match="FALLBACK cannot be combined"):
        _ = Mode.FALLBACK | Mode.TORCH_COMPILE
    with pytest.raises(ValueError, match="use Mode.INFERENCE or Mode.TRAINING"):
        kernelize(Scale(), mode=Mode.FALLBACK, device="cpu")
    with pytest.raises(ValueError, match="must include Mode.INFERENCE or Mode.TRAINING"):
        kernelize(Scale(), mode=Mode.TORCH_COMPILE, device="cpu")
    with pytest.raises(ValueError, match="Device type 'gpu' is not supported"):
        Device("gpu")


@pytest.mark.parametrize(
    ("layer", "message"),
    [
        ("WithInit", "must not define __init__"),
        ("WrongSignature", r"forward\(self, x, y\) does not match the original forward\(self, x\)"),
        ("ExtraMember", r"members other than forward/has_backward/can_torch_compile: \['helper'\]"),
    ],
)
def test_layer_validation(kernel_dir, layer, message):
    register_kernel_mapping({"Scale": {"cpu": repo(kernel_dir, layer)}})
    with pytest.raises(TypeError, match=message):
        kernelize(Scale(), mode=Mode.INFERENCE, device="cpu")


def test_missing_layer_and_cannot_load(kernel_dir, tmp_path):
    register_kernel_mapping({"Scale": {"cpu": repo(kernel_dir, "Nope")}})
    with pytest.raises(ValueError, match=r"has no layer 'Nope' in its `layers` module \(has: \['Add1'"):
        kernelize(Scale(), mode=Mode.INFERENCE, device="cpu")
    register_kernel_mapping({"Scale": {"cpu": LocalLayerRepository(tmp_path / "absent", layer_name="Scale")}})
    with pytest.raises(ValueError, match="cannot load"):
        kernelize(Scale(), mode=Mode.INFERENCE, device="cpu")
    m = kernelize(Scale(), mode=Mode.INFERENCE, device="cpu", use_fallback=KernelizeFallback.ALL)
    assert m(X).tolist() == [2.0, -6.0]


def test_function_modules_via_use_kernelized_func(kernel_dir):
    m = UsesFunc()
    fn = m.__dict__["_kernel_funcs"]["Add1"]
    assert "_kernel_funcs" not in dict(m.named_children()) and fn(X).tolist() == [2.0, -2.0]
    register_kernel_mapping({"Add1": {"cpu": repo(kernel_dir, "Add1")}})
    kernelize(m, mode=Mode.INFERENCE)
    assert fn(X).tolist() == [101.0, 97.0]


def test_condition_and_disable_switch(kernel_dir, monkeypatch):
    @use_kernel_forward_from_hub("Scale", condition=lambda mod: mod.weight.item() > 3)
    class Conditional(Scale):
        pass

    register_kernel_mapping({"Scale": {"cpu": repo(kernel_dir)}})
    small, big = (
        kernelize(Conditional(2.0), mode=Mode.INFERENCE),
        kernelize(Conditional(4.0), mode=Mode.INFERENCE),
    )
    assert small(X).tolist() == [2.0, -6.0] and big(X).tolist() == [1004.0, 988.0]
    monkeypatch.setenv("DISABLE_KERNEL_MAPPING", "1")
    kernelize(big, mode=Mode.INFERENCE)
    assert big(X).tolist() == [4.0, -12.0]


def test_cuda_capability_ranges_pick_the_narrowest(kernel_dir, monkeypatch):
    """Device mappings with capability ranges (the device itself is given, so no GPU is needed)."""
    wide = repo(kernel_dir, "Scale")
    narrow = repo(kernel_dir, "ScaleTrainable")
    register_kernel_mapping(
        {
            "Scale": {
                Device("cuda"): wide,
                Device("cuda", CUDAProperties(min_capability=90, max_capability=99)): {
                    Mode.INFERENCE: narrow
                },
            }
        }
    )
    monkeypatch.setattr(kforge.layers, "_capability", lambda: 90)
    m = kernelize(Scale(), mode=Mode.INFERENCE, device="cuda")
    assert m(X).tolist() == [2002.0, 1994.0]
    monkeypatch.setattr(kforge.layers, "_capability", lambda: 80)
    m = kernelize(Scale(), mode=Mode.INFERENCE, device="cuda")
    assert m(X).tolist() == [1002.0, 994.0]
    register_kernel_mapping({"Scale": {Device("cuda", CUDAProperties(90, 99)): wide}}, inherit_mapping=False)
    with pytest.raises(ValueError, match="no cuda mapping covers capability 80"):
        kernelize(Scale(), mode=Mode.INFERENCE, device="cuda", use_fallback=False)
    with pytest.raises(ValueError, match="has no mapping for device 'rocm'"):
        kernelize(Scale(), mode=Mode.INFERENCE, device="rocm", use_fallback=False)


def test_kernelize_accepts_a_torch_device(kernel_dir):
    """kernels 0.17 takes `device: str | torch.device`; kforge refused torch.device with a ValueError."""
    register_kernel_mapping({"Scale": {"cpu": repo(kernel_dir)}})
    m = kernelize(Scale(), mode=Mode.INFERENCE, device=torch.device("cpu"))
    assert m(X).tolist() == [1002.0, 994.0]


@use_kernel_forward_from_hub("Add1")
def first(x):
    return x + 1


@use_kernel_forward_from_hub("Scale")
def second(x):
    return x * 2


@use_kernelized_func(first)
@use_kernelized_func(second)
class UsesTwo(nn.Module):
    pass


def test_stacked_use_kernelized_func_keeps_every_function(kernel_dir):
    """Each decorator used to replace `_kernel_funcs`: only the outermost one's functions were kernelized."""
    m = UsesTwo()
    assert sorted(m.__dict__["_kernel_funcs"]) == ["Add1", "Scale"]
    register_kernel_mapping({"Add1": {"cpu": repo(kernel_dir, "Add1")}})
    kernelize(m, mode=Mode.INFERENCE, device="cpu")
    assert m.__dict__["_kernel_funcs"]["Add1"](X).tolist() == [101.0, 97.0]
    assert m.__dict__["_kernel_funcs"]["Scale"](X).tolist() == [2.0, -6.0]  # not mapped: original


def test_use_kernelized_func_rejects_an_undecorated_function():
    def plain(x):
        return x

    # used to pass here and fail later, at every instantiation, with an AttributeError from inside kforge
    with pytest.raises(ValueError, match=r"'plain' is not decorated with @use_kernel_forward_from_hub"):
        use_kernelized_func(plain)
    with pytest.raises(TypeError, match=r"applies to an nn.Module class or a function, got 5"):
        use_kernel_forward_from_hub("X")(5)


def test_registering_a_device_again_replaces_its_modes(kernel_dir):
    """As in kernels (reference §6.1, "the last insert wins"): a second registration for the same layer and
    device replaces the modes registered there, it does not merge with them."""
    register_kernel_mapping({"Scale": {"cpu": {Mode.TRAINING: repo(kernel_dir, "ScaleTrainable")}}})
    register_kernel_mapping({"Scale": {"cpu": {Mode.INFERENCE: repo(kernel_dir)}}})
    assert kernelize(Scale(), mode=Mode.INFERENCE, device="cpu")(X).tolist() == [1002.0, 994.0]
    # TRAINING is gone: no compatible mode, the original forward stays (it used to pick ScaleTrainable)
    assert kernelize(Scale(), mode=Mode.TRAINING, device="cpu")(X).tolist() == [2.0, -6.0]
    with pytest.raises(ValueError, match="no repository for mode"):
        kernelize(Scale(), mode=Mode.TRAINING, device="cpu", use_fallback=False)
    wide, narrow = repo(kernel_dir), repo(kernel_dir, "ScaleTrainable")
    register_kernel_mapping({"Scale": {Device("cuda", CUDAProperties(80, 99)): {Mode.TRAINING: narrow}}})
    register_kernel_mapping({"Scale": {Device("cuda", CUDAProperties(80, 99)): wide}})
    ranges = kforge.layers._MAPPING.get()["Scale"]["cuda"]
    assert ranges == [(80, 99, {Mode.FALLBACK: wide})]


def test_mode_support_rules_follow_kernels(kernel_dir):
    """Reference §6.3 step 4. A FALLBACK layer that cannot run the mode keeps the original only when
    NO_COMPATIBLE_MODE is allowed; a layer registered for a mode it does not support is always an error."""
    register_kernel_mapping({"Scale": {"cpu": repo(kernel_dir)}})  # Scale: has_backward = False
    assert kernelize(Scale(), mode=Mode.TRAINING, device="cpu")(X).tolist() == [2.0, -6.0]
    with pytest.raises(ValueError, match=r"does not support Mode.TRAINING"):
        kernelize(Scale(), mode=Mode.TRAINING, device="cpu", use_fallback=False)
    # registered for TRAINING, found through the INFERENCE chain: kforge used it silently for inference
    register_kernel_mapping({"Scale": {"cpu": {Mode.TRAINING: repo(kernel_dir)}}}, inherit_mapping=False)
    with pytest.raises(ValueError, match=r"registered for Mode.TRAINING but does not support"):
        kernelize(Scale(), mode=Mode.INFERENCE, device="cpu")


def test_capability_ranges_are_validated():
    with pytest.raises(ValueError, match=r"min_capability \(90\) must be <= max_capability \(80\)"):
        CUDAProperties(min_capability=90, max_capability=80)
    with pytest.raises(TypeError, match=r"ROCMProperties.min_capability must be an int"):
        kforge.ROCMProperties(min_capability="90", max_capability=100)
    assert CUDAProperties(75, 90) == CUDAProperties(min_capability=75, max_capability=90)
