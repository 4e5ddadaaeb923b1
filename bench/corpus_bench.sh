#!/usr/bin/env bash
# Stage 2 benchmarks: shard building (MB of FASTA per second per rank) and masking +
# batching (sequences/s on one core) against the same collator logic in NumPy, same run.
# Usage: bench/corpus_bench.sh [COPIES (default 8)] [RUNS (default 3)]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
mask_bench=${GENEMASK_MASK_BENCH:-"$root/build/bench/mask_bench"}
copies=${1:-8}
runs=${2:-3}
# shellcheck source=bench/common.sh
source "$root/bench/common.sh"
echo "== shard building on $g ($(du -h "$g" | cut -f1)), median of $runs runs"
for n in 1 2; do
  for _ in $(seq "$runs"); do
    mpiexec -n "$n" --oversubscribe "$bin" shards --genome "$g" --out "$work/shards-$n" --force
  done | "$python" -c '
import json, statistics, sys
rows = [json.loads(l) for l in sys.stdin]
t = statistics.median(r["seconds"] for r in rows)
d = rows[0]
mb_per_rank = d["fasta_mb_per_s_per_rank"] * d["seconds"] / t
print("{} rank(s): {:.3f} s = {:.0f} MB/s of FASTA per rank; {} samples kept of {} candidates".format(
    d["ranks"], t, mb_per_rank, d["segments_kept"], d["segments_candidate"]))'
done
echo "== masking + batching, 510-token sequences, batches of 10, one core"
"$mask_bench" "$work/tokens.bin" 20000 "$work/shards-1" > "$work/mask.jsonl"
"$python" "$root/bench/mask_bench_numpy.py" "$work/tokens.bin" >> "$work/mask.jsonl"
"$python" - "$work/mask.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
by = {(r["impl"], r["strategy"]): r["seq_per_s"] for r in rows}
for (impl, strat), v in sorted(by.items()):
    print(f"{impl:16s} {strat:10s} {v:12,.0f} sequences/s")
for strat in ["random", "genemask"]:
    print(f"ratio genemask / numpy ({strat}): {by[('genemask', strat)] / by[('numpy', strat)]:.1f}x")
PY
