#!/usr/bin/env bash
# Shared set-up of the benchmarks (sourced): paths, and the benchmark genome built from
# the default chr22 (long N runs shortened, repeated COPIES times).
# Expects: root, copies. Sets: bin, python, work, g; bench_precisions sets precisions.
# shellcheck disable=SC2034,SC2154  # set here for, and from, the scripts that source this
bin=${GENEMASK_BIN:-"$root/build/src/cli/genemask"}
# The project environment's Python (PyTorch 2.11, numpy, h5py: scripts/install-deps.sh).
python=${GENEMASK_PYTHON:-"$root/.venv/bin/python3"}
[ -x "$python" ] || python=python3
work=${BENCH_DIR:-/tmp/genemask-bench}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mkdir -p "$work"
chr22=$("$root/scripts/default-genome.sh")
g="$work/bench-$copies.fa"
[ -s "$g" ] || "$python" "$root/bench/make-bench-genome.py" "$chr22" "$g" "$copies"
# precisions: the ones to measure: bf16 too where the CPU multiplies bf16 in hardware
# (AMX-BF16, AVX512-BF16); elsewhere it is emulated (tens of times slower), so fp32 only,
# and it says so.
bench_precisions() {
  precisions="fp32"
  if "$bin" --version | grep -q "bf16 instructions: none"; then
    echo "== this CPU has no bf16 instructions ($("$bin" --version | sed -n 's/^CPU: //p')): fp32 only"
  else
    precisions="fp32 bf16"
  fi
}
