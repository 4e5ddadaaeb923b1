#!/usr/bin/env bash
# The README's main job (scripts/demo.sh) on the real default chr22, made small: 4
# pretraining steps per masking strategy, 300 sites, 1 seed, 2 fine-tuning epochs. Checks
# every stage's outputs, the task's classes, the 4 sweep records and the final report, and
# that a second run continues instead of starting over (all in a folder whose name has a
# space), and that the demo refuses (and leaves as they are) a folder that is not its own, a
# rerun with other settings, a file of its own that was changed and a second run at once.
# Needs the default genome (scripts/default-genome.sh: apt-get download maffilter-examples,
# cached in data/default).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# A folder name with a space: the demo's config and the pipeline keep paths whole.
tmp=$(mktemp -d "${TMPDIR:-/tmp}/genemask demo-XXXXXX")
if [ "${KEEP:-0}" != 1 ]; then trap 'rm -rf "$tmp"' EXIT; else echo "files kept in $tmp"; fi
export DEMO_STEPS=4 DEMO_SEEDS=1 DEMO_SITES=300 DEMO_FINETUNE_JSON='{"epochs": 2}'
out=$tmp/demo
# A folder of the user's (files the demo would write among them) is refused before anything.
mine=$tmp/mine
mkdir "$mine"
echo '{"mine": 1}' >"$mine/model.json"
printf 'chr1\t5\t6\tx\t0\t+\n' >"$mine/sites.bed"
(cd "$mine" && md5sum model.json sites.bed) >"$tmp/mine.md5"
if bash "$repo/scripts/demo.sh" "$mine" >"$tmp/mine.log" 2>&1; then echo "FAILED: a user's folder was taken" >&2; exit 1; fi
grep -q "not a demo's OUTDIR" "$tmp/mine.log" || { cat "$tmp/mine.log"; echo "FAILED: no message for a user's folder" >&2; exit 1; }
(cd "$mine" && md5sum -c --quiet "$tmp/mine.md5") || { echo "FAILED: the user's files were changed" >&2; exit 1; }
[ "$(ls -A "$mine")" = "$(printf 'model.json\nsites.bed')" ] || { echo "FAILED: the demo wrote into the user's folder" >&2; exit 1; }
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
leftover=$(find "$out" -maxdepth 1 -name '*.tmp.*')
[ -z "$leftover" ] || { echo "temporaries left: $leftover" >&2; fail=1; }
# Refused, and nothing changed: other settings, a changed file of the demo's, a run at once.
(cd "$out" && md5sum demo-settings.json demo.conf model.json sites.bed mask-stats-*) >"$tmp/out.md5"
if DEMO_STEPS=5 bash "$repo/scripts/demo.sh" "$out" >"$tmp/other.log" 2>&1 || ! grep -q "made with other settings" "$tmp/other.log"; then
  cat "$tmp/other.log"; echo "a rerun with other steps was not refused" >&2; fail=1
fi
cp "$out/model.json" "$tmp/model.json"
echo '{"mine": 1}' >"$out/model.json"
if bash "$repo/scripts/demo.sh" "$out" >"$tmp/changed.log" 2>&1 || ! grep -q "model.json differs" "$tmp/changed.log"; then
  cat "$tmp/changed.log"; echo "a changed model.json was not refused" >&2; fail=1
fi
grep -q mine "$out/model.json" || { echo "the changed model.json was written over" >&2; fail=1; }
cp "$tmp/model.json" "$out/model.json"
if flock "$out" bash "$repo/scripts/demo.sh" "$out" >"$tmp/twice.log" 2>&1 || ! grep -q "another demo is running" "$tmp/twice.log"; then
  cat "$tmp/twice.log"; echo "a second run at once was not refused" >&2; fail=1
fi
(cd "$out" && md5sum -c --quiet "$tmp/out.md5") || { echo "a refused run changed the demo's files" >&2; fail=1; }
if [ "$fail" != 0 ]; then cat "$tmp/demo.log"; echo "FAILED" >&2; exit 1; fi
echo "demo test passed"
