#!/usr/bin/env bash
# The default install's footprint: build the wheel of a checkout, install it into a fresh venv
# from the package index (no cache) and print the package count, the venv size and the time.
# Usage: scripts/install-footprint.sh [CHECKOUT] (default: this one); PYTHON is the interpreter
# with `build` installed (default: the checkout's .venv, as .ci/run makes it).
set -euo pipefail
src=$(cd "${1:-$(dirname "$0")/..}" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/tiermem-footprint.XXXXXX")
trap 'rm -rf "$work"' EXIT
"${PYTHON:-$src/.venv/bin/python}" -m build --wheel --outdir "$work/dist" "$src" >/dev/null
python3 -m venv "$work/venv"
"$work/venv/bin/python" -m pip install -q --upgrade pip >/dev/null
base=$("$work/venv/bin/python" -m pip list --format=freeze | wc -l)
start=$(date +%s.%N)
PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 \
  "$work/venv/bin/python" -m pip install -q "$work"/dist/tiermem-*.whl
end=$(date +%s.%N)
count=$("$work/venv/bin/python" -m pip list --format=freeze | wc -l)
echo "packages installed: $((count - base))"
echo "venv size: $(du -sm "$work/venv" | cut -f1) MB"
echo "install time: $(python3 -c "print(f'{$end - $start:.1f}')") s"
