#!/usr/bin/env bash
# Runs the whole test suite: GoogleTest unit tests, MPI tests at 1/2/4 ranks, CLI tests
# against h5py and jellyfish, and a short fuzzing run of the FASTA parser.
set -euo pipefail
unset CDPATH  # cd DIR must not go to a folder of that name on CDPATH
root=$(cd "$(dirname "$0")/.." && pwd)
build=${GENEMASK_BUILD_DIR:-"$root/build"}
# Open MPI refuses to run as root unless told; CI runs as root.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cd "$build"
ctest --output-on-failure --no-tests=error -j "$(nproc)" "$@"
