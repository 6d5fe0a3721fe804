"""Hub side of loading: version/revision -> commit, variant listing, trust, download, and the per-commit state
that lets a cached commit-pinned load make zero requests (reference §3.7, §4; gaps §7.2, §7.3-2, §7.3-9)."""

from __future__ import annotations

import json
import os
import sys
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from .errors import (
    KernelError,
    KernelVersionNotFoundError,
    NoCompatibleVariantError,
    RevisionNotFoundError,
    UntrustedPublisherError,
)
from .variants import System, VariantAccepted, resolve

REPO_TYPE = "kernel"
LIBRARY_VERSION = "0.1.0"


class KernelRepoNotFoundError(KernelError, ValueError):
    """The repo does not exist on the hub (or is private and no token with access was given)."""


_TRUE = ("1", "ON", "YES", "TRUE")


def cache_dir() -> Path:
    """KERNELS_CACHE, else huggingface_hub's HF_HUB_CACHE; read at call time so tests and users can switch
    it."""
    explicit = os.environ.get("KERNELS_CACHE")
    if explicit:
        return Path(explicit)  # without importing huggingface_hub: the warm path stays import-free
    from huggingface_hub import constants

    return Path(constants.HF_HUB_CACHE)


def offline() -> bool:
    """HF_HUB_OFFLINE (or TRANSFORMERS_OFFLINE, as huggingface_hub reads it) now, or as huggingface_hub saw it
    at import."""
    if any(os.environ.get(k, "").upper() in _TRUE for k in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")):
        return True
    constants = sys.modules.get("huggingface_hub.constants")
    return bool(constants is not None and constants.HF_HUB_OFFLINE)


def repo_cache(repo_id: str) -> Path:
    return cache_dir() / ("kernels--" + repo_id.replace("/", "--"))


def is_commit(rev: str) -> bool:
    return len(rev) in (40, 64) and all(c in "0123456789abcdef" for c in rev)


def _atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


@dataclass
class CommitState:
    """What kforge learnt about one immutable commit: every variant it offers, the publisher-trust decision,
    and the stamp of each variant verified against its digest. Stored under <cache>/.kforge/ beside the HF
    cache."""

    repo_id: str
    commit: str
    variants: list[str] = field(default_factory=list)
    trusted_publisher: bool | None = None
    verified: dict[str, list] = field(default_factory=dict)

    @staticmethod
    def path(repo_id: str, commit: str) -> Path:
        return cache_dir() / ".kforge" / ("kernels--" + repo_id.replace("/", "--")) / f"{commit}.json"

    @classmethod
    def load(cls, repo_id: str, commit: str) -> CommitState:
        try:
            data = json.loads(cls.path(repo_id, commit).read_text())
            variants, trusted, verified = (
                list(data["variants"]),
                data.get("trusted_publisher"),
                data["verified"],
            )
        except (OSError, ValueError, KeyError, TypeError):
            return cls(repo_id, commit)  # absent or unreadable: start over from the hub
        state = cls(repo_id, commit, variants, trusted, verified)
        state._saved = state._json()
        return state

    def _json(self) -> str:
        data = {
            "variants": self.variants,
            "trusted_publisher": self.trusted_publisher,
            "verified": self.verified,
        }
        return json.dumps(data)

    def save_if_changed(self) -> None:
        text = self._json()
        if text != getattr(self, "_saved", None):  # a warm load writes nothing
            _atomic_write(self.path(self.repo_id, self.commit), text)
            self._saved = text


class Hub:
    """One HfApi per endpoint and user agent, created only when a request is really needed."""

    _apis: dict = {}

    def __init__(self, user_agent=None):
        self.user_agent = user_agent

    @property
    def api(self):
        from huggingface_hub import HfApi, constants

        # HF_ENDPOINT read now, not at huggingface_hub's import, so it can be set after importing kforge.
        endpoint = os.environ.get("HF_ENDPOINT", constants.ENDPOINT).rstrip("/")
        key = (endpoint, json.dumps(self.user_agent, sort_keys=True, default=str))
        if key not in Hub._apis:
            Hub._apis[key] = HfApi(
                endpoint=endpoint,
                library_name="kforge",
                library_version=LIBRARY_VERSION,
                user_agent=self.user_agent,
            )
        return Hub._apis[key]

    def _call(self, repo_id: str, ref: str | None, fn, *args, **kwargs):
        """Run a hub call, turning huggingface_hub's not-found errors into messages that say what to do."""
        from huggingface_hub.errors import RepositoryNotFoundError
        from huggingface_hub.errors import RevisionNotFoundError as HfRevisionNotFound

        try:
            return fn(*args, **kwargs)
        except RepositoryNotFoundError:
            raise KernelRepoNotFoundError(
                f"kernel repo {repo_id!r} not found on {self.api.endpoint}: check the name, or set HF_TOKEN "
                "to a "
                "token that can read it if it is private"
            ) from None
        except HfRevisionNotFound:
            raise RevisionNotFoundError(
                f"{repo_id} has no revision {ref!r} (branch, tag or commit); list them with "
                f"huggingface_hub.list_repo_refs({repo_id!r}, repo_type='kernel')"
            ) from None

    def resolve_commit(
        self, repo_id: str, revision: str | None, version: int | None, *, local_only: bool
    ) -> str:
        """Commit for version/revision. A commit needs no request; offline, refs recorded in the cache are
        used."""
        if version is not None and (not isinstance(version, int) or isinstance(version, bool)):
            raise TypeError(f"version must be an int major version (branch v<N>), got {version!r}")
        ref = f"v{version}" if version is not None else revision
        if is_commit(ref):
            return ref
        ref_file = repo_cache(repo_id) / "refs" / ref
        if local_only:
            if ref_file.is_file():
                return ref_file.read_text().strip()
            err = KernelVersionNotFoundError if version is not None else RevisionNotFoundError
            raise err(
                f"offline and {repo_id}@{ref} is not in the cache ({ref_file} is missing): load it once "
                "online "
                "(kforge records refs for offline use), pass revision=<commit>, or use LOCAL_KERNELS"
            )
        if version is not None:
            refs = self._call(repo_id, ref, self.api.list_repo_refs, repo_id, repo_type=REPO_TYPE)
            branches = {b.name: b.target_commit for b in refs.branches}
            versions = sorted(int(n[1:]) for n in branches if n.startswith("v") and n[1:].isdigit())
            if ref not in branches:
                raise KernelVersionNotFoundError(
                    f"{repo_id} has no version {version} (branch {ref}); available versions: "
                    f"{', '.join(map(str, versions)) or 'none'}"
                )
            if versions and versions[-1] > version:
                warnings.warn(
                    f"{repo_id}: version {versions[-1]} is available (you asked for {version})", stacklevel=4
                )
            commit = branches[ref]
        else:
            commit = self._call(
                repo_id, ref, self.api.repo_info, repo_id, repo_type=REPO_TYPE, revision=ref
            ).sha
        _atomic_write(ref_file, commit)  # so version=N / revision=<branch> also resolve offline later
        return commit

    def is_trusted_publisher(self, repo_id: str) -> bool:
        owner = repo_id.split("/")[0]
        try:
            overview = self.api.get_organization_overview(owner)
        except Exception as e:
            raise UntrustedPublisherError(
                f"could not verify publisher trust for {owner!r} ({type(e).__name__}: {e}); pass "
                f"trust_remote_code=[{repo_id!r}] (or True) if you trust this repo"
            ) from None
        return getattr(overview, "trustedKernelPublisher", False) is True

    def list_variants(self, repo_id: str, commit: str) -> list[str]:
        from huggingface_hub.hf_api import RepoFolder

        tree = self._call(
            repo_id,
            commit,
            self.api.list_repo_tree,
            repo_id,
            path_in_repo="build",
            repo_type=REPO_TYPE,
            revision=commit,
        )
        return [e.path.split("/", 1)[1] for e in tree if isinstance(e, RepoFolder)]

    def _download_options(self) -> dict:
        """What every download passes: this hub, kforge's cache (which the loader reads back), and kforge as
        the client in the user agent."""
        return {
            "cache_dir": cache_dir(),
            "library_name": "kforge",
            "library_version": LIBRARY_VERSION,
            "user_agent": self.user_agent,
            "endpoint": self.api.endpoint,
        }

    def download_variant(self, repo_id: str, commit: str, name: str) -> Path:
        from huggingface_hub import snapshot_download

        root = self._call(
            repo_id,
            commit,
            snapshot_download,
            repo_id,
            repo_type=REPO_TYPE,
            revision=commit,
            allow_patterns=[f"build/{name}/*"],
            ignore_patterns=["*.pyc", "**/__pycache__/**"],
            **self._download_options(),
        )
        return Path(root) / "build" / name

    def download_file(self, repo_id: str, commit: str, filename: str) -> Path:
        from huggingface_hub import hf_hub_download

        return Path(
            self._call(
                repo_id,
                commit,
                hf_hub_download,
                repo_id,
                filename,
                repo_type=REPO_TYPE,
                revision=commit,
                **self._download_options(),
            )
        )


def trust_allows(repo_id: str, trust_remote_code) -> bool:
    if trust_remote_code is True:
        return True
    if isinstance(trust_remote_code, (list, tuple, set, frozenset)):
        return repo_id in trust_remote_code
    if trust_remote_code is not False and trust_remote_code is not None:
        raise TypeError(f"trust_remote_code must be a bool or a list of repo ids, got {trust_remote_code!r}")
    return False


def untrusted(repo_id: str, why: str) -> UntrustedPublisherError:
    owner = repo_id.split("/")[0]
    return UntrustedPublisherError(
        f"{owner!r} is not a trusted kernel publisher ({why}); loading runs the repo's code, so pass "
        f"trust_remote_code=[{repo_id!r}] (or True) if you trust {repo_id}"
    )


def no_variant_message(where: str, trace: list, system: System) -> str:
    lines = [f"no kernel variant in {where} is compatible with this system ({system.describe()})."]
    if not trace:
        lines.append("It offers no variant directories under build/.")
        return "\n".join(lines)
    width = max(len(r.name) for r in trace)
    lines.append("Every variant offered, and why it was rejected:")
    lines += [f"  {r.name:<{width}}  {getattr(r, 'reason', 'accepted')}" for r in trace]
    closest = closest_variant(trace)
    if closest is not None:
        lines.append(f"Closest: {closest.name} ({closest.reason}).")
    lines.append(
        "Rebuild the kernel for this system, pass backend='cpu' for a CPU build, or install a matching torch."
    )
    return "\n".join(lines)


# How near a rejection is, from "only the CUDA minor is off" to "another CPU/OS": lower is closer.
_CLOSENESS = (
    ("newer than host CUDA", 0),
    ("another major version", 1),
    ("backend", 2),
    ("C++ ABI", 3),
    ("stable ABI", 3),
    ("torch", 4),
    ("tvm-ffi", 4),
    ("macOS", 4),
    ("noarch", 5),
    ("OS", 6),
    ("CPU", 6),
)


def closest_variant(trace: list):
    """The rejected variant that needs the least change to the host (or the build) to run."""

    def rank(r):
        for fragment, score in _CLOSENESS:
            if fragment in r.reason:
                return score
        return 9

    rejected = [r for r in trace if not isinstance(r, VariantAccepted)]
    return min(rejected, key=rank) if rejected else None


def choose_variant(names: list[str], system: System, where: str) -> tuple[str, list]:
    trace = resolve(names, system)
    if not trace or not isinstance(trace[0], VariantAccepted):
        raise NoCompatibleVariantError(no_variant_message(where, trace, system), trace)
    return trace[0].name, trace
