#!/usr/bin/env bash
# genemask count against jellyfish and KMC on the same FASTA, in one run; prints medians
# (hyperfine) and ratios, the read/parse/count split, and a check that KMC's 10-mer
# counts equal ours.
# Usage: bench/count_bench.sh [COPIES (default 8)] [RUNS (default 5)]
# Input: the default chr22 with long N runs shortened, repeated COPIES times (~22.5 Mbp each).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
copies=${1:-8}
runs=${2:-5}
# shellcheck source=bench/common.sh
source "$root/bench/common.sh"
mkdir -p "$work/kmctmp"
[ -s "$g.gz" ] || gzip -c "$g" > "$g.gz"
[ -s "$g.bgz" ] || bgzip -c -@ "$(nproc)" "$g" > "$g.bgz"
echo "== input: $g ($(du -h "$g" | cut -f1)), machine: $(nproc) cores, $(lscpu | sed -n 's/Model name: *//p')"
hyperfine --style basic --warmup 1 --runs "$runs" --export-json "$work/fast.json" \
  -n "genemask k=1..10, 1 rank" "$bin count --genome $g --out $work/c1.h5 --quiet" \
  -n "genemask k=1..10, 2 ranks" "mpiexec -n 2 --oversubscribe $bin count --genome $g --out $work/c2.h5 --quiet" \
  -n "KMC k=10, 1 thread" "kmc -k10 -ci1 -cs4294967295 -b -fm -t1 -m2 $g $work/kmc10 $work/kmctmp" \
  -n "KMC k=10, 2 threads" "kmc -k10 -ci1 -cs4294967295 -b -fm -t2 -m2 $g $work/kmc10 $work/kmctmp" \
  -n "jellyfish k=10, 1 thread" "jellyfish count -m 10 -s 4M -t 1 -o $work/j10.jf $g" \
  > "$work/fast.txt"
hyperfine --style basic --runs "$(( runs < 3 ? runs : 3 ))" --export-json "$work/jf.json" \
  -n "jellyfish k=1..10, 1 thread" "$root/bench/jellyfish-all-k.sh 1 $g $work/j.jf" \
  -n "jellyfish k=1..10, 2 threads" "$root/bench/jellyfish-all-k.sh 2 $g $work/j.jf" > "$work/jf.txt"

echo "== time split on 1 rank (read = decompress only, parse = read + FASTA scan, count = everything)"
for f in "$g" "$g.gz" "$g.bgz"; do
  "$bin" count --genome "$f" --out "$work/p.h5" --quiet --profile
done > "$work/split.jsonl"
"$python" - "$work/split.jsonl" <<'PY2'
import json, sys
for line in open(sys.argv[1]):
    d = json.loads(line)
    gbp = d["bases_read"] / 1e9
    print("{:5s} read {:.3f} s  parse {:.3f} s  count {:.3f} s = {:.3f} Gbp/s, peak {:.0f} MiB".format(
        d["compression"], d["read_s"], d["parse_s"], d["count_s"], gbp / d["count_s"], d["peak_rss_mib"]))
PY2

echo "== counting phase alone (count_s of the summary, slowest rank), median of $runs runs"
for f in "$g" "$g.bgz"; do
  for n in 1 2; do
    for _ in $(seq "$runs"); do
      mpiexec -n "$n" --oversubscribe "$bin" count --genome "$f" --out "$work/r.h5" --quiet
    done | "$python" -c '
import json, statistics, sys
rows = [json.loads(l) for l in sys.stdin]
t = statistics.median(r["count_s"] for r in rows)
d = rows[0]
print("{:5s} {} rank(s): count_s {:.3f} s = {:.3f} Gbp/s per rank".format(
    d["compression"], d["ranks"], t, d["bases_read"] / t / 1e9 / d["ranks"]))'
  done
done

echo "== KMC's 10-mer counts equal ours?"
kmc_tools transform "$work/kmc10" dump "$work/kmc10.txt" >/dev/null 2>&1
"$python" "$root/bench/kmc-equal.py" "$work/c1.h5" "$work/kmc10.txt"

echo "== medians and ratios"
"$python" - "$work/fast.json" "$work/jf.json" "$g" <<'PY'
import json, os, statistics, sys
res = {}
for path in sys.argv[1:3]:
    for r in json.load(open(path))["results"]:
        res[r["command"]] = statistics.median(r["times"])
for name, t in res.items():
    print(f"{name:32s} {t:8.3f} s")
g1, g2 = res["genemask k=1..10, 1 rank"], res["genemask k=1..10, 2 ranks"]
mbp = os.path.getsize(sys.argv[3]) / 1e6
print(f"genemask 1 rank: {mbp / g1 / 1000:.3f} GB/s of FASTA end to end (start-up and HDF5 write included)")
print(f"ratio jellyfish k=1..10 / genemask k=1..10, 1 thread vs 1 rank: {res['jellyfish k=1..10, 1 thread'] / g1:.1f}x")
print(f"ratio jellyfish k=1..10 / genemask k=1..10, 2 threads vs 2 ranks: {res['jellyfish k=1..10, 2 threads'] / g2:.1f}x")
print(f"ratio KMC k=10 / genemask k=1..10, 1 thread vs 1 rank: {res['KMC k=10, 1 thread'] / g1:.2f}x")
print(f"ratio KMC k=10 / genemask k=1..10, 2 threads vs 2 ranks: {res['KMC k=10, 2 threads'] / g2:.2f}x")
print(f"2-rank speed-up of genemask: {g1 / g2:.2f}x")
PY
