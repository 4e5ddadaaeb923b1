#!/usr/bin/env bash
# Installs everything genemask needs to build, test and benchmark on Debian 12 (bookworm).
# Run as root (or with sudo). Only Debian packages; no other network access.
set -euo pipefail

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive

packages=(
  # toolchain
  build-essential cmake ninja-build ccache pkg-config git
  # MPI, HDF5 (C API, Open MPI flavour), serialization, tests
  openmpi-bin libopenmpi-dev libhdf5-openmpi-dev hdf5-tools
  libboost-serialization-dev libboost-dev libgtest-dev libgmock-dev libyaml-cpp-dev
  # training stack: LibTorch with a fast BLAS (reference BLAS is ~14x slower)
  libtorch-dev libopenblas0-openmp libopenblas-openmp-dev
  # helpers
  libcli11-dev nlohmann-json3-dev libfmt-dev zlib1g-dev libisal-dev libssl-dev
  # fuzzing (libFuzzer runtime for clang)
  clang libclang-rt-14-dev
  # peers and independent references used by tests and benchmarks
  jellyfish kmc python3 python3-h5py python3-numpy python3-torch python3-scipy python3-sklearn tabix
  # default data and tooling
  xz-utils ca-certificates hyperfine shellcheck librsvg2-bin
  # a real single-node Slurm for the job-script test
  slurm-wlm munge
)

if [ "${GENEMASK_SKIP_APT_UPDATE:-0}" != "1" ]; then
  $SUDO apt-get update -q
fi
$SUDO apt-get install -y -q --no-install-recommends "${packages[@]}"

# LibTorch must use OpenBLAS (OpenMP flavour), not the reference BLAS.
for alt in libblas.so.3-x86_64-linux-gnu liblapack.so.3-x86_64-linux-gnu; do
  target=$(update-alternatives --list "$alt" 2>/dev/null | grep -m1 openblas-openmp || true)
  if [ -n "$target" ]; then $SUDO update-alternatives --set "$alt" "$target" >/dev/null; fi
done
echo "install-deps: done"
