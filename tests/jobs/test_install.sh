#!/usr/bin/env bash
# The installed suite: `cmake --install` into a prefix, the prefix moved elsewhere, then run
# from there with no build tree and no library path in sight. The binary must find its
# libraries and the model plugin through its RUNPATH ($ORIGIN/../lib), the job scripts must
# find the binary next to them (PREFIX/share/genemask/jobs -> PREFIX/bin), and the whole
# tiny pipeline (count to report) must run.
# Usage: tests/jobs/test_install.sh BUILD_DIR   (KEEP=1 keeps the files)
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=$(cd "${1:?usage: test_install.sh BUILD_DIR}" && pwd)
py=${PYTHON:-/usr/bin/python3}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/genemask-install-XXXXXX")
if [ "${KEEP:-0}" != 1 ]; then trap 'rm -rf "$tmp"' EXIT; else echo "files kept in $tmp"; fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export GENEMASK_MPIRUN_OPTS=${GENEMASK_MPIRUN_OPTS:---oversubscribe}
unset GENEMASK_BIN GENEMASK_MODEL_LIB GENEMASK_JOBS_DIR LD_LIBRARY_PATH
fail=0
bad() { echo "FAIL: $*" >&2; fail=1; }

cmake --install "$build" --prefix "$tmp/prefix" >"$tmp/install.log"
mv "$tmp/prefix" "$tmp/moved"
p=$tmp/moved
for f in bin/genemask lib/libgenemask_model.so lib/libgenemask_core.so share/genemask/jobs/pipeline.sh \
         share/genemask/jobs/lib.sh share/doc/genemask/README.md share/doc/genemask/formats.md; do
  [ -e "$p/$f" ] || bad "not installed: $f"
done
# Relative paths only between the installed pieces; nothing points into the build tree.
for f in "$p/bin/genemask" "$p"/lib/libgenemask_*.so; do
  rpath=$(readelf -d "$f" | sed -n 's/.*(RUNPATH).*\[\(.*\)\]/\1/p')
  # shellcheck disable=SC2016  # the literal $ORIGIN of the dynamic linker
  case "$f" in
    */bin/*) want='$ORIGIN/../lib' ;;
    *) want='$ORIGIN' ;;
  esac
  case ":$rpath:" in *":$want:"*) ;; *) bad "$f: RUNPATH '$rpath' lacks $want" ;; esac
  case "$rpath" in *"$build"*) bad "$f: RUNPATH '$rpath' points into the build tree" ;; esac
done
# The plugin loads through the RUNPATH: --version names LibTorch (not "not available").
(cd "$tmp" && "$p/bin/genemask" --version) >"$tmp/version.txt" 2>&1 || bad "--version failed: $(cat "$tmp/version.txt")"
grep -q '^LibTorch [0-9]' "$tmp/version.txt" || bad "the moved binary did not load its plugin: $(cat "$tmp/version.txt")"

# The tiny pipeline, driven by the installed scripts, with the installed binary.
mkdir -p "$tmp/run"
# shellcheck source=tests/jobs/tiny_pipeline.sh
source "$repo/tests/jobs/tiny_pipeline.sh"
tiny_pipeline_inputs "$tmp/run" "$py"
(cd "$tmp/run" && "$p/share/genemask/jobs/pipeline.sh" --local pipeline.conf) >"$tmp/pipeline.log" 2>&1 ||
  { cat "$tmp/pipeline.log" >&2; bad "the installed pipeline failed"; }
for f in count/counts.h5 shards/manifest.json models/genemask/model.safetensors sweep/results.jsonl report/table1.md; do
  [ -s "$tmp/run/out/$f" ] || bad "the installed pipeline did not write $f"
done
n_ok=$(grep -c '"status": *"ok"' "$tmp/run/out/sweep/results.jsonl" || true)
[ "$n_ok" = 8 ] || bad "results.jsonl: $n_ok ok records, want 8 (2 models x 2 shots x 2 seeds)"
# The stages ran the installed binary: their outputs record the command line.
grep -q "\"command_line\": \"$p/bin/genemask shards" "$tmp/run/out/shards/manifest.json" ||
  bad "shards did not run $p/bin/genemask: $(grep command_line "$tmp/run/out/shards/manifest.json")"
state=$(find "$tmp/run/out/runs/genemask/checkpoints" -name state.json | head -n 1)
grep -q "\"command_line\": \"$p/bin/genemask pretrain" "$state" || bad "pretrain did not run $p/bin/genemask"
if grep -rqs "$build" "$tmp/run/out/shards/manifest.json" "$state"; then bad "a stage ran a binary of the build tree"; fi
if [ "$fail" != 0 ]; then echo "FAILED" >&2; exit 1; fi
echo "install test passed"
