#!/usr/bin/env bash
# Many genomes (issue 32): `genemask count --genomes` and `shards --genomes` on a corpus of
# 30 genomes of uneven sizes (the real chr22 and 29 generated ones, about TOTAL_MBP in all,
# plain FASTA), at 1 and 2 ranks, against jellyfish and KMC counting the same files in the
# same run. Prints medians (hyperfine; jellyfish, minutes per run here, once unless
# JF_RUNS), ratios, and per-rank memory and balance. A ratio is printed only for outputs
# shown equal to the pool's 10-mer counts at 1 rank in this run (each KMC and jellyfish run's
# last output, and genemask's 2-rank pool): any difference stops the script (exit 1).
# Usage: bench/genomes_bench.sh [TOTAL_MBP (default 3000)] [RUNS (default 3)]
set -euo pipefail
unset CDPATH  # cd DIR must not go to a folder of that name on CDPATH
root=$(cd "$(dirname "$0")/.." && pwd)
total=${1:-3000}
runs=${2:-3}
copies=1
# shellcheck source=bench/common.sh
source "$root/bench/common.sh"
corpus=$work/genomes-$total  # a cache: make-bench-genomes.py keeps what is already whole and equal
"$python" "$root/bench/make-bench-genomes.py" "$corpus" 30 "$total" "$chr22"
list=$corpus/genomes.tsv
mapfile -t files < <(tail -n +2 "$list" | cut -f2)
printf '%s\n' "${files[@]}" >"$run/files.txt"
mkdir "$run/kmctmp"
echo "== input: ${#files[@]} genomes, $(du -chL "${files[@]}" | tail -1 | cut -f1) of FASTA; machine: $(nproc) cores, $(lscpu | sed -n 's/Model name: *//p')"
# hyperfine runs each command line with sh -c: the paths in them quoted (q)
L=$(q "$list") B=$(q "$bin") R=$(q "$run")
F=$(for f in "${files[@]}"; do printf '%q ' "$f"; done)
hyperfine --style basic --warmup 1 --runs "$runs" --export-json "$run/genomes.json" \
  -n "genemask count --genomes k=1..10, 1 rank" "$B count --genomes $L --out $R/g1.h5 --quiet --force" \
  -n "genemask count --genomes k=1..10, 2 ranks" "mpiexec -n 2 --oversubscribe $B count --genomes $L --out $R/g2.h5 --quiet --force" \
  -n "KMC k=10, 1 thread" "kmc -k10 -ci1 -cs4294967295 -b -fm -t1 -m4 @$R/files.txt $R/kmcg-t1 $R/kmctmp" \
  -n "KMC k=10, 2 threads" "kmc -k10 -ci1 -cs4294967295 -b -fm -t2 -m4 @$R/files.txt $R/kmcg-t2 $R/kmctmp" \
  >"$run/genomes.txt"
# jellyfish takes minutes per run on this input: one run each (JF_RUNS to change).
hyperfine --style basic --runs "${JF_RUNS:-1}" --export-json "$run/genomes-jf.json" \
  -n "jellyfish k=10, 1 thread" "jellyfish count -m 10 -s 4M -t 1 -o $R/jg-t1.jf $F" \
  -n "jellyfish k=10, 2 threads" "jellyfish count -m 10 -s 4M -t 2 -o $R/jg-t2.jf $F" \
  >"$run/genomes-jf.txt"

echo "== genemask count --genomes: memory and balance (one more run each)"
for n in 1 2; do  # the same command line (which counts.h5 records) in two directories
  mkdir "$run/count-r$n"
  (cd "$run/count-r$n" && mpiexec -n "$n" --oversubscribe "$bin" count --genomes "$list" --out g.h5 --quiet)
done > "$run/memory.jsonl"
"$python" -c '
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
if [d["ranks"] for d in rows] != [1, 2]:  # a figure only from a whole run
    sys.exit(f"genomes_bench: {sys.argv[1]} is not one run at 1 and at 2 ranks: no figures")
for d in rows:
    bal = ", ".join("rank {}: {:.2f} GB in {:.1f} s".format(r["rank"], r["file_bytes"] / 1e9, r["count_s"]) for r in d["rank_balance"])
    print("{} rank(s): {:.1f} s, peak RSS {:.0f} MiB (largest rank), spool {:.0f} MiB; {}".format(
        d["ranks"], d["seconds"], d["peak_rss_mib"], d["spool_mib"], bal))' "$run/memory.jsonl"
if cmp "$run/count-r1/g.h5" "$run/count-r2/g.h5"; then
  echo "1 and 2 ranks: byte-identical counts.h5"
else
  echo "genomes_bench: counts.h5 at 1 and 2 ranks differ: no figures" >&2
  exit 1
fi

echo "== genemask shards --genomes (once per rank count)"
for n in 1 2; do
  mpiexec -n "$n" --oversubscribe "$bin" shards --genomes "$list" --out "$run/gshards$n"
done > "$run/shards.jsonl"
rm -rf "$run/gshards1" "$run/gshards2"  # this run's own (the space they take, before KMC's dump)
"$python" -c '
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
if [d["ranks"] for d in rows] != [1, 2]:  # a figure only from a whole run
    sys.exit(f"genomes_bench: {sys.argv[1]} is not one run at 1 and at 2 ranks: no figures")
for d in rows:
    t = d["tokens"]["train"] + d["tokens"]["valid"]
    print("{} rank(s): {:.1f} s, {:.2f} G tokens, {:.0f} MB/s of FASTA per rank, {} genomes".format(
        d["ranks"], d["seconds"], t / 1e9, d["fasta_mb_per_s_per_rank"], len(d["genomes"])))' "$run/shards.jsonl"

echo "== the same counts? (genemask at 2 ranks, KMC's and jellyfish's 10-mers against the pool at 1 rank)"
dumps=()
for t in 1 2; do
  kmc_tools transform "$run/kmcg-t$t" dump "$run/kmcg-t$t.txt" >"$run/kmcg-t$t.err" 2>&1 ||
    { echo "genomes_bench: kmc_tools could not dump $run/kmcg-t$t: $(tail -3 "$run/kmcg-t$t.err")" >&2; exit 1; }
  jellyfish dump -c "$run/jg-t$t.jf" >"$run/jg-t$t.txt" 2>"$run/jg-t$t.err" ||
    { echo "genomes_bench: jellyfish could not dump $run/jg-t$t.jf: $(tail -3 "$run/jg-t$t.err")" >&2; exit 1; }
  dumps+=("$run/kmcg-t$t.txt" "$run/jg-t$t.txt")
done
same=0  # both checks before stopping, so that one run names every output that differs
"$python" "$root/bench/kmc-equal.py" "$run/g1.h5" --same "$run/g2.h5" || same=$?
"$python" "$root/bench/kmc-equal.py" "$run/g1.h5" "${dumps[@]}" || same=$?
if [ "$same" != 0 ]; then
  echo "genomes_bench: outputs differ from genemask's 1-rank pool (or could not be read): no ratios" >&2
  exit 1
fi

echo "== medians and ratios"
"$python" - "$run/genomes.json" "$run/genomes-jf.json" <<'PY'
import json, statistics, sys
res = {r["command"]: statistics.median(r["times"]) for p in sys.argv[1:] for r in json.load(open(p))["results"]}
for name, t in res.items():
    print(f"{name:44s} {t:8.2f} s")
g1, g2 = res["genemask count --genomes k=1..10, 1 rank"], res["genemask count --genomes k=1..10, 2 ranks"]
for peer in ("KMC k=10", "jellyfish k=10"):
    print(f"ratio {peer} / genemask k=1..10 (each genome and the pool): 1 thread vs 1 rank {res[peer + ', 1 thread'] / g1:.2f}x, "
          f"2 threads vs 2 ranks {res[peer + ', 2 threads'] / g2:.2f}x")
print(f"2-rank speed-up of genemask: {g1 / g2:.2f}x")
PY
