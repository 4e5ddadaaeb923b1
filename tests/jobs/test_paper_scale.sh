#!/usr/bin/env bash
# bench/paper_scale.sh (issue 30: the LOGO study at the paper's budget on a GPU) made tiny on
# the CPU: a 300 kb genome, 3 steps of 2 x 2 sequences per arm, fp32. Checks that both arms
# pretrained the logo model with their masking for the steps asked, that paper_scale.json
# holds each arm's minutes, real tokens/s, model TFLOP/s and no datasheet MFU (a CPU), that a
# second run keeps the finished arms instead of training again, that PAPER_MODEL=dnabert
# pretrains the DNABERT-size model in the same directory from the same counts and shards into
# its own JSON (one step of one sequence), that a bad setting is refused before anything
# runs, and that a genome which is one of the script's own outputs is refused and left whole.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
py=${PYTHON:-/usr/bin/python3}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/genemask-paper-XXXXXX")
if [ "${KEEP:-0}" != 1 ]; then trap 'rm -rf "$tmp"' EXIT; else echo "files kept in $tmp"; fi
"$py" - "$tmp/g.fa" <<'PY'
import random, sys
rng = random.Random(7)
with open(sys.argv[1], "w") as f:
    for r in range(3):
        f.write(f">chr{r + 1}\n")
        s = "".join(rng.choice("ACGT") for _ in range(100000))
        for i in range(0, len(s), 80):
            f.write(s[i:i + 80] + "\n")
PY
export PAPER_GENOME=$tmp/g.fa PAPER_STEPS=3 PAPER_BATCH=2 PAPER_ACCUM=2 PAPER_DEVICE=cpu PAPER_PRECISION=fp32
out=$tmp/paper
bash "$repo/bench/paper_scale.sh" "$out" >"$tmp/run1.log" 2>&1 || { cat "$tmp/run1.log"; echo "FAILED: paper_scale.sh" >&2; exit 1; }
fail=0
"$py" - "$out" <<'PY' || fail=1
import json, sys
out = sys.argv[1]
r = json.load(open(f"{out}/paper_scale.json"))
assert r["steps"] == 3 and r["sequences_per_step"] == 4 and r["paper_budget"] is False, r
assert [a["masking"] for a in r["arms"]] == ["genemask", "random"], r["arms"]
for a in r["arms"]:
    assert a["steps"] == 3 and a["minutes"] >= 0 and a["tokens_per_s"] > 0 and a["model_tflops"] > 0, a
    assert a["mfu_datasheet"] is None and a["precision"] == "fp32", a
    assert a["profile"] is None, a  # no PAPER_PROFILE_STEPS
    assert 0 < a["fill"] <= 1 and a["rows_per_micro_batch"] >= 1, a  # of the positions computed
    assert 0 <= a["input_wait"] <= 1 and a["loader_busy"] >= 0, a  # shares of the window
    assert a["cuda_graphs"] == "off (the device is a CPU)", a  # PAPER_CUDA_GRAPHS=auto
    assert a["fixed_shapes"] == 0 and a["shape_setup_steps"] == 0 and a["shape_setup_s"] == 0, a
    assert a["loss"] is not None and a["loss"] > 0, a
    m = [json.loads(l) for l in open(f"{out}/logo-{a['masking']}/metrics.jsonl") if '"loss"' in l]
    assert m and m[-1]["step"] == 3, m
print("paper_scale: both arms as asked")
PY
grep -q "^genemask .* 3 steps x 4 sequences" "$tmp/run1.log" || { echo "no line for the genemask arm" >&2; fail=1; }
if grep -q "goal" "$tmp/run1.log"; then echo "a dry run judged against the paper-budget goal" >&2; fail=1; fi
grep -q "^random .* 3 steps x 4 sequences" "$tmp/run1.log" || { echo "no line for the random arm" >&2; fail=1; }
before=$(stat -c %Y "$out/logo-genemask/metrics.jsonl")
bash "$repo/bench/paper_scale.sh" "$out" >"$tmp/run2.log" 2>&1 || { cat "$tmp/run2.log"; fail=1; }
[ "$(stat -c %Y "$out/logo-genemask/metrics.jsonl")" = "$before" ] || { echo "a second run trained a finished arm again" >&2; fail=1; }
# The DNABERT-size model beside it: the counts and shards kept, logo's JSON untouched.
shards_before=$(stat -c %Y "$out/shards/manifest.json")
json_before=$(stat -c %Y "$out/paper_scale.json")
PAPER_MODEL=dnabert PAPER_MASKINGS=random PAPER_STEPS=1 PAPER_BATCH=1 PAPER_ACCUM=1 \
  bash "$repo/bench/paper_scale.sh" "$out" >"$tmp/run3.log" 2>&1 || { cat "$tmp/run3.log"; fail=1; }
"$py" - "$out" <<'PY' || fail=1
import json, sys
out = sys.argv[1]
r = json.load(open(f"{out}/paper_scale-dnabert.json"))
assert r["model"] == "dnabert" and r["steps"] == 1 and r["sequences_per_step"] == 1 and r["paper_budget"] is False, r
assert [a["masking"] for a in r["arms"]] == ["random"] and r["arms"][0]["steps"] == 1, r["arms"]
assert r["arms"][0]["model_tflops"] > 0 and r["arms"][0]["model"] == "dnabert", r["arms"]
logo = json.load(open(f"{out}/paper_scale.json"))
assert logo["model"] == "logo" and {a["model"] for a in logo["arms"]} == {"logo"}, logo
print("paper_scale: the dnabert arm as asked")
PY
grep -q "^random  *dnabert 1 steps x 1 sequences" "$tmp/run3.log" || { echo "no line for the dnabert arm" >&2; fail=1; }
[ "$(stat -c %Y "$out/shards/manifest.json")" = "$shards_before" ] || { echo "the dnabert run cut the shards again" >&2; fail=1; }
[ "$(stat -c %Y "$out/paper_scale.json")" = "$json_before" ] || { echo "the dnabert run wrote logo's JSON" >&2; fail=1; }
if PAPER_MODEL=bert bash "$repo/bench/paper_scale.sh" "$tmp/bad" >"$tmp/bad.log" 2>&1; then
  echo "PAPER_MODEL=bert was accepted" >&2; fail=1
fi
grep -q "PAPER_MODEL must be logo or dnabert, got 'bert'" "$tmp/bad.log" || { echo "no reason for PAPER_MODEL=bert" >&2; fail=1; }
[ ! -e "$tmp/bad" ] || { echo "a refused run made its output directory" >&2; fail=1; }
if PAPER_STEPS=0 bash "$repo/bench/paper_scale.sh" "$tmp/bad" >"$tmp/bad.log" 2>&1; then
  echo "PAPER_STEPS=0 was accepted" >&2; fail=1
fi
grep -q "PAPER_STEPS must be a positive integer, got '0'" "$tmp/bad.log" || { echo "no reason for PAPER_STEPS=0" >&2; fail=1; }
[ ! -e "$tmp/bad" ] || { echo "a refused run made its output directory" >&2; fail=1; }
if PAPER_PROFILE_STEPS=x bash "$repo/bench/paper_scale.sh" "$tmp/bad" >"$tmp/bad.log" 2>&1; then
  echo "PAPER_PROFILE_STEPS=x was accepted" >&2; fail=1
fi
grep -q "PAPER_PROFILE_STEPS must be an integer >= 0, got 'x'" "$tmp/bad.log" || { echo "no reason for PAPER_PROFILE_STEPS=x" >&2; fail=1; }
[ ! -e "$tmp/bad" ] || { echo "a refused run made its output directory" >&2; fail=1; }
if PAPER_CUDA_GRAPHS=yes bash "$repo/bench/paper_scale.sh" "$tmp/bad" >"$tmp/bad.log" 2>&1; then
  echo "PAPER_CUDA_GRAPHS=yes was accepted" >&2; fail=1
fi
grep -q "PAPER_CUDA_GRAPHS must be auto, on or off, got 'yes'" "$tmp/bad.log" || { echo "no reason for PAPER_CUDA_GRAPHS=yes" >&2; fail=1; }
[ ! -e "$tmp/bad" ] || { echo "a refused run made its output directory" >&2; fail=1; }
# Results made with other settings are never served: another PAPER_STEPS for a finished arm,
# or another genome for the counts and shards, is refused and changes nothing.
json_before=$(sha256sum <"$out/paper_scale.json")
if PAPER_STEPS=4 bash "$repo/bench/paper_scale.sh" "$out" >"$tmp/bad.log" 2>&1; then
  echo "a finished 3-step arm was served for PAPER_STEPS=4" >&2; fail=1
fi
grep -q "paper_scale: $out/logo-genemask was made with other settings (model=logo masking=genemask steps=3 batch=2 accum=2 .*); these are model=logo masking=genemask steps=4 " "$tmp/bad.log" ||
  { echo "no reason for PAPER_STEPS=4" >&2; cat "$tmp/bad.log" >&2; fail=1; }
# Arms made under --cuda-graphs auto are not served for another setting.
if PAPER_CUDA_GRAPHS=off bash "$repo/bench/paper_scale.sh" "$out" >"$tmp/bad.log" 2>&1; then
  echo "a finished arm of --cuda-graphs auto was served for PAPER_CUDA_GRAPHS=off" >&2; fail=1
fi
grep -q "paper_scale: $out/logo-genemask was made with other settings (.*genome=[0-9a-f]*); these are .*genome=[0-9a-f]* cuda_graphs=off: name another OUTDIR" "$tmp/bad.log" ||
  { echo "no reason for PAPER_CUDA_GRAPHS=off" >&2; cat "$tmp/bad.log" >&2; fail=1; }
sed 's/ACGT/TTTT/; s/^A/C/' "$tmp/g.fa" >"$tmp/other.fa"
if PAPER_GENOME=$tmp/other.fa bash "$repo/bench/paper_scale.sh" "$out" >"$tmp/bad.log" 2>&1; then
  echo "another genome was served the first one's counts and shards" >&2; fail=1
fi
grep -q "paper_scale: $out holds the counts and shards of another genome (sha256 [0-9a-f]*); PAPER_GENOME '$tmp/other.fa' is [0-9a-f]*: name another OUTDIR" "$tmp/bad.log" ||
  { echo "no reason for another genome" >&2; cat "$tmp/bad.log" >&2; fail=1; }
# A second run in the same OUTDIR while one runs (holding its lock) is refused.
if flock -n "$out/.paper_scale.lock" bash "$repo/bench/paper_scale.sh" "$out" >"$tmp/bad.log" 2>&1; then
  echo "a second run in the same OUTDIR was let in" >&2; fail=1
fi
grep -q "another paper_scale.sh is running in $out" "$tmp/bad.log" || { echo "no reason for the second run" >&2; cat "$tmp/bad.log" >&2; fail=1; }
[ "$(sha256sum <"$out/paper_scale.json")" = "$json_before" ] || { echo "a refused run wrote paper_scale.json" >&2; fail=1; }
for f in "$out"/arms.*; do
  if [ -e "$f" ]; then echo "a temporary list of arms was left: $f" >&2; fail=1; fi
done
# An arm stopped after its checkpoint (its summary not yet written) is resumed, and says so.
rm "$out/logo-random.summary.json"
bash "$repo/bench/paper_scale.sh" "$out" >"$tmp/run4.log" 2>&1 || { cat "$tmp/run4.log"; fail=1; }
"$py" - "$out" <<'PY' || fail=1
import json, sys
arms = {a["masking"]: a for a in json.load(open(f"{sys.argv[1]}/paper_scale.json"))["arms"]}
assert arms["random"]["resumed"] is True and arms["genemask"]["resumed"] is False, arms
# Its part timed no step (the checkpoint was the last): the arm's steps are 3, its rates none.
assert arms["random"]["goal_met"] is None and arms["random"]["steps"] == 3, arms
assert arms["random"]["steps_timed"] == 0 and arms["random"]["tokens_per_s"] is None, arms
assert arms["genemask"]["steps_timed"] == 3 and arms["genemask"]["tokens_per_s"] > 0, arms
print("paper_scale: a resumed arm says so")
PY

# A genome that is one of the files the script writes in OUTDIR is refused, and left whole.
mkdir "$tmp/own"
for name in paper_scale.json logo-random.log logo-genemask.settings genome.sha256; do
  cp "$tmp/g.fa" "$tmp/own/$name"
  if PAPER_GENOME=$tmp/own/$name bash "$repo/bench/paper_scale.sh" "$tmp/own" >"$tmp/bad.log" 2>&1; then
    echo "PAPER_GENOME=OUTDIR/$name was accepted" >&2; fail=1
  fi
  grep -q "PAPER_GENOME '$tmp/own/$name' is $tmp/own/$name, which this script writes" "$tmp/bad.log" ||
    { echo "no reason for PAPER_GENOME=OUTDIR/$name" >&2; cat "$tmp/bad.log" >&2; fail=1; }
  cmp -s "$tmp/g.fa" "$tmp/own/$name" || { echo "PAPER_GENOME=OUTDIR/$name was written over" >&2; fail=1; }
  rm "$tmp/own/$name"
done
[ -z "$(ls -A "$tmp/own")" ] || { echo "a refused run left files: $(ls "$tmp/own")" >&2; fail=1; }
[ $fail = 0 ] && echo "paper_scale.sh: ok"
exit $fail
