#!/usr/bin/env bash
# The README's main job (scripts/demo.sh) on the real default chr22, made small: 4
# pretraining steps per masking strategy, 300 sites, 1 seed, 2 fine-tuning epochs. Checks
# every stage's outputs, the task's classes, the 4 sweep records and the final report, and
# that a second run continues instead of starting over. Needs the default genome
# (scripts/default-genome.sh: apt-get download maffilter-examples, cached in data/default).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/genemask-demo-XXXXXX")
if [ "${KEEP:-0}" != 1 ]; then trap 'rm -rf "$tmp"' EXIT; else echo "files kept in $tmp"; fi
export DEMO_STEPS=4 DEMO_SEEDS=1 DEMO_SITES=300 DEMO_FINETUNE_JSON='{"epochs": 2}'
out=$tmp/demo
bash "$repo/scripts/demo.sh" "$out" >"$tmp/demo.log" 2>&1 || { cat "$tmp/demo.log"; echo "FAILED: demo.sh" >&2; exit 1; }
fail=0
for f in count/counts.h5 count/npmi.tsv count/pmi_vocab.tsv count/motifs.md shards/manifest.json \
  runs/genemask/metrics.jsonl runs/random/metrics.jsonl models/genemask/model.safetensors \
  models/random/model.safetensors dataset/promoter/summary.json dataset/promoter/fewshot/10/train.tsv \
  dataset/promoter/fewshot/50/train.tsv sweep/results.jsonl report/table1.md report/improvement.md \
  mask-stats-genemask.json mask-stats-random.json sites.bed; do
  [ -s "$out/$f" ] || { echo "MISSING: $f" >&2; fail=1; }
done
[ "$(wc -l <"$out/sites.bed")" = 300 ] || { echo "sites.bed: want 300 sites" >&2; fail=1; }
# Every site lies in unmasked chr22 sequence, so no window is dropped: 300 positives and as
# many DeePromoter negatives (less exact duplicates, which random bases make unlikely).
"${PYTHON:-/usr/bin/python3}" - "$out/dataset/promoter" <<'PY' || fail=1
import csv, json, sys
d = sys.argv[1]
labels = {}
for part in ("train", "test"):
    with open(f"{d}/{part}.tsv") as f:
        for row in csv.DictReader(f, delimiter="\t"):
            labels[row["label"]] = labels.get(row["label"], 0) + 1
            assert len(row["sequence"]) == 70, row
assert labels == {"1": 300, "0": 300}, labels
PY
n_ok=$(grep -c '"status": *"ok"' "$out/sweep/results.jsonl" || true)
[ "$n_ok" = 4 ] || { echo "results.jsonl: $n_ok ok records, want 4 (2 models x 2 shots x 1 seed)" >&2; fail=1; }
for name in small-genemask small-random; do
  grep -q -- "$name" "$out/report/table1.md" || { echo "table1.md does not name $name" >&2; fail=1; }
done
grep -q "Results are in $out" "$tmp/demo.log" || { echo "the demo does not say where the results are" >&2; fail=1; }
grep -q "TATAAA" "$tmp/demo.log" || { echo "the demo does not print the motif table" >&2; fail=1; }
if grep -q '^{' "$out/count/motifs.md"; then echo "motifs.md holds the JSON summary line" >&2; fail=1; fi
# A second run continues: pretraining resumes, the sweep runs nothing again.
bash "$repo/scripts/demo.sh" "$out" >"$tmp/demo2.log" 2>&1 || { cat "$tmp/demo2.log"; fail=1; }
grep -q -- "--resume" "$out/logs/pretrain-random.log" || { echo "second run did not resume pretraining" >&2; fail=1; }
n_ok2=$(grep -c '"status": *"ok"' "$out/sweep/results.jsonl" || true)
[ "$n_ok2" = 4 ] || { echo "second run: $n_ok2 ok records, want 4" >&2; fail=1; }
if [ "$fail" != 0 ]; then cat "$tmp/demo.log"; echo "FAILED" >&2; exit 1; fi
echo "demo test passed"
