#!/usr/bin/env bash
# bench/masking_study.sh (issue 33) on the real default chr22, made small: 2 pretraining
# seeds per strategy of 4 steps, 300 sites, 10 shots x 2 fine-tuning seeds. Checks that
# every replicate was pretrained with its seed, that the report compares the arms over
# their replicates (paired by seed, k = 2), and that the audit wrote its per-6-mer table
# and summary for each strategy; that a folder not the study's, and a rerun with other
# settings, are refused and left as they are.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/genemask study-XXXXXX")  # a space in the name: paths kept whole
if [ "${KEEP:-0}" != 1 ]; then trap 'rm -rf "$tmp"' EXIT; else echo "files kept in $tmp"; fi
export STUDY_STEPS=4 STUDY_SEEDS="1 2" STUDY_FINETUNE_SEEDS=2 STUDY_SITES=300 STUDY_SHOTS=10
out=$tmp/study
# A folder of the user's (a model.json of theirs in it) is refused before anything.
mine=$tmp/mine
mkdir "$mine"
echo '{"mine": 1}' >"$mine/model.json"
if bash "$repo/bench/masking_study.sh" "$mine" >"$tmp/mine.log" 2>&1 || ! grep -q "not a study's OUTDIR" "$tmp/mine.log"; then
  cat "$tmp/mine.log"; echo "FAILED: a user's folder was not refused" >&2; exit 1
fi
if [ "$(ls -A "$mine")" != model.json ] || ! grep -q mine "$mine/model.json"; then
  echo "FAILED: the study wrote into the user's folder" >&2; exit 1
fi
bash "$repo/bench/masking_study.sh" "$out" >"$tmp/study.log" 2>&1 || { cat "$tmp/study.log"; echo "FAILED: masking_study.sh" >&2; exit 1; }
fail=0
for m in genemask random; do
  for s in 1 2; do
    grep -q -- "--seed $s" "$out/logs/pretrain-$m-s$s.log" || { echo "replicate $m-s$s: no --seed $s" >&2; fail=1; }
  done
  [ "$(wc -l <"$out/audit-$m.tsv")" = 4097 ] || { echo "audit-$m.tsv: want a header and 4096 6-mers" >&2; fail=1; }
done
"${PYTHON:-/usr/bin/python3}" - "$out" <<'PY' || fail=1
import csv, json, sys
out = sys.argv[1]
rows = list(csv.DictReader(open(f"{out}/report/replicates.csv")))
assert {r["arm"] for r in rows} == {"study-genemask", "study-random"}, rows
for r in rows:
    assert r["replicates"] == "2" and r["replicate_ids"] == "1 2", r
    assert r["seeds"] == "2 2", r
    if r["arm"] == "study-genemask":
        assert r["baseline"] == "study-random" and r["test"] == "paired" and r["p"], r
for m in ("genemask", "random"):
    s = json.load(open(f"{out}/audit-{m}.json"))
    assert s["samples"] == 5000 and s["by_kmer"]["out"].endswith(f"audit-{m}.tsv"), s["by_kmer"]
    assert set(s["by_kmer"]["splice_motifs"]) == {"GT", "AG"}, s["by_kmer"]
    assert s["leakage"]["spans"] > 0, s["leakage"]
print("masking study: replicates, paired test and audits as expected")
PY
grep -q "whose unit is the pretraining replicate" "$out/report/replicates.md" || { echo "replicates.md lacks its note" >&2; fail=1; }
grep -q "^genemask: masked " "$tmp/study.log" || { echo "the study does not print the audit" >&2; fail=1; }
grep -q "^Study done in" "$tmp/study.log" || { echo "the study does not end" >&2; fail=1; }
leftover=$(find "$out" -maxdepth 1 -name '*.tmp.*')
[ -z "$leftover" ] || { echo "temporaries left: $leftover" >&2; fail=1; }
# A rerun with other settings would mix its results with these: refused, nothing changed.
(cd "$out" && md5sum study-settings.json study.conf model.json sites.bed audit-*) >"$tmp/out.md5"
if STUDY_SEEDS="1 2 3" bash "$repo/bench/masking_study.sh" "$out" >"$tmp/other.log" 2>&1 ||
  ! grep -q "made with other settings" "$tmp/other.log"; then
  cat "$tmp/other.log"; echo "a rerun with other seeds was not refused" >&2; fail=1
fi
(cd "$out" && md5sum -c --quiet "$tmp/out.md5") || { echo "a refused run changed the study's files" >&2; fail=1; }
if [ "$fail" != 0 ]; then cat "$tmp/study.log"; echo "FAILED" >&2; exit 1; fi
echo "masking study test passed"
