"""Exceptions of the loader. Each subclasses the builtin that `kernels` 0.17 raises for the same case, so code
written against `kernels` (e.g. `except FileNotFoundError` in transformers) keeps working."""

from __future__ import annotations


class KernelError(Exception):
    """Base of every kforge loader error."""


class MetadataError(KernelError, ValueError):
    """metadata.json is missing, does not parse, or a key has the wrong type."""


class DigestMismatchError(KernelError, RuntimeError):
    """A variant's files do not match the digest in its metadata.json (tampered or corrupted)."""


class NoCompatibleVariantError(KernelError, FileNotFoundError):
    """The repo offers variants, but none runs on this system. The message has a table of every variant."""

    def __init__(self, message: str, trace: list | None = None):
        super().__init__(message)
        self.trace = trace or []


class KernelVersionNotFoundError(KernelError, ValueError):
    """`version=N` names a major version (branch `vN`) the repo does not have."""


class RevisionNotFoundError(KernelError, ValueError):
    """`revision=` names a branch, tag or commit the repo (or the offline cache) does not have."""


class UntrustedPublisherError(KernelError, ValueError):
    """The repo's owner is not a trusted kernel publisher and `trust_remote_code` does not allow the repo."""


class ArchMismatchError(KernelError, RuntimeError):
    """The variant was not built for this device's CUDA capability / ROCm gfx arch."""


class LockError(KernelError, ValueError):
    """A lock file is missing, malformed, lacks the repo, or the loaded variant does not match its hash."""


class KernelImportError(KernelError, ImportError):
    """Executing the variant's `__init__.py` failed (e.g. a `.so` with an undefined symbol)."""
