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
#   --no-build        use the build directory as it is (also one packed by
#                     scripts/gpu-bundle.sh for a node without compilers or libraries)
#   --out FILE        the JSON results (default gpu-check.json), in a folder that exists;
#                     never the genome; written under its name only once whole
#   --steps N         timed steps per benchmark (default 10)
#   --batch-dnabert N, --batch-logo N   sequences per step (default 32, 64)
#   --sweep-dnabert "N ...", --sweep-logo "N ..."   the micro-batch sweep on a GPU
#                     (default "16 32 64" and "64 128 256")
#   --peak-tflops X   the GPU's dense bf16 peak for MFU (default: measured with a matmul)
#   --genome FASTA    a genome (.fa or .fa.gz) for the pretrain_CFG parts: `genemask
#                     pretrain` on real shards of it (scripts/default-genome.sh makes the
#                     default one, human chr22); without it they are skipped
#   --pretrain-steps N   optimizer steps of each pretrain_CFG part (default 300; the rate
#                     is the last 100 steps')
#   --only PARTS      run these parts only (a comma-separated list of the names below; the
#                     build still runs unless --no-build); the others are skipped
#                     ("not asked for: --only")
#   --cpu             no GPU: run the same steps on the CPU with small batches (a dry run
#                     of this script; the GPU tests then run their bodies on the CPU only)
# The GPU tests start 2 ranks with $MPIEXEC (default mpiexec) and $MPIEXEC_FLAGS (default
# --oversubscribe for Open MPI's launcher, none for others: MPICH, Cray).
#
# Parts: build, model_tests (the C++ checks of the step's parts), gpu_tests
# (tests/cli/test_gpu.py), and per config (dnabert, logo): bench_CFG_genemask (the eager
# step, profiled), bench_CFG_graph (the step as one CUDA graph, profiled, and checked
# against the eager step: losses of 4 steps from the same state within 2e-3; GPU only),
# bench_CFG_no_ln_bf16 (the graph without the fused LayerNorm's bf16 copy, GENEMASK_FUSED's
# ln-bf16, which is on by default: its ablation; GPU only), bench_CFG_no_gelu (the graph
# without the fused bias + GELU, GENEMASK_FUSED's gelu, likewise), bench_CFG_bgrad (the graph
# with the bias gradients in the weight-gradient products, GENEMASK_FUSED's bgrad, off by
# default; GPU only), bench_CFG_no_ln_smem (the graph with the fused LayerNorm's backward
# summing gamma's and beta's gradients in registers instead of shared memory, without
# GENEMASK_FUSED's ln-smem, which is on by default: its ablation, profiled; GPU only),
# bench_CFG_no_ln_lean (the graph with the fused LayerNorm saving the pre-norm sum and a keep
# byte per element, without GENEMASK_FUSED's ln-lean, likewise), bench_CFG_no_bias_sum (the
# graph with the linear layers' bias gradients summed by ATen's reduction instead of
# genemask's column-sum kernel, without GENEMASK_FUSED's bias-sum, likewise),
# bench_CFG_no_ce (the graph with LibTorch's MLM loss instead of genemask's one kernel each
# way, without GENEMASK_FUSED's ce, likewise), bench_CFG_ce_pad (the graph with the MLM
# decoder's product over its 4101 classes padded to 4104, GENEMASK_FUSED's ce-pad, off by
# default: its gain; profiled; GPU only), bench_CFG_gemm_gelu (the graph with the
# feed-forward's products carrying the bias + GELU and its derivative + the bias gradient in
# their CUTLASS epilogues, GENEMASK_FUSED's gemm-gelu, off by default: its gain; profiled;
# Hopper GPUs only, elsewhere its run says the node did not run), bench_CFG_no_weight_bf16 (the graph casting the weights in
# every forward pass instead of reading their bf16 copies, GENEMASK_FUSED's weight-bf16, which
# is on by default: its ablation; GPU only), bench_CFG_gelu_rows2 and bench_CFG_gelu_rows4
# (the graph with the fused bias + GELU's kernels loading 2 or 4 of a thread's rows before
# they use the first, instead of 1: the same bits, cuda/rows_in_flight.hpp; profiled; GPU
# only), bench_CFG_pytorch,
# bench_CFG_sweep (every batch of the sweep, eager and graph, and PyTorch; GPU only),
# bench_CFG_packing (samples of 7-512 positions, uniform as the shards' recipe draws them,
# padded to the longest and packed: real tokens/s of each), bench_CFG_kernels (genemask's
# CUDA kernels timed alone at the config's shapes by bench/kernel_bench, against the copy
# bandwidth and LibTorch's kernels, their variants checked for the same bits; GPU only;
# docs/build.md "The kernels alone"), pretrain_CFG (`genemask pretrain` on real shards of
# --genome, as bench/paper_scale.sh runs it: random masking, the config's batch, one
# micro-batch a step, packing and CUDA graphs as pretrain's defaults; its real tokens/s and
# model TFLOP/s against the synthetic step's, at the same batch and at the rows it computed
# (train_bench again, at its mean rows of a micro-batch), and the profile of its 5 steps
# before the last (pretrain --profile-steps; fewer in a shorter run); skipped without
# --genome). A failing part does not stop
# the others; a part whose program did not build is skipped. The end prints a table of the
# parts.
#
# The JSON (--out), written even when parts fail:
#   parts        {name: {"status": "passed"|"failed"|"skipped", "exit_code": N or null,
#                 "seconds": S, "note": why it was skipped or failed, or ""}}
#   passed       true when no part failed (build skipped by --no-build counts as fine) and
#                the run was not interrupted
#   interrupted  null, or the signal and the part it stopped ("SIGTERM during part
#                bench_logo_graph"): a TERM (timeout, a job's time limit) or INT (Ctrl-C)
#                stops the running part, which is recorded as failed, and the JSON is
#                written from the parts that finished (those after it are absent)
#   gpu_tests    the gpu_tests part's status
#   device       the GPU's name, or "cpu"; torch: PyTorch's version
#   peak_tflops, peak_how   the bf16 peak that MFU divides by, and where it came from
#   runs         one row per benchmark run that passed: impl ("genemask"/"pytorch"),
#                variant ("eager"/"graph"/"no-ln-bf16"/"no-gelu"/"bgrad"/"no-ln-smem"/"no-ln-lean"/"no-bias-sum"/"no-ce"/"ce-pad"/"gemm-gelu"/"no-weight-bf16"/"gelu-rows2"/"gelu-rows4"), config, batch, seq, median_tokens_per_s,
#                median_step_s, peak_memory_gib (null on a CPU), and for genemask breakdown_s (eager),
#                flops_per_token, achieved_tflops, masked_fraction, mfu (against
#                peak_tflops, one peak for every row: the best its runs measured, or the
#                one given; null on a CPU), mfu_datasheet
#                (against the GPU's datasheet peak; null for a GPU not in the table),
#                profile (the step's time by kernel class, src/model/step_profile.hpp),
#                graph_check, and ratio_vs_pytorch (against PyTorch at the same batch;
#                null when that run failed)
#   rejected     the rows of runs whose CUDA graph's losses differ from the eager step's
#                by more than 2e-3 (their part failed), each with "rejected" saying so; in
#                no other figure (runs, best, ratios, pretrain's synthetic)
#   best         per config: the fastest genemask row, and its ratio to the fastest
#                PyTorch row
#   packing      per config: the padded and the packed run of bench_CFG_packing (rows as in
#                runs, with real_tokens and positions) and packed_vs_padded, the ratio of
#                their real tokens/s
#   kernels      per config: bench/kernel_bench's JSON (copy_gbs and one case per kernel
#                and variant: median_us, gbs, of_copy, vs_default, same_bits)
#   pretrain     per config: the pretrain_CFG part's run: batch, steps, real_tokens_per_s
#                and model_tflops (its last logged window of up to 100 steps), mfu
#                (against peak_tflops), mfu_datasheet, packing, cuda_graphs, loss,
#                fixed_shapes and shape_setup_steps (the CUDA graphs' shapes used and the
#                steps that captured one, kept out of its rates; 0 without graphs), and synthetic: the
#                benchmark row it is held against (the graph step at the same batch, else
#                the eager one: variant, achieved_tflops, mfu) with vs_synthetic, the
#                ratio of the model TFLOP/s, fill and rows_per_micro_batch (of its last
#                logged window: real tokens over the positions computed, and a
#                micro-batch's rows), input_wait and loader_busy (of the same window: the
#                shares of it the loop waited for its batches and the loader's busier
#                thread worked),
#                synthetic_same_rows (train_bench at those rows,
#                rounded, eager or graph as the run: batch, variant, achieved_tflops) with
#                vs_synthetic_same_rows, and profile (pretrain --profile-steps' on rank 0:
#                the classes of bench rows' "profile", for the real step; null if none)
# Exit codes: 0 every part passed (or was skipped by --no-build); 1 a part failed (or was
# skipped because its program did not build, or the report itself failed: it says so); 143
# or 130: stopped by TERM or INT (the JSON written as above); 2 before any part ran: a bad
# option (--peak-tflops not a number above 0 among them), a
# Python module missing (all missing ones are named), no GPU visible without --cpu, or a
# bundle (gpu-bundle.sh) built with another PyTorch version than --python's.
# docs/build.md ("A GPU node") explains the prefix and what each figure means.
set -euo pipefail
unset CDPATH  # cd DIR must not go to a folder of that name on CDPATH
root=$(cd "$(dirname "$0")/.." && pwd)
python=${GENEMASK_PYTHON:-python3}
build="$root/build-gpu"
out="$PWD/gpu-check.json"
steps=10
batch_dnabert=32
batch_logo=64
sweep_dnabert="16 32 64"
sweep_logo="64 128 256"
peak=""
peak_given=0
genome=""
pretrain_steps=300
only=""
only_given=0
do_build=1
device=cuda
precision=bf16
prefixes=()
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
  case "$1" in
    --python | --prefix | --build | --out | --steps | --batch-dnabert | --batch-logo | --sweep-dnabert | --sweep-logo | \
      --peak-tflops | --only | --genome | --pretrain-steps)
      [ $# -ge 2 ] || { echo "gpu-check.sh: $1 needs a value (see --help)" >&2; exit 2; } ;;
  esac
  case "$1" in
    --python) python=$2; shift 2 ;;
    --prefix) prefixes+=("$2"); shift 2 ;;
    --build) build=$2; shift 2 ;;
    --no-build) do_build=0; shift ;;
    --out) out=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --batch-dnabert) batch_dnabert=$2; shift 2 ;;
    --batch-logo) batch_logo=$2; shift 2 ;;
    --sweep-dnabert) sweep_dnabert=$2; shift 2 ;;
    --sweep-logo) sweep_logo=$2; shift 2 ;;
    --peak-tflops) peak=$2; peak_given=1; shift 2 ;;
    --genome) genome=$2; shift 2 ;;
    --pretrain-steps) pretrain_steps=$2; shift 2 ;;
    --only) only=$2; only_given=1; shift 2 ;;
    --cpu) device=cpu; precision=fp32; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "gpu-check.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
# Counts must be positive integers, checked before any part runs (a bad one would otherwise
# fail every benchmark part with train_bench's error).
# counts OPTION VALUE...: every VALUE a positive integer, at least one.
counts() {
  local opt=$1 n
  shift
  [ $# -gt 0 ] || { echo "gpu-check.sh: $opt needs at least one positive integer" >&2; exit 2; }
  for n in "$@"; do
    case $n in *[!0-9]* | 0 | 0[0-9]*) echo "gpu-check.sh: $opt takes positive integers, got '$n'" >&2; exit 2 ;; esac
  done
}
counts --steps "$steps"
counts --pretrain-steps "$pretrain_steps"
counts --batch-dnabert "$batch_dnabert"
counts --batch-logo "$batch_logo"
# shellcheck disable=SC2086  # a list of batch sizes
counts --sweep-dnabert $sweep_dnabert
# shellcheck disable=SC2086
counts --sweep-logo $sweep_logo
# --peak-tflops: a finite number above 0 (MFU divides by it; nan or inf would write a JSON
# no reader takes, and a word would stop the report only after every part has run).
if [ "$peak_given" = 1 ]; then
  if ! [[ $peak =~ ^([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]{1,2})?$ ]] ||
    ! awk -v x="$peak" 'BEGIN { v = x + 0; exit !(v > 0 && v * 0 == 0) }'; then
    echo "gpu-check.sh: --peak-tflops takes a number above 0 (the bf16 peak in TFLOP/s), got '$peak'" >&2
    exit 2
  fi
fi
# --only: every name one of the parts.
# The benchmark parts of one train_bench run each, in the report's order (bench_CFG_VARIANT;
# "genemask" is the eager step): the report reads their results by these names and labels
# each row with the variant's name in dashes.
one_run_variants="genemask graph no_ln_bf16 no_gelu bgrad no_ln_smem no_ln_lean no_bias_sum no_ce ce_pad gemm_gelu no_weight_bf16 gelu_rows2 gelu_rows4"
all_parts="build model_tests gpu_tests"
for cfg in dnabert logo; do
  for p in $one_run_variants packing pytorch sweep kernels; do
    all_parts+=" bench_${cfg}_$p"
  done
  all_parts+=" pretrain_$cfg"
done
if [ "$only_given" = 1 ]; then
  IFS=, read -r -a only_names <<<"$only"
  [ ${#only_names[@]} -gt 0 ] || { echo "gpu-check.sh: --only needs at least one part name" >&2; exit 2; }
  for n in "${only_names[@]}"; do
    [[ " $all_parts " == *" $n "* ]] || {
      echo "gpu-check.sh: --only: no part named '$n' (the parts: ${all_parts// /, })" >&2
      exit 2
    }
  done
fi
# asked NAME: whether NAME is to run (every part without --only; the build always).
asked() { [ -z "$only" ] || [ "$1" = build ] || [[ ",$only," == *",$1,"* ]]; }
case "$out" in /*) ;; *) out="$PWD/$out" ;; esac
if [ -n "$genome" ]; then
  if [ ! -f "$genome" ] || [ ! -r "$genome" ]; then
    echo "gpu-check.sh: --genome: '$genome' is not a readable file" >&2
    exit 2
  fi
  case "$genome" in /*) ;; *) genome="$PWD/$genome" ;; esac
  if [ "$out" -ef "$genome" ]; then
    echo "gpu-check.sh: --out '$out' is the genome (--genome); name another file for the JSON" >&2
    exit 2
  fi
fi
# --out: a file in a folder that exists and can be written, checked before the parts run,
# not when the report is written at the end.
if [ -d "$out" ]; then
  echo "gpu-check.sh: --out '$out' is a folder; name a file for the JSON, e.g. $out/gpu-check.json" >&2
  exit 2
fi
if [ ! -d "$(dirname "$out")" ] || [ ! -w "$(dirname "$out")" ]; then
  echo "gpu-check.sh: --out '$out': its folder does not exist or cannot be written; make it first" >&2
  exit 2
fi

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
  # And PMIx's plugins, whose folder is compiled in (without them PMIx warns on every launch).
  if [ -z "${PMIX_MCA_mca_base_component_path:-}" ] && [ -d "$p/lib/x86_64-linux-gnu/pmix2/lib/pmix" ]; then
    export PMIX_MCA_mca_base_component_path="$p/lib/x86_64-linux-gnu/pmix2/lib/pmix"
  fi
  # Its launcher is mpiexec.openmpi there: the plain name is a link update-alternatives makes
  # on installation, which `dpkg -x` does not run.
  if [ -z "${MPIEXEC:-}" ] && [ ! -e "$p/bin/mpiexec" ] && [ -x "$p/bin/mpiexec.openmpi" ]; then
    export MPIEXEC="$p/bin/mpiexec.openmpi"
  fi
done
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# A build packed by scripts/gpu-bundle.sh: it runs on its own libraries (DIR/lib) and on
# this Python's PyTorch libraries, which must be the version it was built with.
if [ "$do_build" = 0 ] && [ -f "$build/bundle.json" ]; then
  if ! torch_lib=$("$python" - "$build/bundle.json" <<'PY'
import glob, json, os, sys, torch
want = json.load(open(sys.argv[1]))["torch"]
if torch.__version__ != want:
    sys.exit(f"gpu-check.sh: {sys.argv[1]}: the bundle was built with PyTorch {want}, but this Python has "
             f"{torch.__version__}; name a Python with PyTorch {want} (--python), or build here (drop --no-build)")
# torch's libraries, and the nvidia-* wheels' ones (the CUDA runtime the kernels link among
# them), which libtorch finds through its RUNPATH but genemask's own libraries do not.
lib = os.path.join(os.path.dirname(torch.__file__), "lib")
site = os.path.dirname(os.path.dirname(lib))
wheels = sorted(glob.glob(os.path.join(site, "nvidia", "*", "lib")))
print(":".join([lib] + wheels))
PY
  ); then
    exit 2
  fi
  export LD_LIBRARY_PATH="$build/lib:$torch_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
: >"$work/parts.tsv"
# report [INTERRUPTED]: the JSON and the table from the parts recorded so far.
report() {
"$python" - "$work" "$out" "$device" "$peak" "${1:-}" "$one_run_variants" <<'PY'
import json, os, sys, time
work, out, device, peak, interrupted, one_run_variants = sys.argv[1:7]
parts = {}
for line in open(os.path.join(work, "parts.tsv")):
    name, status, rc, ms, note = line.rstrip("\n").split("\t")
    parts[name] = {"status": status, "exit_code": int(rc) if rc else None, "seconds": int(ms) / 1000, "note": note}
# One JSON line per benchmark run that passed; a failed or skipped run has no row.
def last_row(path):
    lines = [l for l in open(path) if l.strip().startswith("{")]
    return json.loads(lines[-1])
# graph_check_failed ROW: why a graph row's losses are not the eager step's (None if they are
# within 2e-3, or the row has no check).
def graph_check_failed(r):
    gc = r.get("graph_check")
    if gc and not gc["max_rel_diff"] <= 2e-3:
        return f"graph losses differ from the eager step's by {gc['max_rel_diff']:.3g} (> 2e-3)"
    return None
rows, rejected = [], []
for cfg in ("dnabert", "logo"):
    for impl in one_run_variants.split() + ["pytorch"]:
        part = parts.get(f"bench_{cfg}_{impl}", {})
        if part.get("status") != "passed":
            continue
        try:
            r = last_row(os.path.join(work, f"bench-{cfg}-{impl}.json"))
        except (OSError, IndexError, ValueError) as e:
            part.update(status="failed", note=f"no result line in its output ({type(e).__name__})")
            continue
        r["variant"] = {"genemask": "eager", "pytorch": "eager"}.get(impl, impl.replace("_", "-"))
        note = graph_check_failed(r)
        if note:  # its rate is not the eager step's work: kept apart, out of every figure
            part.update(status="failed", note=note)
            rejected.append(dict(r, rejected=note))
            continue
        rows.append(r)
    path = os.path.join(work, f"bench-{cfg}-sweep.jsonl")
    if os.path.exists(path):  # the rows of a sweep that partly failed still count
        for l in open(path):
            if l.strip().startswith("{"):
                r = json.loads(l)
                r["variant"] = "graph" if r.get("cuda_graph") else "eager"
                note = graph_check_failed(r)
                if note:
                    parts.get(f"bench_{cfg}_sweep", {}).update(status="failed", note=note)
                    rejected.append(dict(r, rejected=note))
                    continue
                rows.append(r)
import torch
try:
    name = torch.cuda.get_device_name(0) if device == "cuda" else "cpu"
except Exception as e:
    name = f"cuda (name unknown: {type(e).__name__})"
peak_tflops, peak_how = 0.0, "none (CPU)"
if peak:
    peak_tflops, peak_how = float(peak), "given (--peak-tflops)"
elif device == "cuda":
    ms = [r["measured_peak_tflops"] for r in rows if r["impl"] == "genemask" and r.get("measured_peak_tflops")]
    if ms:
        peak_tflops, peak_how = max(ms), "measured by train_bench: bf16 matmul 8192^3, best of its runs"
passed = all(p["status"] != "failed" for p in parts.values())
res = {"device": name, "torch": torch.__version__, "passed": passed, "interrupted": interrupted or None,
       "gpu_tests": parts.get("gpu_tests", {}).get("status", "skipped"), "parts": parts,
       "peak_tflops": peak_tflops, "peak_how": peak_how, "runs": [], "best": {}}
pt = {(r["config"], r["batch"]): r for r in rows if r["impl"] == "pytorch"}
for r in rows:
    if r["impl"] != "genemask":
        continue
    r["mfu"] = r["achieved_tflops"] / peak_tflops if peak_tflops else None
    if device != "cuda":
        r["mfu_datasheet"] = None
    p = pt.get((r["config"], r["batch"]))
    r["ratio_vs_pytorch"] = r["median_tokens_per_s"] / p["median_tokens_per_s"] if p else None
for cfg in ("dnabert", "logo"):
    g = [r for r in rows if r["config"] == cfg and r["impl"] == "genemask"]
    p = [r for r in rows if r["config"] == cfg and r["impl"] == "pytorch"]
    if g:
        bg = max(g, key=lambda r: r["median_tokens_per_s"])
        bp = max(p, key=lambda r: r["median_tokens_per_s"]) if p else None
        res["best"][cfg] = {"batch": bg["batch"], "variant": bg["variant"], "tokens_per_s": bg["median_tokens_per_s"],
                            "mfu": bg["mfu"], "mfu_datasheet": bg.get("mfu_datasheet"),
                            "pytorch_best_batch": bp["batch"] if bp else None,
                            "pytorch_best_tokens_per_s": bp["median_tokens_per_s"] if bp else None,
                            "ratio_vs_pytorch_best": bg["median_tokens_per_s"] / bp["median_tokens_per_s"] if bp else None}
res["packing"] = {}
for cfg in ("dnabert", "logo"):  # padded and packed samples of uniform lengths
    path = os.path.join(work, f"bench-{cfg}-packing.jsonl")
    if not os.path.exists(path):
        continue
    runs = {("packed" if r.get("packing") else "padded"): r for r in map(json.loads, (l for l in open(path) if l.strip().startswith("{")))}
    for r in runs.values():
        r["variant"] = "packed" if r.get("packing") else "padded"
        r["mfu"] = r["achieved_tflops"] / peak_tflops if peak_tflops else None
        if device != "cuda":
            r["mfu_datasheet"] = None
    both = "packed" in runs and "padded" in runs
    res["packing"][cfg] = dict(runs, packed_vs_padded=runs["packed"]["median_tokens_per_s"] / runs["padded"]["median_tokens_per_s"] if both else None)
res["kernels"] = {}
for cfg in ("dnabert", "logo"):  # bench/kernel_bench's JSON line
    part = parts.get(f"bench_{cfg}_kernels", {})
    path = os.path.join(work, f"bench-{cfg}-kernels.json")
    if part.get("note", "").startswith("interrupted"):  # stopped before its line: the note says so
        continue
    if part.get("status") in ("passed", "failed") and os.path.exists(path):  # failed: a variant's bits differ
        try:
            res["kernels"][cfg] = last_row(path)
        except (IndexError, ValueError) as e:
            part.update(status="failed", note=f"no result line in its output ({type(e).__name__})")
res["pretrain"] = {}
for cfg in ("dnabert", "logo"):  # pretrain on real shards against the synthetic step
    part = parts.get(f"pretrain_{cfg}", {})
    path = os.path.join(work, f"pretrain-{cfg}.json")  # pretrain()'s copy of what paper_scale.sh wrote
    if part.get("status") != "passed":
        continue
    try:
        with open(path) as f:
            doc = json.load(f)
        arm = doc["arms"][0]
    except (OSError, IndexError, KeyError, ValueError) as e:
        part.update(status="failed", note=f"no summary in {path} ({type(e).__name__})")
        continue
    batch = doc["sequences_per_step"]
    pr = {"batch": batch, "steps": arm["steps"], "real_tokens_per_s": arm["tokens_per_s"],
          "model_tflops": arm["model_tflops"], "mfu": arm["model_tflops"] / peak_tflops if peak_tflops else None,
          "mfu_datasheet": arm["mfu_datasheet"] if device == "cuda" else None, "packing": arm["packing"],
          "cuda_graphs": arm["cuda_graphs"], "packed_attention": arm.get("packed_attention"), "loss": arm["loss"],
          "fixed_shapes": arm.get("fixed_shapes"), "shape_setup_steps": arm.get("shape_setup_steps"),
          "synthetic": None, "vs_synthetic": None,
          "profile": arm.get("profile"), "fill": arm.get("fill"),
          "rows_per_micro_batch": arm.get("rows_per_micro_batch"), "input_wait": arm.get("input_wait"),
          "loader_busy": arm.get("loader_busy")}
    same = [r for r in rows if r["config"] == cfg and r["impl"] == "genemask" and r["batch"] == batch
            and r["variant"] in ("graph", "eager")]
    if same:
        syn = min(same, key=lambda r: ("graph", "eager").index(r["variant"]))
        pr["synthetic"] = {"variant": syn["variant"], "achieved_tflops": syn["achieved_tflops"], "mfu": syn.get("mfu")}
        pr["vs_synthetic"] = arm["model_tflops"] / syn["achieved_tflops"] if syn["achieved_tflops"] else None
    # The synthetic step at the rows the real one computed (pretrain()'s own train_bench run).
    pr["synthetic_same_rows"] = pr["vs_synthetic_same_rows"] = None
    try:
        sr = last_row(os.path.join(work, f"bench-{cfg}-pretrain-rows.json"))
        pr["synthetic_same_rows"] = {"batch": sr["batch"], "variant": "graph" if sr.get("cuda_graph") else "eager",
                                     "achieved_tflops": sr["achieved_tflops"]}
        if sr["achieved_tflops"]:
            pr["vs_synthetic_same_rows"] = arm["model_tflops"] / sr["achieved_tflops"]
    except (OSError, IndexError, KeyError, ValueError):
        pass  # no train_bench, or its run failed (the part says so)
    res["pretrain"][cfg] = pr
passed = all(p["status"] != "failed" for p in parts.values()) and not interrupted
res["passed"] = passed
rows.sort(key=lambda r: (("dnabert", "logo").index(r["config"]), r["batch"], r["impl"] != "genemask", r["variant"]))
res["runs"] = rows
res["rejected"] = rejected
# Before the table (a row that cannot be printed loses nothing), and under its final name only
# once whole: a run stopped while writing leaves no half-written file.
tmp = f"{out}.tmp.{os.getpid()}"
with open(tmp, "w") as f:
    json.dump(res, f, indent=2)
os.replace(tmp, out)
pct = lambda x: f"{x:.1%}" if x is not None else "-"
num = lambda x, w, d: f"{x:{w}.{d}f}" if x is not None else f"{'-':>{w}s}"  # "-": not measured (a CPU's memory)
print(f"{'config':8s} {'impl':9s} {'variant':10s} {'batch':>5s} {'tokens/s':>10s} {'step ms':>8s} {'TFLOP/s':>8s} "
      f"{'MFU':>6s} {'MFU ds':>6s} {'peak GiB':>8s} {'vs PyTorch':>10s}")
for cfg in ("dnabert", "logo"):
    for impl in ("genemask", "pytorch"):
        if not any(r["config"] == cfg and r["impl"] == impl for r in rows):
            print(f"{cfg:8s} {impl:9s} (no result: {parts.get(f'bench_{cfg}_{impl}', {}).get('status', 'not run')})")
    for r in (r for r in rows if r["config"] == cfg):
        g = r["impl"] == "genemask"
        ratio = f"{r['ratio_vs_pytorch']:.2f}x" if g and r.get("ratio_vs_pytorch") else "-"
        print(f"{cfg:8s} {r['impl']:9s} {r['variant']:10s} {r['batch']:5d} {r['median_tokens_per_s']:10.0f} "
              f"{r['median_step_s'] * 1e3:8.2f} {num(r['achieved_tflops'] if g else None, 8, 1)} "
              f"{pct(r.get('mfu')) if g else '-':>6s} "
              f"{pct(r.get('mfu_datasheet')) if g else '-':>6s} {num(r.get('peak_memory_gib'), 8, 2)} {ratio:>10s}")
    for r in rows:  # the profiled eager run at the default batch
        if r["config"] == cfg and r["impl"] == "genemask" and r["variant"] == "eager" and r.get("profile") \
                and r.get("ratio_vs_pytorch") is not None:
            print(f"{cfg:8s} genemask / PyTorch: {r['ratio_vs_pytorch']:.2f}x tokens/s (batch {r['batch']}, eager)")
    for r in (r for r in rejected if r["config"] == cfg):
        print(f"{cfg:8s} {r['impl']:9s} {r['variant']:10s} {r['batch']:5d} REJECTED, in no figure: {r['rejected']}")
    b = res["best"].get(cfg)
    if b and b["ratio_vs_pytorch_best"]:
        print(f"{cfg:8s} best: genemask {b['variant']} batch {b['batch']} {b['tokens_per_s']:.0f} tokens/s, "
              f"{b['ratio_vs_pytorch_best']:.2f}x PyTorch's best (batch {b['pytorch_best_batch']})")
for cfg, pk in res["packing"].items():
    for v in ("padded", "packed"):
        if v in pk:
            r = pk[v]
            print(f"{cfg:8s} uniform lengths, {v:6s} batch {r['batch']}: {r['median_tokens_per_s']:.0f} real tokens/s "
                  f"({r['real_tokens']:.0f} real tokens in {r['positions']} positions), MFU {pct(r.get('mfu'))}")
    if pk.get("packed_vs_padded"):
        print(f"{cfg:8s} packed / padded: {pk['packed_vs_padded']:.2f}x real tokens/s")
for cfg, pr in res["pretrain"].items():
    syn = pr["synthetic"]
    print(f"{cfg:8s} pretrain on real shards (random masking, batch {pr['batch']}, {pr['steps']} steps, "
          f"packing {pr['packing']}, CUDA graphs {pr['cuda_graphs']}): "
          f"{pr['real_tokens_per_s']:.0f} real tokens/s"
          + (" (" + "; ".join(
              ([f"fill {pr['fill']:.3f}, {pr['rows_per_micro_batch']:.1f} rows a micro-batch"] if pr.get("fill") else [])
              + ([f"{pr['fixed_shapes']} fixed shapes, {pr['shape_setup_steps']} set-up steps kept out"]
                 if pr.get("fixed_shapes") else [])
              + ([f"waited for its input {pr['input_wait']:.1%} of the time, loader busy {pr['loader_busy']:.1%}"]
                 if pr.get("input_wait") is not None and pr.get("loader_busy") is not None else [])) + ")"
             if pr.get("fill") or pr.get("input_wait") is not None else "")
          + f", {pr['model_tflops']:.1f} model TFLOP/s, "
          f"MFU {pct(pr['mfu'])} (datasheet {pct(pr['mfu_datasheet'])})"
          + (f"; the synthetic {syn['variant']} step: {syn['achieved_tflops']:.1f} TFLOP/s, "
             f"pretrain / synthetic {pr['vs_synthetic']:.2f}x" if syn and pr["vs_synthetic"] else "")
          + (f"; at its rows ({pr['synthetic_same_rows']['variant']}, batch {pr['synthetic_same_rows']['batch']}): "
             f"{pr['synthetic_same_rows']['achieved_tflops']:.1f} TFLOP/s, {pr['vs_synthetic_same_rows']:.2f}x"
             if pr.get("vs_synthetic_same_rows") else ""))
print()
classes = ["matmul", "attention", "elementwise_norm", "optimizer", "copies_casts", "idle"]
# The bench rows' profiles, then pretrain's on real shards (variant "pretrain").
prof = [r for r in rows if r.get("profile")] + [
    {"config": cfg, "variant": "pretrain", "batch": pr["batch"], "profile": pr["profile"]}
    for cfg, pr in res["pretrain"].items() if pr.get("profile")]
if prof:
    print("where a step's time goes (ms per step, " + prof[0]["profile"]["source"] + ")")
    # host_waits: the times a step's host waited for the GPU (LibTorch's count; "-" where none
    # was counted: a CPU, or a profile of a build before the count).
    print(f"{'config':8s} {'variant':12s} {'batch':>5s} " + " ".join(f"{c:>16s}" for c in classes)
          + f" {'step':>8s} {'host_waits':>10s}")
    for r in prof:
        sp = r["profile"]["seconds_per_step"]
        hw = r["profile"].get("host_syncs_per_step")
        print(f"{r['config']:8s} {r['variant']:12s} {r['batch']:5d} " + " ".join(f"{sp[c] * 1e3:16.3f}" for c in classes)
              + f" {r['profile']['step_s'] * 1e3:8.2f} " + (f"{hw:10.1f}" if hw is not None else f"{'-':>10s}"))
for cfg, kb in res["kernels"].items():
    print(f"{cfg}: genemask's kernels alone ({kb['rows']} rows; copy bandwidth {kb['copy_gbs']:.0f} GB/s)")
    for c in kb["cases"]:
        bits = {True: " same bits", False: " BITS DIFFER", None: ""}[c["same_bits"]]
        print(f"  {c['kernel']:14s} {c['impl']:9s} {c['width']:6d} {c['variant'][:44]:44s} {c['median_us']:9.1f} us "
              f"{c['of_copy']:6.1%} of copy {c['vs_default']:6.2f}x{bits}")
print(f"peak for MFU: {peak_tflops:.0f} TFLOP/s ({peak_how})")
print(f"wrote {out}")
print()
print(f"{'part':24s} {'status':8s} {'exit':>5s} {'seconds':>8s}  note")
for n, p in parts.items():
    rc = "-" if p["exit_code"] is None else str(p["exit_code"])
    print(f"{n:24s} {p['status']:8s} {rc:>5s} {p['seconds']:8.1f}  {p['note']}")
failed = [n for n, p in parts.items() if p["status"] == "failed"]
if interrupted:
    print(f"gpu-check: interrupted by {interrupted}; the parts after it did not run")
print("gpu-check: every part passed" if passed else f"gpu-check: {len(failed)} part(s) failed: {', '.join(failed)}")
sys.exit(0 if passed else 3)  # 3, not 1: a crash of this report itself exits 1
PY
}
set -m  # each part a job with its own process group (part())
# interrupted SIGNAL NUMBER: a TERM (timeout(1), a job's time limit: Slurm sends TERM first)
# or an INT (Ctrl-C) stops the running part's whole process group (TERM, then KILL after
# 10 s), records it as failed, writes the report of the parts that finished, and exits
# 128 + NUMBER.
# shellcheck disable=SC2317  # called through the traps below
interrupted() {
  trap '' TERM INT
  local tries=100
  if [ -n "$child" ]; then
    kill -TERM -- -"$child" 2>/dev/null || true
    # Up to 10 s for the part's leader to end (a zombie, or gone, has ended).
    while [ "$tries" -gt 0 ] && [ "$(cut -d' ' -f3 "/proc/$child/stat" 2>/dev/null || echo Z)" != Z ]; do
      sleep 0.1
      tries=$((tries - 1))
    done
    kill -KILL -- -"$child" 2>/dev/null || true
    wait "$child" 2>/dev/null || true
  fi
  echo "gpu-check.sh: interrupted by SIG$1${current:+ during part $current}; the report holds the parts that finished" >&2
  [ -z "$current" ] ||
    record "$current" failed "" $((($(date +%s%N) - part_t0) / 1000000)) "interrupted by SIG$1 (stopped)"
  report "SIG$1${current:+ during part $current}" || true
  exit $((128 + $2))
}
trap 'interrupted TERM 15' TERM
trap 'interrupted INT 2' INT
# record NAME STATUS EXIT_CODE MILLISECONDS NOTE: one line of parts.tsv per part.
record() { printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "${5//$'\t'/ }" >>"$work/parts.tsv"; }
# part NAME COMMAND...: runs it; passed or failed by its exit code. Never stops the script.
# The part runs as a job of its own (set -m: its own process group, which a signal to this
# script then stops as a whole), its input /dev/null.
current=""       # the part running now, its job's process id and start
child=""
part_t0=0
part() {
  local name=$1 rc=0
  shift
  if ! asked "$name"; then skip "$name" "not asked for: --only"; return 0; fi
  echo "== $name"
  current=$name
  part_t0=$(date +%s%N)
  "$@" </dev/null &
  child=$!
  wait "$child" || rc=$?
  child=""
  current=""
  record "$name" "$([ "$rc" = 0 ] && echo passed || echo failed)" "$rc" $((($(date +%s%N) - part_t0) / 1000000)) ""
  [ "$rc" = 0 ] || echo "gpu-check.sh: part $name failed (exit code $rc)" >&2
  return 0
}
skip() { echo "== $1: skipped ($2)"; record "$1" skipped "" 0 "$2"; }
# ready PART TARGET PROGRAM: whether PART can run: skipped when TARGET did not build,
# failed when PROGRAM is missing (--no-build on a build directory without it).
failed_targets=" "
ready() {
  if ! asked "$1"; then skip "$1" "not asked for: --only"; return 1; fi
  if [[ "$failed_targets" == *" $2 "* ]]; then skip "$1" "$2 did not build"; return 1; fi
  if [ ! -x "$3" ]; then
    echo "gpu-check.sh: part $1 failed: $3 is missing" >&2
    record "$1" failed 127 0 "$3 is missing"
    return 1
  fi
}

# shellcheck disable=SC2317  # called through part(), which shellcheck does not follow
# Runs as the part's job, a subshell: the targets that failed go to $work/failed-targets.
build_all() {
  local gen=() require_cuda=ON rc=0 t
  command -v ninja >/dev/null && gen=(-G Ninja)
  [ "$device" = cpu ] && require_cuda=OFF
  if ! cmake -S "$root" -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DGENEMASK_PYTHON="$python" \
      -DGENEMASK_REQUIRE_CUDA="$require_cuda" ${cmake_prefix:+-DCMAKE_PREFIX_PATH="$cmake_prefix"}; then
    echo "genemask train_bench kernel_bench model_tests" >>"$work/failed-targets"
    return 3
  fi
  # One target at a time: a test that does not compile leaves the binary and the benchmark.
  for t in genemask train_bench kernel_bench model_tests; do
    cmake --build "$build" -j "$(nproc)" --target "$t" || { rc=$?; echo "$t" >>"$work/failed-targets"; }
  done
  return "$rc"
}
if [ "$do_build" = 1 ]; then
  part build build_all
  # build_all ran as the part's job (a subshell): the targets that failed come back in a file.
  [ ! -f "$work/failed-targets" ] || failed_targets+="$(tr '\n' ' ' <"$work/failed-targets")"
else
  skip build "--no-build"
fi
bin="$build/src/cli/genemask"
[ -x "$bin" ] && { "$bin" --version || true; }

# The C++ checks of the step's parts (SDPA, fused AdamW with its capturable step, buckets, the
# all-reduce choice, the FLOP definition, the profiler's classes, the fused Q/K/V product, the
# fused kernels, the weights' bf16 copies): every model test with a GPU body is in the filter
# (test_gpu_check.py checks it).
ready model_tests model_tests "$build/tests/model_tests" &&
  part model_tests "$build/tests/model_tests" --gtest_brief=1 \
    --gtest_filter='Attention.*:FusedAdamW.*:GradBuckets.*:AllReduceChoice.*:Flops.*:StepProfile.*:StepGraph.*:Bert.FusedQkv*:ResidualLayerNorm.*:FusedBiasGelu.*:FusedFeedForward.*:FusedLinearBgrad.*:ColumnSums.*:QkvLinear.*:FusedCrossEntropy.*:DecoderLogits.*:Fusions.*:Packing.*:GraphStep.*:WeightCopies.*'
# The commands on the GPU against the CPU (on the CPU alone with --cpu): bf16 vs fp32 loss,
# checkpoint and resume, embed, finetune, NCCL at world size 1 and MPI with 2 ranks.
ready gpu_tests genemask "$bin" &&
  part gpu_tests env GENEMASK_BIN="$bin" PYTHONPATH="$root/tests/cli" "$python" "$root/tests/cli/test_gpu.py"

echo "== benchmark: one pretraining step, 512 tokens, $precision on $device ($steps steps)"
threads=$(nproc)
if [ "$device" = cpu ]; then batch_dnabert=1; batch_logo=2; fi
tb="$build/bench/train_bench"
# shellcheck disable=SC2317  # called through part()
# sweep CFG BATCHES: every batch eager and as a graph, and PyTorch, one JSON line each in
# bench-CFG-sweep.jsonl; a run that fails fails the part, the others still run.
sweep() {
  local cfg=$1 rc=0 b v
  for b in $2; do
    for v in eager graph; do
      local extra=()
      [ "$v" = graph ] && extra=(--graph)
      "$tb" "$cfg" "$threads" "$b" 512 "$steps" "$device" "$precision" "${extra[@]}" >>"$work/bench-$cfg-sweep.jsonl" || rc=1
    done
    "$python" "$root/bench/train_bench.py" "$cfg" "$threads" "$b" 512 "$steps" "$device" "$precision" \
      >>"$work/bench-$cfg-sweep.jsonl" || rc=1
  done
  return "$rc"
}
# packed CFG BATCH: samples of uniform lengths, padded then packed, one JSON line each in
# bench-CFG-packing.jsonl.
# shellcheck disable=SC2317  # called through part()
packed() {
  local rc=0
  "$tb" "$1" "$threads" "$2" 512 "$steps" "$device" "$precision" --lengths uniform >>"$work/bench-$1-packing.jsonl" || rc=1
  "$tb" "$1" "$threads" "$2" 512 "$steps" "$device" "$precision" --lengths uniform --packing \
    >>"$work/bench-$1-packing.jsonl" || rc=1
  return "$rc"
}
# pretrain CFG BATCH: `genemask pretrain` of CFG on real shards of --genome, as
# bench/paper_scale.sh runs it (counts, ranking and shards made once in $work/paper for both
# configs): random masking, BATCH samples in one micro-batch a step, --pretrain-steps steps;
# its summary in $work/paper/paper_scale[-dnabert].json, with the profile of its 5 steps
# before the last (as many as the run has before its last, if fewer). On a failure, the
# run's log's end.
# shellcheck disable=SC2317  # called through part()
pretrain() {
  local rc=0
  local profile=$((pretrain_steps - 1 < 5 ? pretrain_steps - 1 : 5))
  PAPER_MODEL=$1 PAPER_MASKINGS=random PAPER_STEPS=$pretrain_steps PAPER_BATCH=$2 PAPER_ACCUM=1 \
    PAPER_PROFILE_STEPS=$profile \
    PAPER_DEVICE=$device PAPER_PRECISION=$precision PAPER_GENOME=$genome GENEMASK_BIN=$bin \
    bash "$root/bench/paper_scale.sh" "$work/paper" | tee "$work/paper-$1.out" || rc=$?
  if [ "$rc" != 0 ] && [ -f "$work/paper/$1-random.log" ]; then tail -n 20 "$work/paper/$1-random.log" >&2; fi
  # The JSON where paper_scale.sh says it wrote it (its last line), as pretrain-CFG.json for
  # the report.
  local json
  json=$(sed -n 's/^paper_scale: wrote //p' "$work/paper-$1.out")
  if [ "$rc" = 0 ]; then cp "$json" "$work/pretrain-$1.json" || rc=$?; fi
  [ "$rc" = 0 ] && [ -x "$tb" ] || return "$rc"
  # The synthetic step at the rows the real one computed (a micro-batch's mean rows in its
  # last logged window, rounded), eager or graph as the run was: packing gives the real step
  # fewer rows than samples, so this is the like-for-like rate (bench-CFG-pretrain-rows.json).
  local rows graph
  read -r rows graph < <("$python" -c 'import json, sys
a = json.load(open(sys.argv[1]))["arms"][0]
print(max(1, round(a.get("rows_per_micro_batch") or 0)), "--graph" if a.get("cuda_graphs") == "on" else "-")' "$json")
  [ "$graph" = - ] && graph=
  # shellcheck disable=SC2086  # $graph: one flag or none
  "$tb" "$1" "$threads" "$rows" 512 "$steps" "$device" "$precision" $graph >"$work/bench-$1-pretrain-rows.json" ||
    rc=$?
  return "$rc"
}
# bench_part CFG NAME BATCH ARG...: train_bench's step of CFG, BATCH sequences of 512
# positions, with ARG..., as the part bench_CFG_NAME; its JSON line in bench-CFG-NAME.json,
# where the report reads the part's row.
bench_part() {
  local cfg=$1 name=$2 b=$3
  shift 3
  ready "bench_${cfg}_$name" train_bench "$tb" || return 0
  # The inner shell expands "$@" and "$0" itself (the command, then its JSON file).
  # shellcheck disable=SC2016
  part "bench_${cfg}_$name" bash -c '"$@" >"$0"' "$work/bench-$cfg-$name.json" \
    "$tb" "$cfg" "$threads" "$b" 512 "$steps" "$device" "$precision" "$@"
}
# The inner shells of the parts below expand "$@" and "$0" themselves, likewise.
# shellcheck disable=SC2016
for cfg in dnabert logo; do
  b=$batch_dnabert
  sw=$sweep_dnabert
  [ "$cfg" = logo ] && b=$batch_logo && sw=$sweep_logo
  bench_part "$cfg" genemask "$b" --profile 3
  if [ "$device" = cuda ]; then
    bench_part "$cfg" graph "$b" --graph --profile 3 --check-graph 4
    # The graph again without the fused LayerNorm's bf16 copy (fusions.hpp's ln-bf16, on by
    # default) and without the fused bias + GELU (gelu, on by default): the graph row
    # against each is that fusion's gain. Then with the bias gradients in the weight-gradient
    # products (bgrad, off by default): it against the graph row is its gain.
    bench_part "$cfg" no_ln_bf16 "$b" --graph --no-ln-bf16
    bench_part "$cfg" no_gelu "$b" --graph --no-fused-gelu
    bench_part "$cfg" bgrad "$b" --graph --bgrad
    # Without each fusion that became a default on 2026-11-30 (ln-smem, ln-lean, bias-sum,
    # ce), profiled, likewise.
    bench_part "$cfg" no_ln_smem "$b" --graph --no-ln-smem --profile 3
    bench_part "$cfg" no_ln_lean "$b" --graph --no-ln-lean --profile 3
    bench_part "$cfg" no_bias_sum "$b" --graph --no-bias-sum --profile 3
    bench_part "$cfg" no_ce "$b" --graph --no-fused-ce --profile 3
    # With the decoder's product over padded classes (ce-pad, off by default): against the
    # graph row, its gain (the H200 profile of 2026-12-01 put the unaligned products at 1.2 ms
    # of logo's 15.3 ms step).
    bench_part "$cfg" ce_pad "$b" --graph --ce-pad --profile 3
    # With the feed-forward's products carrying the bias + GELU (and, backward, its derivative
    # and the bias gradient) in their epilogues (gemm-gelu, off by default; Hopper only: the
    # JSON's gemm_gelu says whether the node ran): against the graph row, its gain (an H200's
    # kernel_bench put the separate kernels at 2.65 ms of logo's 15.1 ms step at 256).
    bench_part "$cfg" gemm_gelu "$b" --graph --gemm-gelu --profile 3 --check-graph 4
    # And casting the weights in every forward pass instead of reading their bf16 copies
    # (weight-bf16, on by default), likewise.
    bench_part "$cfg" no_weight_bf16 "$b" --graph --no-weight-bf16
    # The fused bias + GELU with 2 and 4 rows' loads in flight per thread (the default is 1;
    # the same bits): against the graph row, what more loads in flight gain in the whole step.
    bench_part "$cfg" gelu_rows2 "$b" --graph --gelu-rows 2 --profile 3
    bench_part "$cfg" gelu_rows4 "$b" --graph --gelu-rows 4 --profile 3
  else
    skip "bench_${cfg}_graph" "no CUDA graph on the CPU"
    skip "bench_${cfg}_no_ln_bf16" "the bf16 copy is the GPU kernel's"
    skip "bench_${cfg}_no_gelu" "the fused bias + GELU is a GPU kernel"
    skip "bench_${cfg}_bgrad" "the bias gradient in cuBLASLt's epilogue is a GPU product"
    skip "bench_${cfg}_no_ln_smem" "the fused LayerNorm is a GPU kernel"
    skip "bench_${cfg}_no_ln_lean" "the fused LayerNorm is a GPU kernel"
    skip "bench_${cfg}_no_bias_sum" "the column-sum kernel runs on a GPU"
    skip "bench_${cfg}_no_ce" "the fused cross-entropy is a GPU kernel"
    skip "bench_${cfg}_ce_pad" "the decoder's padded classes apply on a GPU"
    skip "bench_${cfg}_gemm_gelu" "the fused products are Hopper GPU kernels"
    skip "bench_${cfg}_no_weight_bf16" "its ablation runs in the CUDA graph"
    skip "bench_${cfg}_gelu_rows2" "the fused bias + GELU is a GPU kernel"
    skip "bench_${cfg}_gelu_rows4" "the fused bias + GELU is a GPU kernel"
  fi
  ready "bench_${cfg}_packing" train_bench "$tb" && part "bench_${cfg}_packing" packed "$cfg" "$b"
  part "bench_${cfg}_pytorch" bash -c '"$@" >"$0"' "$work/bench-$cfg-pytorch.json" \
    "$python" "$root/bench/train_bench.py" "$cfg" "$threads" "$b" 512 "$steps" "$device" "$precision"
  if [ "$device" = cuda ]; then
    ready "bench_${cfg}_sweep" train_bench "$tb" && part "bench_${cfg}_sweep" sweep "$cfg" "$sw"
  else
    skip "bench_${cfg}_sweep" "the micro-batch sweep runs on a GPU"
  fi
  if [ "$device" = cuda ]; then
    ready "bench_${cfg}_kernels" kernel_bench "$build/bench/kernel_bench" &&
      part "bench_${cfg}_kernels" bash -c '"$@" >"$0"' "$work/bench-$cfg-kernels.json" \
        "$build/bench/kernel_bench" "$cfg" "$b" 512
  else
    skip "bench_${cfg}_kernels" "genemask's CUDA kernels run on a GPU"
  fi
  if [ -z "$genome" ]; then
    skip "pretrain_$cfg" "no genome: --genome FASTA (scripts/default-genome.sh makes human chr22)"
  else
    ready "pretrain_$cfg" genemask "$bin" && part "pretrain_$cfg" pretrain "$cfg" "$b"
  fi
done

trap '' TERM INT  # the parts are done: the report is written whole
report_rc=0
report || report_rc=$?
case $report_rc in
  0) exit 0 ;;
  3) exit 1 ;;
  *) echo "gpu-check.sh: the report failed (exit code $report_rc)" >&2; exit 1 ;;
esac
