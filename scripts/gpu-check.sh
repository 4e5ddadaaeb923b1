#!/usr/bin/env bash
# One command for a GPU node: builds genemask against the PyTorch already installed there
# (no root, no package manager), runs the GPU tests, then benchmarks a pretraining step of
# the dnabert and logo configs at 512 tokens in bf16 against the same step in Python
# PyTorch, and writes one JSON file and a table.
#
# Usage: scripts/gpu-check.sh [options]
#   --python PY       Python with torch 2.x (CUDA build), numpy and h5py; default
#                     $GENEMASK_PYTHON or python3
#   --prefix DIR      where MPI, HDF5, Boost, CLI11, fmt, nlohmann-json, GoogleTest are, if
#                     not on the default paths: a cluster module's prefix, or Debian packages
#                     unpacked with `dpkg -x pkg.deb DIR` (then DIR/usr is used). Repeatable.
#   --build DIR       build directory (default build-gpu)
#   --no-build        use the build directory as it is
#   --out FILE        the JSON results (default gpu-check.json)
#   --steps N         timed steps per benchmark (default 10)
#   --batch-dnabert N, --batch-logo N   sequences per step (default 32, 64)
#   --peak-tflops X   the GPU's dense bf16 peak for MFU (default: measured with a matmul)
#   --cpu             no GPU: run the same steps on the CPU with small batches (a dry run
#                     of this script; the GPU tests then run their bodies on the CPU only)
# The GPU tests start 2 ranks with $MPIEXEC (default mpiexec) and $MPIEXEC_FLAGS (default
# --oversubscribe for Open MPI's launcher, none for others: MPICH, Cray).
#
# Parts: build, model_tests (the C++ checks of the step's parts), gpu_tests
# (tests/cli/test_gpu.py), and one per benchmark run: bench_dnabert_genemask,
# bench_dnabert_pytorch, bench_logo_genemask, bench_logo_pytorch. A failing part does not
# stop the others; a part whose program did not build is skipped. The end prints a table
# of the parts.
#
# The JSON (--out), written even when parts fail:
#   parts        {name: {"status": "passed"|"failed"|"skipped", "exit_code": N or null,
#                 "seconds": S, "note": why it was skipped or failed, or ""}}
#   passed       true when no part failed (build skipped by --no-build counts as fine)
#   gpu_tests    the gpu_tests part's status
#   device       the GPU's name, or "cpu"; torch: PyTorch's version
#   peak_tflops, peak_how   the bf16 peak that MFU divides by, and where it came from
#   runs         one row per benchmark run that passed: impl ("genemask"/"pytorch"),
#                config, batch, seq, median_tokens_per_s, median_step_s, peak_memory_gib,
#                and for genemask breakdown_s, flops_per_token, achieved_tflops,
#                masked_fraction, mfu (null without a peak) and ratio_vs_pytorch (null
#                when the PyTorch run of that config failed)
# Exit codes: 0 every part passed (or was skipped by --no-build); 1 a part failed (or was
# skipped because its program did not build); 2 before any part ran: a bad option, a
# Python module missing (all missing ones are named), or no GPU visible without --cpu.
# docs/build.md ("A GPU node") explains the prefix and what each figure means.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
python=${GENEMASK_PYTHON:-python3}
build="$root/build-gpu"
out="$PWD/gpu-check.json"
steps=10
batch_dnabert=32
batch_logo=64
peak=""
do_build=1
device=cuda
precision=bf16
prefixes=()
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
  case "$1" in
    --python) python=$2; shift 2 ;;
    --prefix) prefixes+=("$2"); shift 2 ;;
    --build) build=$2; shift 2 ;;
    --no-build) do_build=0; shift ;;
    --out) out=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --batch-dnabert) batch_dnabert=$2; shift 2 ;;
    --batch-logo) batch_logo=$2; shift 2 ;;
    --peak-tflops) peak=$2; shift 2 ;;
    --cpu) device=cpu; precision=fp32; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "gpu-check.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
case "$out" in /*) ;; *) out="$PWD/$out" ;; esac
case "$out" in /*) ;; *) out="$PWD/$out" ;; esac

# Every Python module this script, bench/train_bench.py and the GPU tests import
# (tests/cli/test_gpu.py with test_cli.py and test_corpus.py), the standard library's aside;
# gpu_check_dry_run checks that the list is complete.
modules=(torch numpy h5py)
if ! missing=$("$python" - "${modules[@]}" 2>/dev/null <<'PY'
import importlib, sys
bad = []
for m in sys.argv[1:]:
    try:
        importlib.import_module(m)
    except Exception as e:  # ImportError, or a module that fails while loading
        bad.append(m if isinstance(e, ModuleNotFoundError) else f"{m} ({type(e).__name__}: {e})")
print(", ".join(bad))
PY
); then
  echo "gpu-check.sh: cannot run '$python'; name a Python with PyTorch 2.x, numpy and h5py: --python /path/to/python" >&2
  exit 2
fi
if [ -n "$missing" ]; then
  echo "gpu-check.sh: '$python' cannot import: $missing (needed: ${modules[*]}); install them or name another Python: --python /path/to/python" >&2
  exit 2
fi
"$python" -c 'import torch; print(f"PyTorch {torch.__version__}, CUDA {torch.version.cuda}, GPUs visible: {torch.cuda.device_count()}")'
if [ "$device" = cuda ] && ! "$python" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)'; then
  echo "gpu-check.sh: PyTorch sees no GPU (check nvidia-smi, CUDA_VISIBLE_DEVICES and the job's GPU request); --cpu for a dry run" >&2
  exit 2
fi

# Libraries from the prefixes: headers, libraries, tools (mpirun), CMake packages.
cmake_prefix=""
for p in "${prefixes[@]}"; do
  [ -d "$p/usr" ] && p="$p/usr"  # a dpkg -x tree
  cmake_prefix="${cmake_prefix:+$cmake_prefix;}$p"
  export PATH="$p/bin:$PATH"
  for lib in "$p/lib" "$p/lib64" "$p/lib/x86_64-linux-gnu" "$p/lib/x86_64-linux-gnu/openmpi/lib"; do
    [ -d "$lib" ] && export LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" LIBRARY_PATH="$lib${LIBRARY_PATH:+:$LIBRARY_PATH}"
  done
  for inc in "$p/include" "$p/include/x86_64-linux-gnu" "$p/include/hdf5/serial"; do
    [ -d "$inc" ] && export CPATH="$inc${CPATH:+:$CPATH}"
  done
  # Open MPI unpacked from Debian packages: its wrappers and mpirun look under OPAL_PREFIX.
  [ -d "$p/lib/x86_64-linux-gnu/openmpi" ] && export OPAL_PREFIX="$p"
done
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
: >"$work/parts.tsv"
# record NAME STATUS EXIT_CODE MILLISECONDS NOTE: one line of parts.tsv per part.
record() { printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "${5//$'\t'/ }" >>"$work/parts.tsv"; }
# part NAME COMMAND...: runs it; passed or failed by its exit code. Never stops the script.
part() {
  local name=$1 rc=0 t0
  shift
  echo "== $name"
  t0=$(date +%s%N)
  "$@" || rc=$?
  record "$name" "$([ "$rc" = 0 ] && echo passed || echo failed)" "$rc" $((($(date +%s%N) - t0) / 1000000)) ""
  [ "$rc" = 0 ] || echo "gpu-check.sh: part $name failed (exit code $rc)" >&2
  return 0
}
skip() { echo "== $1: skipped ($2)"; record "$1" skipped "" 0 "$2"; }
# ready PART TARGET PROGRAM: whether PART can run: skipped when TARGET did not build,
# failed when PROGRAM is missing (--no-build on a build directory without it).
failed_targets=" "
ready() {
  if [[ "$failed_targets" == *" $2 "* ]]; then skip "$1" "$2 did not build"; return 1; fi
  if [ ! -x "$3" ]; then
    echo "gpu-check.sh: part $1 failed: $3 is missing" >&2
    record "$1" failed 127 0 "$3 is missing"
    return 1
  fi
}

# shellcheck disable=SC2317  # called through part(), which shellcheck does not follow
build_all() {
  local gen=() require_cuda=ON rc=0 t
  command -v ninja >/dev/null && gen=(-G Ninja)
  [ "$device" = cpu ] && require_cuda=OFF
  if ! cmake -S "$root" -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DGENEMASK_PYTHON="$python" \
      -DGENEMASK_REQUIRE_CUDA="$require_cuda" ${cmake_prefix:+-DCMAKE_PREFIX_PATH="$cmake_prefix"}; then
    failed_targets=" genemask train_bench model_tests "
    return 3
  fi
  # One target at a time: a test that does not compile leaves the binary and the benchmark.
  for t in genemask train_bench model_tests; do
    cmake --build "$build" -j "$(nproc)" --target "$t" || { rc=$?; failed_targets+="$t "; }
  done
  return "$rc"
}
if [ "$do_build" = 1 ]; then
  part build build_all
else
  skip build "--no-build"
fi
bin="$build/src/cli/genemask"
[ -x "$bin" ] && { "$bin" --version || true; }

# The C++ checks of the step's parts (SDPA, fused AdamW, buckets, the all-reduce choice).
ready model_tests model_tests "$build/tests/model_tests" &&
  part model_tests "$build/tests/model_tests" --gtest_brief=1 \
    --gtest_filter='Attention.*:FusedAdamW.*:GradBuckets.*:AllReduceChoice.*'
# The commands on the GPU against the CPU (on the CPU alone with --cpu): bf16 vs fp32 loss,
# checkpoint and resume, embed, finetune, NCCL at world size 1 and MPI with 2 ranks.
ready gpu_tests genemask "$bin" &&
  part gpu_tests env GENEMASK_BIN="$bin" PYTHONPATH="$root/tests/cli" "$python" "$root/tests/cli/test_gpu.py"

echo "== benchmark: one pretraining step, 512 tokens, $precision on $device ($steps steps)"
threads=$(nproc)
if [ "$device" = cpu ]; then batch_dnabert=1; batch_logo=2; fi
# The inner shell expands "$@" and "$0" itself (the command, then its JSON file).
# shellcheck disable=SC2016
for cfg in dnabert logo; do
  b=$batch_dnabert
  [ "$cfg" = logo ] && b=$batch_logo
  ready "bench_${cfg}_genemask" train_bench "$build/bench/train_bench" &&
    part "bench_${cfg}_genemask" bash -c '"$@" >"$0"' "$work/bench-$cfg-genemask.json" \
      "$build/bench/train_bench" "$cfg" "$threads" "$b" 512 "$steps" "$device" "$precision"
  part "bench_${cfg}_pytorch" bash -c '"$@" >"$0"' "$work/bench-$cfg-pytorch.json" \
    "$python" "$root/bench/train_bench.py" "$cfg" "$threads" "$b" 512 "$steps" "$device" "$precision"
done

report_rc=0
"$python" - "$work" "$out" "$device" "$peak" <<'PY' || report_rc=$?
import json, os, sys, time
work, out, device, peak = sys.argv[1:5]
parts = {}
for line in open(os.path.join(work, "parts.tsv")):
    name, status, rc, ms, note = line.rstrip("\n").split("\t")
    parts[name] = {"status": status, "exit_code": int(rc) if rc else None, "seconds": int(ms) / 1000, "note": note}
# One JSON line per benchmark run that passed; a failed or skipped run has no row.
rows = {}
for cfg in ("dnabert", "logo"):
    for impl in ("genemask", "pytorch"):
        part = parts.get(f"bench_{cfg}_{impl}", {})
        path = os.path.join(work, f"bench-{cfg}-{impl}.json")
        if part.get("status") != "passed":
            continue
        try:
            lines = [l for l in open(path) if l.strip().startswith("{")]
            rows[(cfg, impl)] = json.loads(lines[-1])
        except (OSError, IndexError, ValueError) as e:
            part.update(status="failed", note=f"no result line in its output ({type(e).__name__})")
import torch
if peak:
    peak_tflops, peak_how = float(peak), "given (--peak-tflops)"
elif device == "cuda":
    # The dense bf16 peak as this GPU delivers it: the best of a few 8192^3 matrix products.
    try:
        a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
        for _ in range(3):
            a @ b
        torch.cuda.synchronize()
        best = 1e9
        for _ in range(10):
            t0 = time.perf_counter(); a @ b; torch.cuda.synchronize(); best = min(best, time.perf_counter() - t0)
        peak_tflops, peak_how = 2 * 8192**3 / best / 1e12, "measured: bf16 matmul 8192^3"
    except Exception as e:
        peak_tflops, peak_how = 0.0, f"not measured ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})"
else:
    peak_tflops, peak_how = 0.0, "none (CPU)"
try:
    name = torch.cuda.get_device_name(0) if device == "cuda" else "cpu"
except Exception as e:
    name = f"cuda (name unknown: {type(e).__name__})"
passed = all(p["status"] != "failed" for p in parts.values())
res = {"device": name, "torch": torch.__version__, "passed": passed,
       "gpu_tests": parts.get("gpu_tests", {}).get("status", "skipped"), "parts": parts,
       "peak_tflops": peak_tflops, "peak_how": peak_how, "runs": []}
for cfg in ("dnabert", "logo"):
    g, p = rows.get((cfg, "genemask")), rows.get((cfg, "pytorch"))
    if g:
        g["mfu"] = g["achieved_tflops"] / peak_tflops if peak_tflops else None
        g["ratio_vs_pytorch"] = g["median_tokens_per_s"] / p["median_tokens_per_s"] if p else None
    res["runs"] += [r for r in (g, p) if r]
with open(out, "w") as f:  # before the table: a row that cannot be printed loses nothing
    json.dump(res, f, indent=2)
print(f"{'config':8s} {'impl':9s} {'batch':>5s} {'tokens/s':>10s} {'step s':>8s} {'fwd+bwd':>8s} {'clip':>7s} "
      f"{'optim':>7s} {'TFLOP/s':>8s} {'MFU':>6s} {'peak GiB':>8s}")
for cfg in ("dnabert", "logo"):
    g, p = rows.get((cfg, "genemask")), rows.get((cfg, "pytorch"))
    if g:
        br = g["breakdown_s"]
        mfu = f"{g['mfu']:.1%}" if g["mfu"] is not None else "-"
        print(f"{cfg:8s} {'genemask':9s} {g['batch']:5d} {g['median_tokens_per_s']:10.0f} {g['median_step_s']:8.4f} "
              f"{br['forward_backward']:8.4f} {br['clip']:7.4f} {br['optimizer']:7.4f} {g['achieved_tflops']:8.1f} "
              f"{mfu:>6s} {g['peak_memory_gib']:8.2f}")
    else:
        print(f"{cfg:8s} {'genemask':9s} (no result: {parts[f'bench_{cfg}_genemask']['status']})")
    if p:
        print(f"{cfg:8s} {'pytorch':9s} {p['batch']:5d} {p['median_tokens_per_s']:10.0f} {p['median_step_s']:8.4f} "
              f"{'':8s} {'':7s} {'':7s} {'':8s} {'':6s} {p['peak_memory_gib']:8.2f}")
    else:
        print(f"{cfg:8s} {'pytorch':9s} (no result: {parts[f'bench_{cfg}_pytorch']['status']})")
    if g and p:
        print(f"{cfg:8s} genemask / PyTorch: {g['ratio_vs_pytorch']:.2f}x tokens/s")
print(f"peak for MFU: {peak_tflops:.0f} TFLOP/s ({peak_how})")
print(f"wrote {out}")
print()
print(f"{'part':24s} {'status':8s} {'exit':>5s} {'seconds':>8s}  note")
for n, p in parts.items():
    rc = "-" if p["exit_code"] is None else str(p["exit_code"])
    print(f"{n:24s} {p['status']:8s} {rc:>5s} {p['seconds']:8.1f}  {p['note']}")
failed = [n for n, p in parts.items() if p["status"] == "failed"]
print("gpu-check: every part passed" if passed else f"gpu-check: {len(failed)} part(s) failed: {', '.join(failed)}")
sys.exit(0 if passed else 1)
PY
case $report_rc in
  0) exit 0 ;;
  1) exit 1 ;;
  *) echo "gpu-check.sh: the report failed (exit code $report_rc)" >&2; exit 1 ;;
esac
