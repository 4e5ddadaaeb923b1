#!/usr/bin/env bash
# Stage 3 benchmark on CPU: one `logo` MLM training step (batch 10 x 512 tokens, forward,
# backward, clipping, AdamW) in genemask's LibTorch model and in Python PyTorch (PyTorch
# 2.11 in .venv, the same LibTorch), same threads, same run, in fp32 and (on a CPU with bf16
# instructions) bf16 autocast, with MFU against the peaks measured in the run; then `genemask
# pretrain` weak scaling: 1 vs 2 ranks, batch 5 and 1 thread per rank, 6 steps, the rate of
# the last 3 (the first steps, cold, left out). Tokens/s and MFU are both of a run's median
# step, medians over the runs.
# Usage: bench/train_bench.sh [STEPS (default 3)] [RUNS (default 3)]
set -euo pipefail
unset CDPATH  # cd DIR must not go to a folder of that name on CDPATH
root=$(cd "$(dirname "$0")/.." && pwd)
steps=${1:-3}
runs=${2:-3}
copies=1
# shellcheck source=bench/common.sh
source "$root/bench/common.sh"
tb="$root/build/bench/train_bench"
bench_precisions
echo "== one training step, logo config, 10 x 512 tokens (median of $steps steps; median of $runs runs, alternating)"
for _ in $(seq "$runs"); do
  for p in $precisions; do
    for t in 1 2; do
      "$tb" logo "$t" 10 512 "$steps" cpu "$p"
      "$python" "$root/bench/train_bench.py" logo "$t" 10 512 "$steps" cpu "$p"
    done
  done
done > "$run/train.jsonl"
read -ra ps <<<"$precisions"
"$python" - "$run/train.jsonl" "$((runs * ${#ps[@]} * 2 * 2))" <<'PY'
import collections, json, statistics, sys
if sum(1 for _ in open(sys.argv[1])) != int(sys.argv[2]):  # a figure only from a whole run
    sys.exit(f"train_bench: {sys.argv[1]} is not the {sys.argv[2]} rows of a whole run: no figures")
by = collections.defaultdict(list)
mfu = collections.defaultdict(list)
peaks = {}
for l in open(sys.argv[1]):
    r = json.loads(l)
    key = (r["impl"], r.get("precision", "fp32"), r["threads"])
    by[key].append(r["median_tokens_per_s"])  # the step MFU is of too
    if "mfu" in r:
        mfu[key].append(r["mfu"])
        peaks[r["threads"]] = r
med = {k: statistics.median(v) for k, v in by.items()}
for (impl, p, t), v in sorted(med.items()):
    extra = f"; MFU {statistics.median(mfu[(impl, p, t)]):.0%}" if (impl, p, t) in mfu else ""
    print(f"{impl:9s} {p} {t} thread(s): {v:8.0f} tokens/s (median; runs: {', '.join(f'{x:.0f}' for x in by[(impl, p, t)])}){extra}")
for t, r in sorted(peaks.items()):
    bf = r["peak_bf16_gflops"]
    print(f"peaks measured in the run, {t} thread(s): fp32 {r['peak_fp32_gflops']:.0f} GFLOP/s, bf16 "
          f"{f'{bf:.0f} GFLOP/s' if bf is not None else 'none'} (CPU: {r['cpu']}; bf16 instructions: {r['cpu_bf16']})")
for p in sorted({k[1] for k in med}):
    for t in (1, 2):
        print(f"ratio genemask / PyTorch, {p}, {t} thread(s): {med[('genemask', p, t)] / med[('pytorch', p, t)]:.2f}x")
if any(k[1] == "bf16" for k in med):
    for t in (1, 2):
        print(f"ratio genemask bf16 / genemask fp32, {t} thread(s): "
              f"{med[('genemask', 'bf16', t)] / med[('genemask', 'fp32', t)]:.2f}x")
PY
echo "== genemask pretrain, logo, weak scaling: batch 5 per rank, 1 thread per rank, 1 vs 2 ranks (steps 4-6 of 6)"
"$bin" shards --genome "$g" --out "$run/train-shards" >/dev/null
for n in 1 2; do
  logged mpiexec -n "$n" --oversubscribe "$bin" pretrain --shards "$run/train-shards" --masking random --model logo \
    --out "$run/train-run-$n" --steps 6 --warmup 1 --batch-per-rank 5 --grad-accum 1 --log-every 3 \
    --eval-every 0 --checkpoint-every 1000 --threads 1
done > "$run/scaling.jsonl"
"$python" - "$run/scaling.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
if [r["ranks"] for r in rows] != [1, 2]:  # a figure only from a whole run
    sys.exit(f"train_bench: {sys.argv[1]} is not one run at 1 and at 2 ranks: no figures")
for r in rows:
    print("{} rank(s): {:.0f} tokens/s of steps 4-6 (effective batch {})".format(r["ranks"], r["tokens_per_s"], r["effective_batch"]))
print("2-rank data-parallel efficiency (tokens/s of 2 ranks / twice that of 1): {:.2f}".format(
    rows[1]["tokens_per_s"] / (2 * rows[0]["tokens_per_s"])))
PY
