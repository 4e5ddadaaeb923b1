#!/usr/bin/env bash
# Packed sequences on the CPU: `genemask pretrain` on real shards (the default recipe: 5-510
# tokens per sample, uniform) with --packing off (one sample per row, padded to the longest
# of its micro-batch) and --packing on (several per row, attention within each sample),
# alternating, RUNS runs each; the median real tokens/s of each and their ratio, per model
# and precision (bf16 too where the CPU multiplies bf16 in hardware: AMX-BF16, AVX512-BF16).
# A run's rate is that of its last STEPS/2 steps (the last log window): the first
# steps (oneDNN's first products, the heap growing, the loader starting) are left out.
# Usage: bench/packing_bench.sh [STEPS (default 6, at least 2)] [RUNS (default 3)] [MODELS (default "logo dnabert")]
set -euo pipefail
unset CDPATH  # cd DIR must not go to a folder of that name on CDPATH
root=$(cd "$(dirname "$0")/.." && pwd)
steps=${1:-6}
runs=${2:-3}
models=${3:-logo dnabert}
copies=1
case $steps in *[!0-9]* | '' | 0 | 1) echo "packing_bench: STEPS must be an integer of at least 2, got '$steps'" >&2; exit 2 ;; esac
# shellcheck source=bench/common.sh
source "$root/bench/common.sh"
bench_precisions
"$bin" shards --genome "$g" --out "$run/packing-shards" >/dev/null
threads=$(nproc)
echo "== genemask pretrain on real shards, batch 8, $steps steps (rates of the last $((steps / 2))), $threads threads, packing off vs on"
for _ in $(seq "$runs"); do
  for m in $models; do
    for p in $precisions; do
      for pk in off on; do
        rm -rf "$run/packing-run"  # this run's own, from the last iteration
        logged "$bin" pretrain --shards "$run/packing-shards" --masking random --model "$m" --out "$run/packing-run" \
          --steps "$steps" --warmup 1 --batch-per-rank 8 --grad-accum 1 --log-every "$(((steps + 1) / 2))" --eval-every 0 \
          --checkpoint-every 100000 --threads "$threads" --precision "$p" --packing "$pk" >"$run/summary.json"
        "$python" -c "import json,sys; s=json.load(sys.stdin); print(json.dumps({'model': '$m', 'precision': s['precision'], 'packing': s['packing'], 'tokens_per_s': s['tokens_per_s']}))" <"$run/summary.json"
      done
    done
  done
done > "$run/packing.jsonl"
rm -rf "$run/packing-run"
read -ra ms <<<"$models"
"$python" - "$run/packing.jsonl" "$runs" "$precisions" "${ms[@]}" <<'PY'
import collections, json, statistics, sys
by = collections.defaultdict(list)
for l in open(sys.argv[1]):
    r = json.loads(l)
    by[(r["model"], r["precision"], r["packing"])].append(r["tokens_per_s"])
runs, precisions, models = int(sys.argv[2]), sys.argv[3].split(), sys.argv[4:]
if sorted(by) != sorted((m, p, k) for m in set(models) for p in precisions for k in ("off", "on")) or \
        any(len(v) != runs * models.count(k[0]) for k, v in by.items()):  # a figure only from a whole run
    sys.exit(f"packing_bench: {sys.argv[1]} is not {runs} runs of each setting: no figures")
for (m, p) in sorted({k[:2] for k in by}):
    off, on = statistics.median(by[(m, p, "off")]), statistics.median(by[(m, p, "on")])
    print(f"{m:8s} {p}: packing off {off:8.0f}, on {on:8.0f} real tokens/s (medians of {len(by[(m, p, 'on')])}); "
          f"on / off {on / off:.2f}x")
PY
