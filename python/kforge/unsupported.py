"""Names of `kernels` 0.17's API that kforge deliberately does not implement (docs/loader.md). They exist so
that `from kforge import X` (or `import kforge as kernels`) still imports, and any use fails at once with an
error that says what to use instead, not with an AttributeError somewhere else."""

from __future__ import annotations

_FUNC_HINT = (
    "it was deprecated in kernels 0.16: decorate the function with @use_kernel_forward_from_hub(name), "
    "attach it to its module class with @use_kernelized_func(fn), and map `name` to a LayerRepository"
)


def _refuse(name: str, hint: str):
    raise NotImplementedError(f"kforge does not implement kernels' {name}: {hint}")


class _Unsupported:
    _hint = _FUNC_HINT

    def __init__(self, *args, **kwargs):
        _refuse(type(self).__name__, self._hint)


class FuncRepository(_Unsupported):
    """Not implemented (deprecated in kernels 0.16): use LayerRepository with use_kernel_forward_from_hub."""


class LocalFuncRepository(_Unsupported):
    """Not implemented (deprecated in kernels 0.16): use LocalLayerRepository."""


class LockedFuncRepository(_Unsupported):
    """Not implemented (deprecated in kernels 0.16): use LockedLayerRepository."""


class Benchmark(_Unsupported):
    """Not implemented: kforge has no `kernels benchmark` runner for kernel repos' benchmark scripts."""

    _hint = "kforge has no benchmark runner; run the kernel repo's benchmarks with HF's `kernels benchmark`"

    def __init_subclass__(cls, **kwargs):
        _refuse("Benchmark", cls._hint)


def use_kernel_func_from_hub(func_name: str):
    """Not implemented (deprecated in kernels 0.16): use use_kernel_forward_from_hub on the function."""
    _refuse("use_kernel_func_from_hub", _FUNC_HINT)
