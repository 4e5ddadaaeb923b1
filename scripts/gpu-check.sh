#!/usr/bin/env bash
# One command for a GPU node: builds genemask against the PyTorch already installed there
# (no root, no package manager), runs the GPU tests, then benchmarks a pretraining step of
# the dnabert and logo configs at 512 tokens in bf16 against the same step in Python
# PyTorch, and writes one JSON file and a table.
#
# Usage: scripts/gpu-check.sh [options]
#   --python PY       Python with torch 2.x (CUDA build); default $GENEMASK_PYTHON or python3
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
#                     of this script; the GPU tests then report themselves skipped)
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
if ! "$python" -c 'import torch' 2>/dev/null; then
  echo "gpu-check.sh: '$python' cannot import torch; name a Python with PyTorch 2.x: --python /path/to/python" >&2
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

if [ "$do_build" = 1 ]; then
  gen=()
  command -v ninja >/dev/null && gen=(-G Ninja)
  require_cuda=ON
  [ "$device" = cpu ] && require_cuda=OFF
  cmake -S "$root" -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DGENEMASK_PYTHON="$python" \
    -DGENEMASK_REQUIRE_CUDA=$require_cuda ${cmake_prefix:+-DCMAKE_PREFIX_PATH="$cmake_prefix"}
  cmake --build "$build" -j "$(nproc)" --target genemask train_bench model_tests
fi
bin="$build/src/cli/genemask"
"$bin" --version

echo "== GPU tests"
# The C++ checks of the step's parts (SDPA, fused AdamW, buckets), then the commands on the
# GPU against the CPU: bf16 vs fp32 loss, checkpoint and resume, embed, finetune, NCCL at
# world size 1 and MPI with 2 ranks on one GPU.
"$build/tests/model_tests" --gtest_brief=1 --gtest_filter='Attention.*:FusedAdamW.*:GradBuckets.*:AllReduceChoice.*'
tests_rc=0
GENEMASK_BIN="$bin" PYTHONPATH="$root/tests/cli" "$python" "$root/tests/cli/test_gpu.py" || tests_rc=$?
case $tests_rc in
  0) gpu_tests=passed ;;
  77) gpu_tests=skipped ;;
  *) gpu_tests=failed ;;
esac

echo "== benchmark: one pretraining step, 512 tokens, $precision on $device ($steps steps)"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
threads=$(nproc)
if [ "$device" = cpu ]; then batch_dnabert=1; batch_logo=2; fi
for cfg in dnabert logo; do
  b=$batch_dnabert
  [ "$cfg" = logo ] && b=$batch_logo
  "$build/bench/train_bench" "$cfg" "$threads" "$b" 512 "$steps" "$device" "$precision" >>"$work/bench.jsonl"
  "$python" "$root/bench/train_bench.py" "$cfg" "$threads" "$b" 512 "$steps" "$device" "$precision" >>"$work/bench.jsonl"
done
"$python" - "$work/bench.jsonl" "$out" "$device" "$gpu_tests" "$peak" <<'PY'
import json, sys, time
import torch
rows = [json.loads(l) for l in open(sys.argv[1])]
out, device, gpu_tests, peak = sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
if peak:
    peak_tflops, peak_how = float(peak), "given (--peak-tflops)"
elif device == "cuda":
    # The dense bf16 peak as this GPU delivers it: the best of a few 8192^3 matrix products.
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    torch.cuda.synchronize()
    best = 1e9
    for _ in range(10):
        t0 = time.perf_counter(); a @ b; torch.cuda.synchronize(); best = min(best, time.perf_counter() - t0)
    peak_tflops, peak_how = 2 * 8192**3 / best / 1e12, "measured: bf16 matmul 8192^3"
else:
    peak_tflops, peak_how = 0.0, "none (CPU)"
res = {"device": torch.cuda.get_device_name(0) if device == "cuda" else "cpu", "torch": torch.__version__,
       "gpu_tests": gpu_tests, "peak_tflops": peak_tflops, "peak_how": peak_how, "runs": []}
gm = {r["config"]: r for r in rows if r["impl"] == "genemask"}
pt = {r["config"]: r for r in rows if r["impl"] == "pytorch"}
print(f"{'config':8s} {'impl':9s} {'batch':>5s} {'tokens/s':>10s} {'step s':>8s} {'fwd+bwd':>8s} {'clip':>7s} "
      f"{'optim':>7s} {'TFLOP/s':>8s} {'MFU':>6s} {'peak GiB':>8s}")
for cfg in ("dnabert", "logo"):
    g, p = gm[cfg], pt[cfg]
    g["mfu"] = g["achieved_tflops"] / peak_tflops if peak_tflops else None
    g["ratio_vs_pytorch"] = g["median_tokens_per_s"] / p["median_tokens_per_s"]
    res["runs"] += [g, p]
    br = g["breakdown_s"]
    mfu = f"{g['mfu']:.1%}" if g["mfu"] is not None else "-"
    print(f"{cfg:8s} {'genemask':9s} {g['batch']:5d} {g['median_tokens_per_s']:10.0f} {g['median_step_s']:8.4f} "
          f"{br['forward_backward']:8.4f} {br['clip']:7.4f} {br['optimizer']:7.4f} {g['achieved_tflops']:8.1f} "
          f"{mfu:>6s} {g['peak_memory_gib']:8.2f}")
    print(f"{cfg:8s} {'pytorch':9s} {p['batch']:5d} {p['median_tokens_per_s']:10.0f} {p['median_step_s']:8.4f} "
          f"{'':8s} {'':7s} {'':7s} {'':8s} {'':6s} {p['peak_memory_gib']:8.2f}")
    print(f"{cfg:8s} genemask / PyTorch: {g['ratio_vs_pytorch']:.2f}x tokens/s")
print(f"peak for MFU: {peak_tflops:.0f} TFLOP/s ({peak_how}); GPU tests: {gpu_tests}")
with open(out, "w") as f:
    json.dump(res, f, indent=2)
print(f"wrote {out}")
PY
[ "$gpu_tests" != failed ] || { echo "gpu-check.sh: GPU tests failed" >&2; exit 1; }
