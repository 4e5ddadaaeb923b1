#!/usr/bin/env bash
# CUDA graphs in `genemask pretrain` on one GPU: real shards (the default recipe: 5-510
# tokens per sample), bf16, --packing on, with --cuda-graphs off (the eager step) and on
# (the step captured at step 1 and replayed), alternating, RUNS runs each; the median real
# tokens/s and model TFLOP/s of each and their ratio, per model. Needs a GPU (--device cuda).
# Usage: bench/graphs_bench.sh [STEPS (default 40)] [RUNS (default 3)] [MODELS (default "logo dnabert")]
#                              [BATCH (default 64)]
set -euo pipefail
unset CDPATH  # cd DIR must not go to a folder of that name on CDPATH
root=$(cd "$(dirname "$0")/.." && pwd)
steps=${1:-40}
runs=${2:-3}
models=${3:-logo dnabert}
batch=${4:-64}
copies=1
# shellcheck source=bench/common.sh
source "$root/bench/common.sh"
"$bin" shards --genome "$g" --out "$run/graphs-shards" >/dev/null
echo "== genemask pretrain on real shards, batch $batch, $steps steps, bf16 on cuda, --cuda-graphs off vs on"
for _ in $(seq "$runs"); do
  for m in $models; do
    for cg in off on; do
      rm -rf "$run/graphs-run"  # this run's own, from the last iteration
      "$bin" pretrain --shards "$run/graphs-shards" --masking random --model "$m" --out "$run/graphs-run" \
        --steps "$steps" --warmup 1 --batch-per-rank "$batch" --grad-accum 1 --log-every "$((steps / 2))" \
        --eval-every 0 --checkpoint-every 100000 --device cuda --precision bf16 --cuda-graphs "$cg" 2>/dev/null |
        "$python" -c "import json,sys; s=json.load(sys.stdin); print(json.dumps({'model': '$m', 'cuda_graphs': s['cuda_graphs'], 'tokens_per_s': s['tokens_per_s'], 'model_tflops': s['model_tflops'], 'mfu_datasheet': s['mfu_datasheet'], 'eager_micro_batches': s['eager_micro_batches']}))"
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
    by[(r["model"], "on" if r["cuda_graphs"] == "on" else "off")].append(r)
runs, models = int(sys.argv[2]), sys.argv[3:]
if sorted(by) != sorted((m, k) for m in set(models) for k in ("off", "on")) or \
        any(len(v) != runs * models.count(k[0]) for k, v in by.items()):  # a figure only from a whole run
    sys.exit(f"graphs_bench: {sys.argv[1]} is not {runs} runs of each setting: no figures")
for m in sorted({k[0] for k in by}):
    med = {k: statistics.median(r["tokens_per_s"] for r in by[(m, k)]) for k in ("off", "on")}
    tf = {k: statistics.median(r["model_tflops"] for r in by[(m, k)]) for k in ("off", "on")}
    ds = [r["mfu_datasheet"] for r in by[(m, "on")] if r["mfu_datasheet"] is not None]
    print(f"{m:8s} graphs off {med['off']:9.0f}, on {med['on']:9.0f} real tokens/s (medians of {len(by[(m, 'on')])}); "
          f"on / off {med['on'] / med['off']:.2f}x; model TFLOP/s {tf['off']:.1f} -> {tf['on']:.1f}"
          + (f"; on: {statistics.median(ds):.1%} of the datasheet peak" if ds else "")
          + f"; eager micro-batches {sum(r['eager_micro_batches'] for r in by[(m, 'on')])}")
PY
