#!/usr/bin/env bash
# Shared set-up of the benchmarks (sourced): paths, and the benchmark genome built from
# the default chr22 (long N runs shortened, repeated COPIES times).
# Expects: root, copies. Sets: bin, python, work, run, g; bench_precisions sets precisions.
# BENCH_DIR (work) is the shared cache of benchmark inputs (genomes, tables), each written
# whole or not at all; everything a run makes goes in run, its own folder there, removed on
# exit: concurrent runs, and the user's own files under BENCH_DIR, are left alone.
# shellcheck disable=SC2034,SC2154  # set here for, and from, the scripts that source this
# Relative paths are taken from here, once: the scripts run commands from other folders.
bin=${GENEMASK_BIN:-"$root/build/src/cli/genemask"}
case $bin in /*) ;; */*) bin=$PWD/$bin ;; esac  # a bare name is looked up on PATH
# The project environment's Python (PyTorch 2.11, numpy, h5py: scripts/install-deps.sh).
python=${GENEMASK_PYTHON:-"$root/.venv/bin/python3"}
[ -x "$python" ] || python=python3
work=${BENCH_DIR:-/tmp/genemask-bench}
case $work in /*) ;; *) work=$PWD/$work ;; esac
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mkdir -p "$work"
run=$(mktemp -d "$work/$(basename "$0" .sh).XXXXXX")
partial=
trap 'rm -rf "$run"; if [ -n "$partial" ]; then rm -f "$partial"; fi' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
# to_cache DST CMD...: CMD's stdout to DST through a temporary beside it, renamed once CMD
# has succeeded, so DST is whole whenever it exists (a reader, or a concurrent run, never
# sees part of it).
to_cache() {
  local dst=$1
  shift
  partial=$(mktemp "$dst.XXXXXX") || return
  "$@" >"$partial" || return
  chmod "$(printf '%o' $((0666 & ~$(umask))))" "$partial" || return  # mktemp makes 0600
  mv -T "$partial" "$dst" || return
  partial=
}
# logged CMD...: CMD with its stderr kept in $run/logged.err (genemask's progress lines would
# crowd the figures); when CMD fails, its command line, exit code and last messages go to
# stderr and the script stops (exit 1), before anything reads its missing output. Call it
# in the script's own shell (not in a pipeline or $(...)), with stdout to a file.
logged() {
  local rc=0
  "$@" 2>"$run/logged.err" || rc=$?
  [ "$rc" = 0 ] && return 0
  {
    echo "$(basename "$0" .sh): this command failed (exit code $rc):$(printf ' %q' "$@")"
    echo "its last messages:"
    tail -n 20 "$run/logged.err"
  } >&2
  exit 1
}
# q ARG: ARG quoted for the sh -c of hyperfine's command lines (a path with spaces stays one)
q() { printf '%q' "$1"; }
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
