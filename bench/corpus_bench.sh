#!/usr/bin/env bash
# Stage 2 benchmarks: shard building (MB of FASTA per second per rank) and masking +
# batching (sequences/s on one core) against the same collator logic in NumPy, same run.
# Usage: bench/corpus_bench.sh [COPIES (default 8)] [RUNS (default 3)]
set -euo pipefail
unset CDPATH  # cd DIR must not go to a folder of that name on CDPATH
root=$(cd "$(dirname "$0")/.." && pwd)
mask_bench=${GENEMASK_MASK_BENCH:-"$root/build/bench/mask_bench"}
copies=${1:-8}
runs=${2:-3}
# shellcheck source=bench/common.sh
source "$root/bench/common.sh"
echo "== shard building on $g ($(du -h "$g" | cut -f1)), median of $runs runs"
for n in 1 2; do
  for _ in $(seq "$runs"); do  # --force: over this run's own shards of the run before
    mpiexec -n "$n" --oversubscribe "$bin" shards --genome "$g" --out "$run/shards-$n" --force
  done > "$run/shards-$n.jsonl"
  "$python" -c '
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
if len(rows) != int(sys.argv[2]):  # a figure only from a whole run
    sys.exit(f"corpus_bench: {sys.argv[1]} has {len(rows)} rows, expected {sys.argv[2]}: no figures")
t = statistics.median(r["seconds"] for r in rows)
d = rows[0]
mb_per_rank = d["fasta_mb_per_s_per_rank"] * d["seconds"] / t
print("{} rank(s): {:.3f} s = {:.0f} MB/s of FASTA per rank; {} samples kept of {} candidates".format(
    d["ranks"], t, mb_per_rank, d["segments_kept"], d["segments_candidate"]))' "$run/shards-$n.jsonl" "$runs"
done
echo "== masking + batching, 510-token sequences, batches of 10, one core"
"$mask_bench" "$run/tokens.bin" 20000 "$run/shards-1" > "$run/mask.jsonl"
"$python" "$root/bench/mask_bench_numpy.py" "$run/tokens.bin" >> "$run/mask.jsonl"
"$python" - "$run/mask.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
by = {(r["impl"], r["strategy"]): r["seq_per_s"] for r in rows}
if any((i, s) not in by for i in ("genemask", "numpy") for s in ("random", "genemask")):
    sys.exit(f"corpus_bench: {sys.argv[1]} lacks a row of genemask or numpy: no figures")
for (impl, strat), v in sorted(by.items()):
    print(f"{impl:16s} {strat:10s} {v:12,.0f} sequences/s")
for strat in ["random", "genemask"]:
    print(f"ratio genemask / numpy ({strat}): {by[('genemask', strat)] / by[('numpy', strat)]:.1f}x")
PY
