#!/usr/bin/env bash
# CUDA graphs in `genemask pretrain` on one GPU: real shards (the default recipe: 5-510
# tokens per sample), bf16, --packing on, with --cuda-graphs off (the eager step) and on
# (the step captured at step 1 and replayed), alternating, RUNS runs each; the median real
# tokens/s and model TFLOP/s of each and their ratio, per model, and what the graphs' fixed
# shapes cost in positions: the fill (real tokens over the positions computed) of each, the
# shapes used and the steps that set one up (captured its graph: kept out of tokens/s).
# Usage: bench/graphs_bench.sh [STEPS (default 40)] [RUNS (default 3)] [MODELS (default "logo dnabert")]
#                              [BATCH (default 64)]
# MODELS: logo, dnabert or config.json paths. GRAPHS_DEVICE=cpu runs the same on the CPU in
# fp32, "on" being the fixed-shape step without capture (--static-step): the positions the
# shapes add, and what they cost, without a GPU.
set -euo pipefail
unset CDPATH  # cd DIR must not go to a folder of that name on CDPATH
root=$(cd "$(dirname "$0")/.." && pwd)
steps=${1:-40}
runs=${2:-3}
models=${3:-logo dnabert}
batch=${4:-64}
device=${GRAPHS_DEVICE:-cuda}
case $device in
  cuda) precision=bf16 on=(--cuda-graphs on) ;;
  cpu) precision=fp32 on=(--static-step) ;;
  *) echo "graphs_bench: GRAPHS_DEVICE must be cuda or cpu, got '$device'" >&2; exit 2 ;;
esac
copies=1
# shellcheck source=bench/common.sh
source "$root/bench/common.sh"
"$bin" shards --genome "$g" --out "$run/graphs-shards" >/dev/null
echo "== genemask pretrain on real shards, batch $batch, $steps steps, $precision on $device, fixed shapes off vs on (${on[*]})"
for _ in $(seq "$runs"); do
  for m in $models; do
    for cg in off on; do
      rm -rf "$run/graphs-run"  # this run's own, from the last iteration
      if [ "$cg" = on ]; then mode=("${on[@]}"); else mode=(--cuda-graphs off); fi
      logged "$bin" pretrain --shards "$run/graphs-shards" --masking random --model "$m" --out "$run/graphs-run" \
        --steps "$steps" --warmup 1 --batch-per-rank "$batch" --grad-accum 1 --log-every "$((steps / 2))" \
        --eval-every 0 --checkpoint-every 100000 --device "$device" --precision "$precision" "${mode[@]}" \
        >"$run/summary.json"
      "$python" -c "import json,sys; s=json.load(sys.stdin); print(json.dumps({'model': sys.argv[1], 'mode': sys.argv[2], **{k: s[k] for k in ('cuda_graphs', 'tokens_per_s', 'model_tflops', 'mfu_datasheet', 'fill', 'rows_per_micro_batch', 'eager_micro_batches', 'fixed_shapes', 'shape_setup_steps', 'shape_setup_s')}}))" "$m" "$cg" <"$run/summary.json"
    done
  done
done > "$run/graphs.jsonl"
rm -rf "$run/graphs-run"
read -ra ms <<<"$models"
"$python" - "$run/graphs.jsonl" "$runs" "${ms[@]}" <<'PY'
import collections, json, statistics, sys
by = collections.defaultdict(list)
for l in open(sys.argv[1]):
    r = json.loads(l)
    by[(r["model"], r["mode"])].append(r)
runs, models = int(sys.argv[2]), sys.argv[3:]
if sorted(by) != sorted((m, k) for m in set(models) for k in ("off", "on")) or \
        any(len(v) != runs * models.count(k[0]) for k, v in by.items()):  # a figure only from a whole run
    sys.exit(f"graphs_bench: {sys.argv[1]} is not {runs} runs of each setting: no figures")
for m in sorted({k[0] for k in by}):
    med = lambda k, f: statistics.median(r[f] for r in by[(m, k)])
    ds = [r["mfu_datasheet"] for r in by[(m, "on")] if r["mfu_datasheet"] is not None]
    on = by[(m, "on")]
    print(f"{m:8s} off {med('off', 'tokens_per_s'):9.0f}, on {med('on', 'tokens_per_s'):9.0f} real tokens/s "
          f"(medians of {len(on)}; on: {on[0]['cuda_graphs']}); on / off "
          f"{med('on', 'tokens_per_s') / med('off', 'tokens_per_s'):.2f}x; model TFLOP/s "
          f"{med('off', 'model_tflops'):.1f} -> {med('on', 'model_tflops'):.1f}"
          + (f"; on: {statistics.median(ds):.1%} of the datasheet peak" if ds else "")
          + f"; fill {med('off', 'fill'):.3f} -> {med('on', 'fill'):.3f}, rows a micro-batch "
          f"{med('off', 'rows_per_micro_batch'):.1f} -> {med('on', 'rows_per_micro_batch'):.1f}; on: "
          f"{max(r['fixed_shapes'] for r in on)} shapes, {max(r['shape_setup_steps'] for r in on)} set-up steps "
          f"({med('on', 'shape_setup_s'):.2f} s, kept out of tokens/s), "
          f"{sum(r['eager_micro_batches'] for r in on)} eager micro-batches")
PY
