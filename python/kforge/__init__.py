"""kforge: load pre-built PyTorch kernels from a hub with the HF `kernels` 0.17 API, verified on every load."""

from .loader import (
    LoadedKernel,
    NoCompatibleVariantError,
    RepoInfo,
    get_kernel,
    get_kernel_variants,
    get_loaded_kernels,
    get_local_kernel,
    get_locked_kernel,
    has_kernel,
    install_kernel,
    load_kernel,
)
from .metadata import DigestMismatchError, Metadata, MetadataError
from .variants import VariantAccepted, VariantRejected

__version__ = "0.1.0"
__all__ = [
    "DigestMismatchError",
    "LoadedKernel",
    "Metadata",
    "MetadataError",
    "NoCompatibleVariantError",
    "RepoInfo",
    "VariantAccepted",
    "VariantRejected",
    "__version__",
    "get_kernel",
    "get_kernel_variants",
    "get_loaded_kernels",
    "get_local_kernel",
    "get_locked_kernel",
    "has_kernel",
    "install_kernel",
    "load_kernel",
]
