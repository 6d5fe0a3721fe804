"""Hub side of loading: version/revision -> commit, variant listing, trust, download, and the per-commit state
that lets a cached commit-pinned load make zero requests (reference §3.7, §4; gaps §7.2, §7.3-2, §7.3-9)."""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
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


class HubConnectionError(KernelError, ConnectionError):
    """The hub could not be reached (connection refused, DNS, timeout): nothing was loaded."""


# "org/name" as huggingface_hub accepts it (validate_repo_id), with the namespace kernels requires.
_REPO_PART = re.compile(r"^[\w][\w.-]*$")


def check_repo_id(repo_id) -> None:
    """Raise (before any request or cache access) unless `repo_id` is a hub repo id "org/name"."""
    if not isinstance(repo_id, str):
        raise TypeError(f"repo_id must be a str 'org/name', got {type(repo_id).__name__} {repo_id!r}")
    parts = repo_id.split("/")
    ok = (
        len(parts) == 2
        and len(repo_id) <= 96
        and all(_REPO_PART.match(p) and not p.endswith((".", "-")) for p in parts)
        and "--" not in repo_id
        and ".." not in repo_id
    )
    if not ok:
        raise ValueError(
            f"repo_id {repo_id!r} is not a kernel repo id: expected 'org/name' (letters, digits, '-', '_', "
            "'.'; no '--' or '..'), e.g. 'kernels-community/relu'"
        )


def check_revision(revision) -> None:
    """A branch, tag or commit name that is also safe as a path under the cache's refs/ folder."""
    if revision is None:
        return
    if not isinstance(revision, str):
        hint = f"; for major version {revision} use version={revision}" if isinstance(revision, int) else ""
        raise TypeError(
            f"revision must be a str (branch, tag or commit), got {type(revision).__name__} "
            f"{revision!r}{hint}"
        )
    segments = revision.split("/")
    if not revision or "\\" in revision or any(s in ("", ".", "..") for s in segments):
        raise ValueError(
            f"revision {revision!r} is not a branch, tag or commit name (empty, '.' or '..' path segments, "
            "or a backslash)"
        )


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
    """Write `path` through a temporary file unique to this call (threads and processes may write the same
    file at once), so readers see the old or the new content, never a partial one; no temporary is left."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


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
                data["variants"],
                data.get("trusted_publisher"),
                data["verified"],
            )
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return cls(repo_id, commit)  # absent or unreadable: start over from the hub
        well_formed = (
            isinstance(variants, list)
            and all(isinstance(v, str) for v in variants)
            and trusted in (True, False, None)
            and isinstance(verified, dict)
            and all(isinstance(k, str) and isinstance(v, list) for k, v in verified.items())
        )
        if not well_formed:
            return cls(repo_id, commit)  # corrupted: never trust any of it
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
        except _transport_errors() as e:
            raise HubConnectionError(
                f"cannot reach the hub at {self.api.endpoint} for {repo_id} ({type(e).__name__}: {e}); check "
                "HF_ENDPOINT and the network, or set HF_HUB_OFFLINE=1 to load what is cached"
            ) from e
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
        check_version(version)
        check_revision(revision)
        ref = f"v{version}" if version is not None else revision
        if is_commit(ref):
            return ref
        ref_file = repo_cache(repo_id) / "refs" / ref
        err = KernelVersionNotFoundError if version is not None else RevisionNotFoundError
        if local_only:
            if ref_file.is_file():
                recorded = ref_file.read_text().strip()
                if not is_commit(recorded):
                    raise err(
                        f"{ref_file} (the cached commit of {repo_id}@{ref}) is corrupted: expected a 40-hex "
                        f"commit, got {recorded[:60]!r}; delete it and load once online, or pass "
                        "revision=<commit>"
                    )
                return recorded
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


def check_version(version) -> None:
    if version is None:
        return
    if not isinstance(version, int) or isinstance(version, bool):
        raise TypeError(f"version must be an int major version (branch v<N>), got {version!r}")
    if version < 0:
        raise ValueError(f"version must be a major version >= 0 (branch v<N>), got {version}")


def _transport_errors() -> tuple[type[BaseException], ...]:
    """The HTTP clients' connection/timeout errors (huggingface_hub 2.x uses httpx2; older ones httpx or
    requests), as a tuple for `except`; only the clients already imported are looked at."""
    out = []
    for module, name in (("httpx2", "TransportError"), ("httpx", "TransportError")):
        cls = getattr(sys.modules.get(module), name, None)
        if isinstance(cls, type):
            out.append(cls)
    requests_exc = sys.modules.get("requests.exceptions")
    if requests_exc is not None:
        out += [requests_exc.ConnectionError, requests_exc.Timeout]
    return tuple(out)


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
