#!/usr/bin/env bash
# genemask count against jellyfish and KMC on the same FASTA, in one run; prints medians
# (hyperfine) and ratios, and the read/parse/count split. A ratio is printed only for
# outputs shown equal to genemask's 1-rank counts in this run (each peer run's last output,
# every k it counted, and genemask's 2-rank one): any difference stops the script (exit 1).
# Usage: bench/count_bench.sh [COPIES (default 8)] [RUNS (default 5)]
# Input: the default chr22 with long N runs shortened, repeated COPIES times (~22.5 Mbp each).
set -euo pipefail
unset CDPATH  # cd DIR must not go to a folder of that name on CDPATH
root=$(cd "$(dirname "$0")/.." && pwd)
copies=${1:-8}
runs=${2:-5}
# shellcheck source=bench/common.sh
source "$root/bench/common.sh"
mkdir "$run/kmctmp"
[ -s "$g.gz" ] || to_cache "$g.gz" gzip -c "$g"
[ -s "$g.bgz" ] || to_cache "$g.bgz" bgzip -c -@ "$(nproc)" "$g"
echo "== input: $g ($(du -h "$g" | cut -f1)), machine: $(nproc) cores, $(lscpu | sed -n 's/Model name: *//p')"
# hyperfine runs each command line with sh -c: the paths in them quoted (q)
G=$(q "$g") B=$(q "$bin") R=$(q "$run")
hyperfine --style basic --warmup 1 --runs "$runs" --export-json "$run/fast.json" \
  -n "genemask k=1..10, 1 rank" "$B count --genome $G --out $R/c1.h5 --quiet" \
  -n "genemask k=1..10, 2 ranks" "mpiexec -n 2 --oversubscribe $B count --genome $G --out $R/c2.h5 --quiet" \
  -n "KMC k=10, 1 thread" "kmc -k10 -ci1 -cs4294967295 -b -fm -t1 -m2 $G $R/kmc10-t1 $R/kmctmp" \
  -n "KMC k=10, 2 threads" "kmc -k10 -ci1 -cs4294967295 -b -fm -t2 -m2 $G $R/kmc10-t2 $R/kmctmp" \
  -n "jellyfish k=10, 1 thread" "jellyfish count -m 10 -s 4M -t 1 -o $R/j10.jf $G" \
  > "$run/fast.txt"
hyperfine --style basic --runs "$(( runs < 3 ? runs : 3 ))" --export-json "$run/jf.json" \
  -n "jellyfish k=1..10, 1 thread" "$(q "$root/bench/jellyfish-all-k.sh") 1 $G $R/j-t1" \
  -n "jellyfish k=1..10, 2 threads" "$(q "$root/bench/jellyfish-all-k.sh") 2 $G $R/j-t2" > "$run/jf.txt"

echo "== time split on 1 rank (read = decompress only, parse = read + FASTA scan, count = everything)"
for f in "$g" "$g.gz" "$g.bgz"; do
  "$bin" count --genome "$f" --out "$run/p.h5" --quiet --profile
done > "$run/split.jsonl"
"$python" - "$run/split.jsonl" <<'PY2'
import json, sys
lines = open(sys.argv[1]).readlines()
if len(lines) != 3:  # a figure only from a whole run
    sys.exit(f"count_bench: {sys.argv[1]} has {len(lines)} rows, expected 3: no figures")
for line in lines:
    d = json.loads(line)
    gbp = d["bases_read"] / 1e9
    print("{:5s} read {:.3f} s  parse {:.3f} s  count {:.3f} s = {:.3f} Gbp/s, peak {:.0f} MiB".format(
        d["compression"], d["read_s"], d["parse_s"], d["count_s"], gbp / d["count_s"], d["peak_rss_mib"]))
PY2

echo "== counting phase alone (count_s of the summary, slowest rank), median of $runs runs"
for f in "$g" "$g.bgz"; do
  for n in 1 2; do
    for _ in $(seq "$runs"); do
      mpiexec -n "$n" --oversubscribe "$bin" count --genome "$f" --out "$run/r.h5" --quiet
    done > "$run/phase.jsonl"
    "$python" -c '
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
if len(rows) != int(sys.argv[2]):  # a figure only from a whole run
    sys.exit(f"count_bench: {sys.argv[1]} has {len(rows)} rows, expected {sys.argv[2]}: no figures")
t = statistics.median(r["count_s"] for r in rows)
d = rows[0]
print("{:5s} {} rank(s): count_s {:.3f} s = {:.3f} Gbp/s per rank".format(
    d["compression"], d["ranks"], t, d["bases_read"] / t / 1e9 / d["ranks"]))' "$run/phase.jsonl" "$runs"
  done
done

echo "== the same counts? (genemask at 2 ranks, KMC and jellyfish against genemask at 1 rank)"
# dump NAME CMD...: CMD's k-mer dump into $run/NAME.txt; a failure named, with its message.
dump() {
  local name=$1
  shift
  "$@" >"$run/$name.txt" 2>"$run/$name.err" ||
    { echo "count_bench: '$*' failed (exit $?): $(tail -3 "$run/$name.err")" >&2; exit 1; }
}
dumps=()
for t in 1 2; do
  kmc_tools transform "$run/kmc10-t$t" dump "$run/kmc10-t$t.txt" >"$run/kmc10-t$t.err" 2>&1 ||
    { echo "count_bench: kmc_tools could not dump $run/kmc10-t$t: $(tail -3 "$run/kmc10-t$t.err")" >&2; exit 1; }
  dumps+=("$run/kmc10-t$t.txt")
  for k in 1 2 3 4 5 6 7 8 9 10; do
    dump "j-t$t-k$k" jellyfish dump -c "$run/j-t$t-k$k.jf"
    dumps+=("$run/j-t$t-k$k.txt")
  done
done
dump j10 jellyfish dump -c "$run/j10.jf"
dumps+=("$run/j10.txt")
# Both checks before stopping, so that one run names every output that differs.
same=0
"$python" "$root/bench/kmc-equal.py" "$run/c1.h5" --same "$run/c2.h5" || same=$?
"$python" "$root/bench/kmc-equal.py" "$run/c1.h5" "${dumps[@]}" >"$run/equal.txt" || same=$?
if [ "$same" != 0 ]; then
  grep -v ": identical$" "$run/equal.txt" || true
  echo "count_bench: outputs differ from genemask's 1-rank counts (or could not be read): no ratios" >&2
  exit 1
fi
echo "KMC (1 and 2 threads, k=10) and jellyfish (1 and 2 threads, k=1..10; k=10 alone): ${#dumps[@]} outputs identical"

echo "== medians and ratios"
"$python" - "$run/fast.json" "$run/jf.json" "$g" <<'PY'
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
