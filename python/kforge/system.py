"""Describe the host the way variant matching needs it (reference §3.2); torch is imported lazily."""

from __future__ import annotations

import functools
import platform
import sys
import sysconfig

from .variants import Compute, System

SUPPORTED_BACKENDS = ("cpu", "cuda", "rocm", "metal", "xpu", "cann", "neuron", "tpu")


def _host_cpu() -> str:
    m = platform.machine()
    return {"arm64": "aarch64", "AMD64": "x86_64"}.get(m, m)


def _torch_compute(torch) -> Compute:
    if hasattr(torch.backends, "tpu"):
        return Compute("tpu")
    if hasattr(torch, "neuron"):
        return Compute("neuron")
    if torch.version.cuda:
        return Compute("cuda", ".".join(torch.version.cuda.split(".")[:2]))
    if getattr(torch.version, "hip", None):
        return Compute("rocm", ".".join(torch.version.hip.split("-")[0].split(".")[:2]))
    if torch.backends.mps.is_available():
        return Compute("metal")
    xpu = getattr(torch.version, "xpu", None)
    if xpu:
        return Compute("xpu", f"{xpu[0:4]}.{xpu[5]}")
    return Compute("cpu")


@functools.cache
def detect_system(backend: str | None = None) -> System:
    """The running host; `backend="cpu"` selects CPU builds on an accelerator host."""
    import torch  # lazy: the loader must import without paying for torch until it resolves a variant

    compute = _torch_compute(torch)
    if backend is not None:
        name = {"npu": "cann"}.get(compute.type, compute.type)
        if backend not in ("cpu", name):
            raise ValueError(
                f"backend={backend!r} is not supported on this host: use 'cpu' or {name!r} "
                f"(all backends: {', '.join(SUPPORTED_BACKENDS)})"
            )
        if backend == "cpu":
            compute = Compute("cpu")
    os_ = platform.system().lower()
    try:
        import tvm_ffi  # noqa: F401

        tvm = ".".join(tvm_ffi.__version__.split(".")[:2])
    except ImportError:
        tvm = None
    return System(
        torch=".".join(torch.__version__.split("+")[0].split(".")[:2]),
        cxx11=bool(torch.compiled_with_cxx11_abi()) if os_ == "linux" else None,
        compute=compute,
        cpu=_host_cpu(),
        os=os_,
        tvm_ffi=tvm,
        macos=platform.mac_ver()[0] or None,
        # free-threaded builds exist from 3.13; abi3 extensions load in them from 3.15 (reference §3.4)
        free_threaded=(3, 13) <= sys.version_info < (3, 15)
        and bool(sysconfig.get_config_var("Py_GIL_DISABLED")),
        forced_cpu=backend == "cpu",
    )
