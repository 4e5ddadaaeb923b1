#!/usr/bin/env bash
# Installs everything genemask needs to build, test and benchmark on Debian 12 (bookworm):
#  - Debian packages with apt-get (as root, or with sudo);
#  - PyTorch 2.11 (CUDA 13.0 build; its LibTorch is the one genemask links) and the Python
#    references (numpy, h5py, SciPy, scikit-learn), pinned in scripts/requirements.txt, into
#    the project-local virtual environment ./.venv (GENEMASK_VENV overrides the path).
# pip's download cache (~/.cache/pip) is reused, so a second install downloads nothing.
set -euo pipefail
unset CDPATH  # cd DIR must not go to a folder of that name on CDPATH
root=$(cd "$(dirname "$0")/.." && pwd)

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive

packages=(
  # toolchain
  build-essential cmake ninja-build ccache pkg-config git
  # MPI, HDF5 (C API, Open MPI flavour), serialization, tests
  openmpi-bin libopenmpi-dev libhdf5-openmpi-dev hdf5-tools
  libboost-serialization-dev libboost-dev libgtest-dev libgmock-dev libyaml-cpp-dev
  # helpers
  libcli11-dev nlohmann-json3-dev libfmt-dev zlib1g-dev libisal-dev libssl-dev
  # fuzzing (libFuzzer runtime for clang)
  clang libclang-rt-14-dev
  # the interpreter of the project's virtual environment; peers used by tests and benchmarks
  python3 python3-venv jellyfish kmc tabix
  # default data and tooling
  xz-utils ca-certificates hyperfine shellcheck librsvg2-bin
  # a real Slurm for the job-script tests; network namespaces, links and their traffic
  # control (ip, tc), nsenter/unshare and pgrep for the multi-host test cluster
  slurm-wlm munge iproute2 util-linux procps
)

if [ "${GENEMASK_SKIP_APT_UPDATE:-0}" != "1" ]; then
  $SUDO apt-get update -q
fi
$SUDO apt-get install -y -q --no-install-recommends "${packages[@]}"

# PyTorch and the Python references, pinned, in a project-local environment (no root).
venv=${GENEMASK_VENV:-"$root/.venv"}
if [ ! -x "$venv/bin/python3" ]; then
  /usr/bin/python3 -m venv "$venv"
fi
"$venv/bin/python3" -m pip install --disable-pip-version-check -q --progress-bar off \
  -r "$root/scripts/requirements.txt"
# CUTLASS's C++ headers (the feed-forward's fused products, src/model/cuda/gemm_gelu.cu),
# pinned, without the dependencies of its Python tools, which genemask never runs.
"$venv/bin/python3" -m pip install --disable-pip-version-check -q --progress-bar off --no-deps \
  nvidia-cutlass==4.2.0.0
"$venv/bin/python3" - <<'PY'
import torch
print(f"install-deps: torch {torch.__version__} (CUDA {torch.version.cuda}) in {torch.__file__.rsplit('/', 2)[0]}")
PY
echo "install-deps: done"
