"""`python -m kforge lock|download PROJECT`: the Python half of `kforge lock` / `kforge download`.

The `kforge` binary runs this because choosing a variant needs the host's torch (backend, CUDA version, C++
ABI; reference §3.2) and the lock hashes must be computed by the same code that checks them on load."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .errors import KernelError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kforge")
    sub = parser.add_subparsers(dest="command", required=True)
    lock = sub.add_parser("lock", help="resolve [tool.kernels.dependencies] into kernels.lock")
    lock.add_argument("project_dir", type=Path)
    lock.add_argument(
        "--format",
        choices=["kforge", "kernels"],
        default="kforge",
        help="kforge: with per-variant hashes (default); kernels: bare kernels 0.17 format",
    )
    download = sub.add_parser("download", help="fetch the kernels locked in kernels.lock into the cache")
    download.add_argument("project_dir", type=Path)
    download.add_argument("--all-variants", action="store_true", help="every variant, not only this system's")
    download.add_argument("--backend", default=None, help="'cpu' to pick CPU builds on an accelerator host")
    args = parser.parse_args(argv)

    from . import locking

    try:
        if args.command == "lock":
            path = locking.lock_project(args.project_dir, fmt=args.format)
            print(f"wrote {path}")
        else:
            dirs = locking.download_project(
                args.project_dir, all_variants=args.all_variants, backend=args.backend
            )
            print(f"{len(dirs)} variant(s) downloaded and verified")
    except (KernelError, FileNotFoundError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
