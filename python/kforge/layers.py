"""Layer API: swap `nn.Module.forward` for a hub kernel's layer (kernels 0.17 semantics, reference §1.2,
§6)."""

from __future__ import annotations

import functools
import inspect
import logging
import os
import sys
import types
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from enum import Flag, auto
from pathlib import Path

from .errors import KernelError

log = logging.getLogger("kforge")

DEVICE_TYPES = ("cpu", "cuda", "mps", "neuron", "npu", "rocm", "tpu", "xpu")
_RANGED = ("cuda", "rocm")  # devices whose mappings are keyed by capability ranges


class Mode(Flag):
    """What the model is kernelized for. INFERENCE and TRAINING exclude each other; FALLBACK stands alone."""

    FALLBACK = auto()
    TRAINING = auto()
    INFERENCE = auto()
    TORCH_COMPILE = auto()

    def __or__(self, other):
        result = super().__or__(other)
        _check_mode(result)
        return result


def _check_mode(mode: Mode) -> None:
    if Mode.INFERENCE in mode and Mode.TRAINING in mode:
        raise ValueError("Mode.INFERENCE and Mode.TRAINING cannot be combined")
    if Mode.FALLBACK in mode and mode != Mode.FALLBACK:
        raise ValueError("Mode.FALLBACK cannot be combined with other modes")


class KernelizeFallback(Flag):
    """When `kernelize` keeps a layer's original forward instead of raising."""

    NONE = 0
    NO_LAYER = auto()
    NO_DEVICE = auto()
    NO_COMPATIBLE_PROPERTIES = auto()
    NO_COMPATIBLE_MODE = auto()
    CANNOT_LOAD = auto()
    DEFAULT = NO_LAYER | NO_DEVICE | NO_COMPATIBLE_PROPERTIES | NO_COMPATIBLE_MODE
    ALL = DEFAULT | CANNOT_LOAD


def _check_range(self) -> None:
    for name in ("min_capability", "max_capability"):
        value = getattr(self, name)
        if not isinstance(value, int) or isinstance(value, bool):
            raise TypeError(f"{type(self).__name__}.{name} must be an int (e.g. 90 for 9.0), got {value!r}")
    if self.min_capability > self.max_capability:
        raise ValueError(
            f"{type(self).__name__}: min_capability ({self.min_capability}) must be <= max_capability "
            f"({self.max_capability}); this range would never match"
        )


@dataclass(frozen=True)
class CUDAProperties:
    """Inclusive range of CUDA capabilities (major*10+minor, e.g. 90 for sm_90)."""

    min_capability: int = 0
    max_capability: int = sys.maxsize

    __post_init__ = _check_range


@dataclass(frozen=True)
class ROCMProperties:
    """Inclusive range of ROCm gfx versions (e.g. 94 for gfx942's major/minor, 115 for gfx1151)."""

    min_capability: int = 0
    max_capability: int = sys.maxsize

    __post_init__ = _check_range


@dataclass(frozen=True)
class Device:
    type: str
    properties: CUDAProperties | ROCMProperties | None = None

    def __post_init__(self):
        if self.type not in DEVICE_TYPES:
            raise ValueError(
                f"Device type {self.type!r} is not supported; use one of {', '.join(DEVICE_TYPES)}"
            )
        if self.properties is not None:
            want = {"cuda": CUDAProperties, "rocm": ROCMProperties}.get(self.type)
            if want is None or not isinstance(self.properties, want):
                raise ValueError(f"Device {self.type!r} does not take properties {self.properties!r}")


# ---- repositories ------------------------------------------------------------------------------------------


class LayerRepository:
    """A layer `kernel.layers.<layer_name>` of a hub kernel at a version or revision (resolved once,
    lazily)."""

    def __init__(
        self,
        repo_id: str,
        *,
        layer_name: str,
        revision=None,
        version=None,
        trust_remote_code=False,
        user_agent=None,
    ):
        from .hub import check_repo_id, check_revision, check_version, trust_allows

        if (revision is None) == (version is None):
            raise ValueError(f"LayerRepository({repo_id!r}): give exactly one of revision= or version=")
        check_repo_id(repo_id)
        check_version(version)
        check_revision(revision)
        trust_allows(repo_id, trust_remote_code)
        if not isinstance(layer_name, str) or not layer_name:
            raise TypeError(f"LayerRepository({repo_id!r}): layer_name must be a non-empty str")
        self.repo_id, self.layer_name = repo_id, layer_name
        self.revision, self.version = revision, version
        self.trust_remote_code, self.user_agent = trust_remote_code, user_agent

    @functools.cached_property
    def _commit(self) -> str:
        from .hub import Hub, offline

        return Hub(self.user_agent).resolve_commit(
            self.repo_id, self.revision, self.version, local_only=offline()
        )

    def load(self, device: str | None = None):
        from .loader import get_kernel

        kernel = get_kernel(
            self.repo_id,
            revision=self._commit,
            backend=_backend_for(device),
            user_agent=self.user_agent,
            trust_remote_code=self.trust_remote_code,
        )
        return _layer_of(kernel, self.layer_name, self.repo_id)

    def _key(self):
        tr = self.trust_remote_code
        return (
            self.repo_id,
            self.layer_name,
            self.revision,
            self.version,
            tuple(tr) if isinstance(tr, list) else tr,
        )

    def __eq__(self, other):
        return type(other) is type(self) and other._key() == self._key()

    def __hash__(self):
        return hash(self._key())

    def __repr__(self):
        pin = f"version={self.version}" if self.version is not None else f"revision={self.revision!r}"
        return f"LayerRepository({self.repo_id!r}, layer_name={self.layer_name!r}, {pin})"


class LocalLayerRepository:
    """A layer of a kernel in a local directory."""

    def __init__(self, repo_path, *, layer_name: str):
        self.repo_path, self.layer_name = Path(repo_path), layer_name

    def load(self, device: str | None = None):
        from .loader import get_local_kernel

        kernel = get_local_kernel(self.repo_path, backend=_backend_for(device))
        return _layer_of(kernel, self.layer_name, str(self.repo_path))

    def __repr__(self):
        return f"LocalLayerRepository({str(self.repo_path)!r}, layer_name={self.layer_name!r})"

    def __eq__(self, other):
        return type(other) is type(self) and (other.repo_path, other.layer_name) == (
            self.repo_path,
            self.layer_name,
        )

    def __hash__(self):
        return hash((self.repo_path, self.layer_name))


class LockedLayerRepository:
    """A layer of the kernel commit locked in `lockfile` (or the calling package's kernels.lock)."""

    def __init__(self, repo_id: str, *, lockfile=None, layer_name: str, trust_remote_code=False):
        from .locking import _caller_module, read_lock

        self.repo_id, self.layer_name, self.trust_remote_code = repo_id, layer_name, trust_remote_code
        self.lockfile, self._caller = lockfile, _caller_module()
        read_lock(lockfile, caller=self._caller).find(repo_id)  # fail at construction, as kernels does

    def load(self, device: str | None = None):
        from .hub import offline
        from .loader import _load_locked

        kernel = _load_locked(
            self.repo_id,
            self.lockfile,
            self._caller,
            backend=_backend_for(device),
            local_only=offline(),
            trust_remote_code=self.trust_remote_code,
            user_agent=None,
        )
        return _layer_of(kernel, self.layer_name, self.repo_id)

    def __eq__(self, other):
        return type(other) is type(self) and (other.repo_id, other.layer_name, str(other.lockfile)) == (
            self.repo_id,
            self.layer_name,
            str(self.lockfile),
        )

    def __hash__(self):
        return hash((self.repo_id, self.layer_name, str(self.lockfile)))


def _backend_for(device: str | None) -> str | None:
    # kernelize(device="cpu") on a CUDA/ROCm build of torch must pick CPU variants; others use the host's.
    return "cpu" if device == "cpu" else None


def _layer_of(kernel, layer_name: str, where: str):
    layers = getattr(kernel, "layers", None)
    if layers is None or not hasattr(layers, layer_name):
        have = sorted(n for n in dir(layers) if not n.startswith("_")) if layers is not None else []
        raise ValueError(
            f"kernel {where} has no layer {layer_name!r} in its `layers` module (has: {have or 'none'})"
        )
    return getattr(layers, layer_name)


# ---- decorators
# ----------------------------------------------------------------------------------------------


def replace_kernel_forward_from_hub(cls, layer_name: str, condition=None) -> None:
    """Mark a (third-party) nn.Module class as kernelizable under `layer_name`."""
    cls.kernel_layer_name = layer_name
    if condition is not None:
        cls.kernel_condition = staticmethod(condition)


def use_kernel_forward_from_hub(layer_name: str, condition=None):
    """Class decorator: the class's forward may be replaced by `kernelize`. On a function: returns an instance
    of a generated nn.Module whose forward calls the function, kernelizable the same way."""

    def decorate(obj):
        if isinstance(obj, type):
            replace_kernel_forward_from_hub(obj, layer_name, condition)
            return obj
        if not inspect.isfunction(obj):
            raise TypeError(
                f"@use_kernel_forward_from_hub({layer_name!r}) applies to an nn.Module class or a function, "
                f"got {obj!r}"
            )
        import torch.nn as nn

        fn = obj
        sig = inspect.signature(fn)

        def forward(self, *args, **kwargs):
            return fn(*args, **kwargs)

        self_param = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)
        forward.__signature__ = sig.replace(parameters=[self_param, *sig.parameters.values()])
        cls = type(f"{fn.__name__}_module", (nn.Module,), {"forward": forward, "__doc__": fn.__doc__})
        replace_kernel_forward_from_hub(cls, layer_name, condition)
        return cls()

    return decorate


def use_kernelized_func(*fns):
    """Class decorator: each instance keeps the function-modules (from use_kernel_forward_from_hub on
    functions) in `self.__dict__["_kernel_funcs"]`, outside the module tree but visible to `kernelize`."""

    for f in fns:
        if not hasattr(type(f), "kernel_layer_name"):
            raise ValueError(
                f"use_kernelized_func: {getattr(f, '__name__', f)!r} is not decorated with "
                "@use_kernel_forward_from_hub(...), so kernelize could never replace it"
            )

    def decorate(cls):
        original_init = cls.__init__

        @functools.wraps(original_init)
        def __init__(self, *args, **kwargs):
            original_init(self, *args, **kwargs)
            # setdefault: stacked @use_kernelized_func decorators add up instead of replacing each other
            funcs = self.__dict__.setdefault("_kernel_funcs", {})
            funcs.update({type(f).kernel_layer_name: f for f in fns})

        cls.__init__ = __init__
        return cls

    return decorate


# ---- the mapping -------------------------------------------------------------------------------------------


# layer name -> device type -> {Mode: repo} (plain devices) or [(min, max, {Mode: repo})] (cuda/rocm ranges)
_MAPPING: ContextVar[dict] = ContextVar("kforge_kernel_mapping", default={})  # noqa: B039 (never mutated in place)


def _copy(mapping: dict) -> dict:
    out = {}
    for layer, devices in mapping.items():
        out[layer] = {
            d: ([(lo, hi, dict(m)) for lo, hi, m in v] if isinstance(v, list) else dict(v))
            for d, v in devices.items()
        }
    return out


def _as_modes(value, where: str) -> dict:
    if isinstance(value, dict):
        for mode in value:
            if not isinstance(mode, Mode):
                raise ValueError(f"{where}: keys must be Mode values, got {mode!r}")
            _check_mode(mode)
        return dict(value)
    if not hasattr(value, "load"):
        raise ValueError(
            f"{where}: expected a LayerRepository (or a dict of Mode -> repository), got {value!r}"
        )
    return {Mode.FALLBACK: value}


def register_kernel_mapping(mapping: dict, inherit_mapping: bool = True) -> None:
    """Add {layer_name: {device: repo | {Mode: repo}}} to the current mapping (or replace it,
    inherit=False)."""
    new = _copy(_MAPPING.get()) if inherit_mapping else {}
    for layer_name, devices in mapping.items():
        for device, value in devices.items():
            dev = device if isinstance(device, Device) else Device(device)
            modes = _as_modes(value, f"mapping[{layer_name!r}][{device!r}]")
            slot = new.setdefault(layer_name, {})
            if dev.type in _RANGED:
                lo = dev.properties.min_capability if dev.properties else 0
                hi = dev.properties.max_capability if dev.properties else sys.maxsize
                # As in kernels, a new registration for a device (and capability range) replaces the
                # modes registered there before, rather than merging with them: the last insert wins.
                ranges = [r for r in slot.get(dev.type, []) if (r[0], r[1]) != (lo, hi)]
                slot[dev.type] = [*ranges, (lo, hi, modes)]
            else:
                slot[dev.type] = modes
    _MAPPING.set(new)


@contextmanager
def use_kernel_mapping(mapping: dict, *, inherit_mapping: bool = True):
    """Apply a mapping inside a `with` block; the previous mapping is restored on exit."""
    token = _MAPPING.set(_copy(_MAPPING.get()))
    try:
        register_kernel_mapping(mapping, inherit_mapping=inherit_mapping)
        yield
    finally:
        _MAPPING.reset(token)


# ---- kernelize ---------------------------------------------------------------------------------------------

_FALLBACK_CHAIN = {
    Mode.INFERENCE: [
        Mode.INFERENCE,
        Mode.INFERENCE | Mode.TORCH_COMPILE,
        Mode.TRAINING,
        Mode.TRAINING | Mode.TORCH_COMPILE,
        Mode.FALLBACK,
    ],
    Mode.TRAINING: [Mode.TRAINING, Mode.TRAINING | Mode.TORCH_COMPILE, Mode.FALLBACK],
    Mode.INFERENCE | Mode.TORCH_COMPILE: [
        Mode.INFERENCE | Mode.TORCH_COMPILE,
        Mode.TRAINING | Mode.TORCH_COMPILE,
        Mode.FALLBACK,
    ],
    Mode.TRAINING | Mode.TORCH_COMPILE: [Mode.TRAINING | Mode.TORCH_COMPILE, Mode.FALLBACK],
}
_CACHED_LAYER: dict = {}
_ALLOWED_MEMBERS = {"can_torch_compile", "has_backward", "forward"}


class _NoKernel(Exception):
    def __init__(self, flag: KernelizeFallback, message: str):
        super().__init__(message)
        self.flag = flag


def _device_of(model, device) -> str:
    if isinstance(device, Device):
        return device.type
    if device is not None and not isinstance(device, str) and isinstance(getattr(device, "type", None), str):
        device = device.type  # a torch.device, as kernels accepts: its type ("cuda:1" -> "cuda")
    if device is not None:
        if device not in DEVICE_TYPES:
            raise ValueError(f"kernelize(device={device!r}): use one of {', '.join(DEVICE_TYPES)}")
        return device
    param = next(iter(model.parameters()), None)
    if param is None:
        raise ValueError("kernelize: the model has no parameters to infer the device from; pass device=")
    import torch

    kind = param.device.type
    return "rocm" if kind == "cuda" and getattr(torch.version, "hip", None) else kind


@functools.cache
def _capability() -> int:
    import torch

    if getattr(torch.version, "hip", None):
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        arch = props.gcnArchName.split(":")[0]  # gfx942 -> 94, gfx1151 -> 115
        return int(arch[3:-1], 16) if len(arch) == 6 else int(arch[3:-1])
    major, minor = torch.cuda.get_device_capability()
    return major * 10 + minor


def _select(layer_name: str, device: str, mode: Mode):
    mapping = _MAPPING.get()
    if layer_name not in mapping:
        raise _NoKernel(KernelizeFallback.NO_LAYER, f"no kernel mapping for layer {layer_name!r}")
    slot = mapping[layer_name].get(device)
    if slot is None:
        raise _NoKernel(
            KernelizeFallback.NO_DEVICE, f"layer {layer_name!r} has no mapping for device {device!r}"
        )
    if isinstance(slot, list):
        cap = _capability()
        matching = [(hi - lo, modes) for lo, hi, modes in slot if lo <= cap <= hi]
        if not matching:
            raise _NoKernel(
                KernelizeFallback.NO_COMPATIBLE_PROPERTIES,
                f"layer {layer_name!r}: no {device} mapping covers capability {cap}",
            )
        slot = min(matching, key=lambda m: m[0])[1]  # the narrowest range wins
    for candidate in _FALLBACK_CHAIN[mode]:
        if candidate in slot:
            return slot[candidate], candidate
    raise _NoKernel(
        KernelizeFallback.NO_COMPATIBLE_MODE,
        f"layer {layer_name!r} on {device}: no repository for mode {mode}",
    )


def _validate_layer(layer, original_cls, layer_name: str) -> None:
    import torch.nn as nn

    if not (isinstance(layer, type) and issubclass(layer, nn.Module)):
        raise TypeError(f"kernel layer {layer_name!r} must be an nn.Module subclass, got {layer!r}")
    if "__init__" in layer.__dict__:
        raise TypeError(
            f"kernel layer {layer_name!r} must not define __init__ (it runs on the original's state)"
        )
    extra = [
        n
        for n in layer.__dict__
        if not (n.startswith("__") and n.endswith("__")) and n not in _ALLOWED_MEMBERS
    ]
    if extra:
        raise TypeError(
            f"kernel layer {layer_name!r} has members other than forward/has_backward/can_torch_compile: "
            f"{extra}"
        )
    want = [(p.kind) for p in inspect.signature(original_cls.forward).parameters.values()]
    got = [(p.kind) for p in inspect.signature(layer.forward).parameters.values()]
    if want != got:
        raise TypeError(
            f"kernel layer {layer_name!r}: forward{inspect.signature(layer.forward)} does not match the "
            f"original forward{inspect.signature(original_cls.forward)}"
        )


def _supports(layer, mode: Mode) -> bool:
    if Mode.TRAINING in mode and not getattr(layer, "has_backward", True):
        return False
    return not (Mode.TORCH_COMPILE in mode and not getattr(layer, "can_torch_compile", False))


def _kernelize_one(module, device: str, mode: Mode, fallback: KernelizeFallback) -> None:
    cls = type(module)
    layer_name = cls.kernel_layer_name
    module.__dict__.pop("forward", None)  # start from the original forward: kernelize is repeatable
    if os.environ.get("DISABLE_KERNEL_MAPPING", "0") not in ("", "0"):
        return
    try:
        repo, found_mode = _select(layer_name, device, mode)
        if (repo, device) not in _CACHED_LAYER:
            try:
                _CACHED_LAYER[repo, device] = repo.load(device)
            except (FileNotFoundError, KernelError, ImportError, OSError) as e:
                raise _NoKernel(
                    KernelizeFallback.CANNOT_LOAD, f"layer {layer_name!r}: cannot load {repo}: {e}"
                ) from e
        layer = _CACHED_LAYER[repo, device]
    except _NoKernel as e:
        if e.flag == KernelizeFallback.NO_LAYER:
            log.warning("%s", e)
        if e.flag in fallback:
            return
        raise ValueError(
            f"kernelize: {e} (pass use_fallback=True or a KernelizeFallback to keep the original)"
        ) from (e.__cause__)
    _validate_layer(layer, cls, layer_name)
    # Reference §6.3 step 4: a repository registered for a mode its layer does not support is an error...
    if found_mode != Mode.FALLBACK and not _supports(layer, found_mode):
        raise ValueError(
            f"kernelize: layer {layer_name!r} from {repo} was registered for {found_mode} but does "
            f"not support {found_mode} (has_backward/can_torch_compile)"
        )
    # ... and a FALLBACK layer that cannot run the requested mode keeps the original, if NO_COMPATIBLE_MODE.
    if not _supports(layer, mode):
        if KernelizeFallback.NO_COMPATIBLE_MODE in fallback:
            return
        raise ValueError(
            f"kernelize: layer {layer_name!r} from {repo} does not support {mode} "
            "(has_backward/can_torch_compile); pass use_fallback=True to keep the original forward"
        )
    module.forward = types.MethodType(layer.forward, module)


def kernelize(model, *, mode: Mode, device=None, use_fallback: bool | KernelizeFallback = True):
    """Replace the forward of every kernelizable layer of `model` per the current mapping; returns `model`."""
    if not isinstance(mode, Mode) or Mode.FALLBACK in mode:
        raise ValueError(
            f"kernelize(mode={mode!r}): use Mode.INFERENCE or Mode.TRAINING (optionally |TORCH_COMPILE)"
        )
    if Mode.INFERENCE not in mode and Mode.TRAINING not in mode:
        raise ValueError(f"kernelize(mode={mode}): mode must include Mode.INFERENCE or Mode.TRAINING")
    if isinstance(use_fallback, bool):
        fallback = KernelizeFallback.DEFAULT if use_fallback else KernelizeFallback.NONE
    elif isinstance(use_fallback, KernelizeFallback):
        fallback = use_fallback
    else:
        raise TypeError(f"use_fallback must be a bool or KernelizeFallback, got {use_fallback!r}")
    dev = _device_of(model, device)
    for _, module in model.named_modules():
        for fn_module in (module.__dict__.get("_kernel_funcs") or {}).values():
            _kernelize_one(fn_module, dev, mode, fallback)
        cls = type(module)
        if hasattr(cls, "kernel_layer_name"):
            condition = getattr(cls, "kernel_condition", None)
            if condition is not None and not condition(module):
                module.__dict__.pop("forward", None)
                continue
            _kernelize_one(module, dev, mode, fallback)
    return model
