#!/usr/bin/env bash
# The main job on the built-in default data (human chr22 from maffilter-examples):
# distributed k-mer counting, the NPMI ranking (GRANK), Gene-PMI-VOC, the motif table, the
# sharded pretraining corpus and what GeneMask vs random masking do to it.
# Usage: scripts/demo.sh [OUTDIR]   (default: results/demo); RANKS=2 by default.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${GENEMASK_BIN:-"$root/build/src/cli/genemask"}
out=${1:-"$root/results/demo"}
ranks=${RANKS:-2}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mkdir -p "$out"
genome=$("$root/scripts/default-genome.sh")
echo "== genemask count ($ranks ranks) on $genome"
mpiexec -n "$ranks" --oversubscribe "$bin" count --genome "$genome" --out "$out/counts.h5" | tee "$out/count.json"
echo "== genemask npmi"
"$bin" npmi --counts "$out/counts.h5" --out "$out/npmi.tsv" | tee "$out/npmi.json"
echo "== genemask pmi-vocab"
"$bin" pmi-vocab --counts "$out/counts.h5" --out "$out/pmi_vocab.tsv" --min-count 1000 | tee "$out/pmi_vocab.json"
echo "== genemask motifs (the paper's Table 5 motifs)"
"$bin" motifs --npmi "$out/npmi.tsv" --format markdown \
  'n[TATAAA]r' '[GTGGCT]sw' 'nCyy[CCTCC]n*' 'sCw[GCAGC]n' 'ks[CTGGG]m' '[TTTTTT]TTTn' | tee "$out/motifs.md"
echo "== genemask shards ($ranks ranks): the pretraining corpus"
mpiexec -n "$ranks" --oversubscribe "$bin" shards --genome "$genome" --out "$out/shards" | tee "$out/shards.json"
for m in genemask random; do
  echo "== genemask mask-stats --masking $m"
  "$bin" mask-stats --shards "$out/shards" --masking "$m" --npmi "$out/npmi.tsv" --samples 5000 \
    2> "$out/mask-stats-$m.txt" | tee "$out/mask-stats-$m.json"
  head -n 1 "$out/mask-stats-$m.txt"
done
echo
echo "Top of the GRANK list ($out/npmi.tsv):"
head -n 11 "$out/npmi.tsv"
echo
echo "Results are in $out: counts.h5, npmi.tsv, pmi_vocab.tsv, motifs.md, shards/, mask-stats-*.txt"
