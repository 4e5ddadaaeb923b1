#!/usr/bin/env bash
# Configures (once) and builds genemask in ./build with ccache. Re-running reuses the build.
# LibTorch is the project environment's PyTorch (.venv, scripts/install-deps.sh), and must
# have CUDA (pass -DGENEMASK_REQUIRE_CUDA=OFF for a CPU-only one). docs/build.md: builds
# against another PyTorch, on a cluster, without root.
# Usage: scripts/build.sh [extra cmake -D options]
set -euo pipefail
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
