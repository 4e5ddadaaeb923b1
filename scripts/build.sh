#!/usr/bin/env bash
# Configures (once) and builds genemask in ./build with ccache. Re-running reuses the build.
# Usage: scripts/build.sh [extra cmake -D options]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${GENEMASK_BUILD_DIR:-"$root/build"}
jobs=${GENEMASK_JOBS:-$(nproc)}
if [ ! -f "$build/build.ninja" ] || [ $# -gt 0 ]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@"
fi
cmake --build "$build" -j "$jobs"
echo "built: $build/src/cli/genemask"
