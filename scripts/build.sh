#!/usr/bin/env bash
# Configures (once) and builds genemask in ./build with ccache. Re-running reuses the build.
# LibTorch is the project environment's PyTorch (.venv, scripts/install-deps.sh), and must
# have CUDA (pass -DGENEMASK_REQUIRE_CUDA=OFF for a CPU-only one). docs/build.md: builds
# against another PyTorch, on a cluster, without root.
# Usage: scripts/build.sh [extra cmake -D options]
set -euo pipefail
unset CDPATH  # cd DIR must not go to a folder of that name on CDPATH
root=$(cd "$(dirname "$0")/.." && pwd)
build=${GENEMASK_BUILD_DIR:-"$root/build"}
jobs=${GENEMASK_JOBS:-$(nproc)}
# Cache hits across checkouts of the tree (CI's fresh clone reuses a developer's cache).
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-"$root"} CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}
if [ ! -f "$build/build.ninja" ] || [ $# -gt 0 ]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGENEMASK_REQUIRE_CUDA=ON "$@"
fi
cmake --build "$build" -j "$jobs"
echo "built: $build/src/cli/genemask"

# The Python package (python/, genemask on PyPI's terms) into the project environment, built
# with the pinned scikit-build-core and nanobind that install-deps put there; its build
# directory (python/build) is kept, so a rebuild compiles only what changed.
venv=${GENEMASK_VENV:-"$root/.venv"}
if [ -x "$venv/bin/python3" ] && [ "${GENEMASK_SKIP_PYTHON:-0}" != "1" ]; then
  CCACHE_BASEDIR="$root" "$venv/bin/python3" -m pip install --disable-pip-version-check -q --no-build-isolation \
    --no-deps "$root/python"
  echo "built: the genemask Python package in $venv"
fi
