#!/usr/bin/env bash
# Install Debian's clang-19/llvm-19/lld-19 (gfx942 device compiler, offload bundler, objdump) when missing.
set -euo pipefail
missing=()
command -v clang++-19 >/dev/null || missing+=(clang-19)
command -v llvm-objdump-19 >/dev/null || missing+=(llvm-19)
command -v ld.lld-19 >/dev/null || missing+=(lld-19)
if [ ${#missing[@]} -eq 0 ]; then
  echo "rocm tools: clang-19, llvm-19, lld-19 already installed"
  exit 0
fi
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
echo "rocm tools: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
