#!/usr/bin/env bash
# End-to-end test of jobs/pipeline.sh --local on tiny generated data: a random 2-chromosome
# genome (~300 kb), a TSS BED with random positions, a tiny BERT config, 4 pretraining steps
# per masking strategy, a promoter task with 5 and 10 shots, 2 seeds. Checks every stage's
# outputs and that the report's table1.md names both models.
# The binary: $GENEMASK_BIN, else build/src/cli/genemask. Keeps the files with KEEP=1.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
py=${PYTHON:-/usr/bin/python3}
# A folder name with characters the scripts must take as written: a glob's brackets (a
# resume once looked for checkpoints by pattern), and sbatch's % (a pattern in --output).
tmp=$(mktemp -d "${TMPDIR:-/tmp}/genemask-pipeline [1] %u-XXXXXX")
if [ "${KEEP:-0}" != 1 ]; then trap 'rm -rf "$tmp"' EXIT; else echo "files kept in $tmp"; fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export GENEMASK_MPIRUN_OPTS=${GENEMASK_MPIRUN_OPTS:---oversubscribe}

# shellcheck source=tests/jobs/tiny_pipeline.sh
source "$repo/tests/jobs/tiny_pipeline.sh"
tiny_pipeline_inputs "$tmp" "$py"
# All three kinds of task (the Slurm test keeps the promoter task only).
cat >>"$tmp/pipeline.conf" <<'CONF'
TASKS="promoter splice-40 cohn-enh"
SPLICE_ANNOTATION=genes.gtf
ENHANCER_INTERVALS=enhancers
CONF

"$repo/jobs/pipeline.sh" --local "$tmp/pipeline.conf"

out=$tmp/out
fail=0
check() { if [ -s "$1" ]; then echo "ok: ${1#"$tmp"/}"; else echo "MISSING: ${1#"$tmp"/}" >&2; fail=1; fi; }
check "$out/count/counts.h5"
check "$out/count/npmi.tsv"
check "$out/count/pmi_vocab.tsv"
check "$out/count/motifs.md"
grep -q 'TATAAA' "$out/count/motifs.md" || { echo "motifs.md lacks the TATAAA motif" >&2; fail=1; }
check "$out/shards/manifest.json"
for m in genemask random; do
  check "$out/runs/$m/metrics.jsonl"
  [ -n "$(find "$out/runs/$m/checkpoints" -maxdepth 1 -name 'step-*')" ] || { echo "MISSING: checkpoints of $m" >&2; fail=1; }
  check "$out/models/$m/config.json"
  check "$out/models/$m/model.safetensors"
done
for t in promoter splice-40 cohn-enh; do
  check "$out/dataset/$t/summary.json"
  check "$out/dataset/$t/fewshot/5/train.tsv"
  check "$out/dataset/$t/fewshot/10/train.tsv"
done
grep -q '"2"' "$out/dataset/splice-40/summary.json" || { echo "splice-40: no non-splice class" >&2; fail=1; }
check "$out/sweep-plan.json"
check "$out/sweep/results.jsonl"
check "$out/report/table1.md"
# 2 models x 3 tasks x 2 shots x 2 seeds, all ok
n_ok=$(grep -c '"status": *"ok"' "$out/sweep/results.jsonl" || true)
if [ "$n_ok" != 24 ]; then echo "results.jsonl: $n_ok ok records, want 24" >&2; fail=1; fi
for name in tiny-genemask tiny-random promoter splice-40 cohn-enh; do
  grep -q -- "$name" "$out/report/table1.md" || { echo "table1.md does not name $name" >&2; fail=1; }
done
check "$out/report/improvement.md"
# A second run resumes: pretraining continues from the checkpoints, the sweep skips its jobs.
"$repo/jobs/pipeline.sh" --local "$tmp/pipeline.conf" >"$tmp/second.log" 2>&1 || { cat "$tmp/second.log"; fail=1; }
grep -q -- "--resume" "$out/logs/pretrain-genemask.log" || { echo "second run did not pass --resume" >&2; fail=1; }
# The local logs are appended to: the first run's log is still there, under its own header.
n_runs=$(grep -c '^== genemask jobs/pipeline.sh --local: stage pretrain-genemask, ' "$out/logs/pretrain-genemask.log" || true)
[ "$n_runs" = 2 ] || { echo "pretrain-genemask.log: $n_runs run headers, want 2 (the first run's log kept)" >&2; fail=1; }
n_ok2=$(grep -c '"status": *"ok"' "$out/sweep/results.jsonl" || true)
if [ "$n_ok2" != 24 ]; then echo "second run: $n_ok2 ok records, want 24 (finished jobs skipped)" >&2; fail=1; fi
# The files the scripts write themselves under OUT replace only their own: a user's
# sweep-plan.json is refused and kept (the rerun above rewrote the scripts' own in place).
cp "$out/sweep-plan.json" "$tmp/plan.keep"
echo '{"mine": 1}' >"$out/sweep-plan.json"
if "$repo/jobs/pipeline.sh" --local --from sweep "$tmp/pipeline.conf" >"$tmp/mine.log" 2>&1; then
  echo "a user's sweep-plan.json was replaced" >&2; fail=1
fi
grep -q "sweep-plan.json is not a file these scripts wrote" "$tmp/mine.log" || { cat "$tmp/mine.log"; echo "no message for a user's plan" >&2; fail=1; }
grep -q mine "$out/sweep-plan.json" || { echo "the user's sweep-plan.json was written over" >&2; fail=1; }
cp "$tmp/plan.keep" "$out/sweep-plan.json"
# A task without its input, or an unknown task, is refused before anything runs.
sed 's/^TASKS=.*/TASKS="promoter nonsense"/' "$tmp/pipeline.conf" >"$tmp/bad1.conf"
sed -e 's/^TASKS=.*/TASKS="cohn-enh"/' -e 's/^ENHANCER_INTERVALS=.*/ENHANCER_INTERVALS=/' "$tmp/pipeline.conf" >"$tmp/bad2.conf"
for b in bad1 bad2; do
  if "$repo/jobs/pipeline.sh" --dry-run "$tmp/$b.conf" >/dev/null 2>"$tmp/$b.err"; then echo "$b.conf was accepted" >&2; fail=1; fi
done
grep -q "unknown task 'nonsense'" "$tmp/bad1.err" || { echo "bad1: $(cat "$tmp/bad1.err")" >&2; fail=1; }
grep -q "task cohn-enh needs ENHANCER_INTERVALS" "$tmp/bad2.err" || { echo "bad2: $(cat "$tmp/bad2.err")" >&2; fail=1; }
# Slurm mode with a stand-in sbatch: 8 jobs, each dependent job after the ids it needs.
mkdir -p "$tmp/bin"
cat >"$tmp/bin/sbatch" <<'STUB'
#!/usr/bin/env bash
n=$(($(cat "$SBATCH_CALLS" 2>/dev/null | wc -l) + 101))
echo "$n $*" >>"$SBATCH_CALLS"
echo "$n;cluster"
STUB
chmod +x "$tmp/bin/sbatch"
ids=$(SBATCH_CALLS=$tmp/sbatch.calls PATH=$tmp/bin:$PATH "$repo/jobs/pipeline.sh" "$tmp/pipeline.conf")
want="count 101
npmi 102
shards 103
pretrain-genemask 104
pretrain-random 105
dataset 106
sweep 107
report 108"
if [ "$ids" != "$want" ]; then echo "pipeline.sh printed: $ids" >&2; fail=1; fi
grep -q '^102 .*--dependency=afterok:101 .*npmi.sbatch' "$tmp/sbatch.calls" || { echo "npmi dependency" >&2; fail=1; }
# OUT's own % reach sbatch --output doubled (%% is a literal %), the job's %j as it is.
grep -qF -- "--output=${out//%/%%}/logs/count-%j.out" "$tmp/sbatch.calls" || { echo "--output of OUT with a %" >&2; fail=1; }
grep -q '^104 .*--dependency=afterok:102:103 .*pretrain.sbatch .* genemask$' "$tmp/sbatch.calls" || { echo "pretrain dependency" >&2; fail=1; }
grep -q '^107 .*--dependency=afterok:104:105:106 .*sweep.sbatch' "$tmp/sbatch.calls" || { echo "sweep dependency" >&2; fail=1; }
grep -q '^108 .*--dependency=afterok:107 .*report.sbatch' "$tmp/sbatch.calls" || { echo "report dependency" >&2; fail=1; }
# The stages read a copy of the config as checked at submission: an edit of the user's file
# afterwards (the next experiment's STEPS) changes nothing of the chain already submitted.
snap=$(sed -n 's/^104 .*pretrain.sbatch \(.*\) genemask$/\1/p' "$tmp/sbatch.calls")
case $snap in "$out"/logs/config-*.conf) ;; *) echo "pretrain was given '$snap', not a copy in OUT/logs" >&2; fail=1 ;; esac
cp "$tmp/pipeline.conf" "$tmp/pipeline.conf.keep"
echo 'STEPS=999' >>"$tmp/pipeline.conf"
# shellcheck source=jobs/lib.sh
got=$(source "$repo/jobs/lib.sh" && gm_load_config "$snap" && echo "$STEPS $OUT")
want_steps=$(source "$repo/jobs/lib.sh" && gm_load_config "$tmp/pipeline.conf.keep" && echo "$STEPS $OUT")
[ "$got" = "$want_steps" ] || { echo "the copy reads '$got', the config as submitted '$want_steps'" >&2; fail=1; }
cp "$tmp/pipeline.conf.keep" "$tmp/pipeline.conf"
# sbatch refusing a stage (a typo in SBATCH_OPTS_REPORT): the stages submitted before it are
# cancelled and named, so that the next pipeline.sh does not run them twice.
cat >"$tmp/bin/scancel" <<'STUB'
#!/usr/bin/env bash
echo "$*" >>"$SCANCEL_CALLS"
STUB
chmod +x "$tmp/bin/scancel"
cp "$tmp/bin/sbatch" "$tmp/bin/sbatch.ok"
cat >"$tmp/bin/sbatch" <<'STUB'
#!/usr/bin/env bash
case " $* " in *" --tme=5 "*) echo "sbatch: unrecognized option '--tme=5'" >&2; exit 255 ;; esac
exec "$(dirname "$0")/sbatch.ok" "$@"
STUB
chmod +x "$tmp/bin/sbatch"
{ cat "$tmp/pipeline.conf"; echo 'SBATCH_OPTS_REPORT="--tme=5"'; } >"$tmp/refused.conf"
if SBATCH_CALLS=$tmp/sbatch3.calls SCANCEL_CALLS=$tmp/scancel.calls PATH=$tmp/bin:$PATH \
  "$repo/jobs/pipeline.sh" "$tmp/refused.conf" >"$tmp/refused.out" 2>"$tmp/refused.err"; then
  echo "pipeline.sh exited 0 with a refused stage" >&2; fail=1
fi
[ "$(cat "$tmp/scancel.calls" 2>/dev/null)" = "101 102 103 104 105 106 107" ] ||
  { echo "scancel: '$(cat "$tmp/scancel.calls" 2>/dev/null)'" >&2; fail=1; }
grep -q "sbatch refused stage report (above); cancelling the 7 stage job(s) submitted before it" "$tmp/refused.err" ||
  { echo "refused: $(cat "$tmp/refused.err")" >&2; fail=1; }
mv "$tmp/bin/sbatch.ok" "$tmp/bin/sbatch"
# --from pretrain: the earlier stages are not submitted and nothing waits for them.
ids=$(SBATCH_CALLS=$tmp/sbatch2.calls PATH=$tmp/bin:$PATH "$repo/jobs/pipeline.sh" --from pretrain "$tmp/pipeline.conf")
want="pretrain-genemask 101
pretrain-random 102
dataset 103
sweep 104
report 105"
if [ "$ids" != "$want" ]; then echo "pipeline.sh --from pretrain printed: $ids" >&2; fail=1; fi
if grep '^10[1-3] ' "$tmp/sbatch2.calls" | grep -q -- --dependency; then echo "--from pretrain: a dependency on a skipped stage" >&2; fail=1; fi
grep -q '^104 .*--dependency=afterok:101:102:103 .*sweep.sbatch' "$tmp/sbatch2.calls" || { echo "--from pretrain: sweep dependency" >&2; fail=1; }
if "$repo/jobs/pipeline.sh" --from nonsense "$tmp/pipeline.conf" 2>"$tmp/err.txt"; then echo "--from nonsense was accepted" >&2; fail=1; fi
grep -q 'not a stage' "$tmp/err.txt" || { echo "--from nonsense: no clear error" >&2; fail=1; }
# --local --from report: only the report is redone.
rm -rf "$out/report"
"$repo/jobs/pipeline.sh" --local --from report "$tmp/pipeline.conf" >"$tmp/third.log" 2>&1 || { cat "$tmp/third.log"; fail=1; }
check "$out/report/table1.md"
if grep -q '== count' "$tmp/third.log"; then echo "--from report ran the count stage" >&2; fail=1; fi
# A changed FINETUNE_JSON is refused by the sweep (its records are of other settings); the
# config's SWEEP_OPTS="--force" reruns the changed jobs, the old records kept aside.
sed 's/^FINETUNE_JSON=.*/FINETUNE_JSON='"'"'{"epochs": 1}'"'"'/' "$tmp/pipeline.conf" >"$tmp/changed.conf"
if "$repo/jobs/pipeline.sh" --local --from sweep "$tmp/changed.conf" >"$tmp/changed.log" 2>&1; then
  echo "a changed FINETUNE_JSON was mixed with the earlier records" >&2; fail=1
fi
grep -q "changed incompatibly" "$tmp/changed.log" || { cat "$tmp/changed.log"; echo "changed plan: no message" >&2; fail=1; }
echo 'SWEEP_OPTS="--force"' >>"$tmp/changed.conf"
"$repo/jobs/pipeline.sh" --local --from sweep "$tmp/changed.conf" >"$tmp/forced.log" 2>&1 || { cat "$tmp/forced.log"; fail=1; }
n_stale=$(grep -c '"status": *"ok"' "$out/sweep/results.stale.jsonl" || true)
n_ok3=$(grep -c '"epochs": *1[,}]' "$out/sweep/results.jsonl" || true)
if [ "$n_stale" != 24 ] || [ "$n_ok3" != 24 ]; then
  echo "SWEEP_OPTS=--force: $n_stale stale records, $n_ok3 with the new settings (want 24, 24)" >&2; fail=1
fi
# The report's baseline must be one of the pretrained models: refused before anything runs.
sed 's/^MASKINGS=.*/MASKINGS=genemask/' "$tmp/pipeline.conf" >"$tmp/nobase.conf"
if "$repo/jobs/pipeline.sh" --dry-run "$tmp/nobase.conf" >/dev/null 2>"$tmp/nobase.err"; then
  echo "a BASELINE_MASKING outside MASKINGS was accepted" >&2; fail=1
fi
grep -q "^config: BASELINE_MASKING: 'random' is not one of MASKINGS" "$tmp/nobase.err" || { echo "nobase: $(cat "$tmp/nobase.err")" >&2; fail=1; }
# Pretraining replicates (PRETRAIN_SEEDS, issue 33): each strategy pretrained once per seed,
# the sweep's models marked as replicates of their arm, and the report over replicates.
rep=$tmp/rep
mkdir -p "$rep"
cp -r "$out/count" "$out/shards" "$out/dataset" "$rep/"
sed -e "s|^OUT=.*|OUT=rep|" -e 's/^TASKS=.*/TASKS=promoter/' "$tmp/pipeline.conf" >"$tmp/rep.conf"
echo 'PRETRAIN_SEEDS="3 5"' >>"$tmp/rep.conf"
"$repo/jobs/pipeline.sh" --local --from pretrain "$tmp/rep.conf" >"$tmp/rep.log" 2>&1 || { cat "$tmp/rep.log"; fail=1; }
for m in genemask random; do
  for seed in 3 5; do
    check "$rep/models/$m-s$seed/model.safetensors"
    grep -q -- "--seed $seed" "$rep/logs/pretrain-$m-s$seed.log" || { echo "replicate $m-s$seed: no --seed $seed" >&2; fail=1; }
  done
done
"$py" - "$rep" <<'PYEOF' || fail=1
import csv, json, sys
rep = sys.argv[1]
plan = json.load(open(f"{rep}/sweep-plan.json"))
got = sorted((m["name"], m["arm"], m["replicate"]) for m in plan["models"])
want = sorted((f"tiny-{m}-s{s}", f"tiny-{m}", s) for m in ("genemask", "random") for s in (3, 5))
assert got == want, got
recs = [json.loads(l) for l in open(f"{rep}/sweep/results.jsonl")]
assert recs and all(r["arm"] in ("tiny-genemask", "tiny-random") and r["replicate"] in (3, 5) for r in recs), recs[0]
rows = list(csv.DictReader(open(f"{rep}/report/replicates.csv")))
arms = {r["arm"] for r in rows}
assert arms == {"tiny-genemask", "tiny-random"}, arms
for r in rows:
    assert r["replicate_ids"] == "3 5", r
    if r["arm"] == "tiny-genemask":
        assert r["baseline"] == "tiny-random" and r["test"] == "paired", r
print("replicates: plan, records and replicates.csv as expected")
PYEOF
# A seed that is not a non-negative integer is refused before anything runs.
sed 's/^PRETRAIN_SEEDS=.*/PRETRAIN_SEEDS="1 x"/' "$tmp/rep.conf" >"$tmp/bad3.conf"
if "$repo/jobs/pipeline.sh" --dry-run "$tmp/bad3.conf" >/dev/null 2>"$tmp/bad3.err"; then echo "bad3.conf was accepted" >&2; fail=1; fi
grep -q "PRETRAIN_SEEDS: 'x' is not an integer written plainly" "$tmp/bad3.err" || { echo "bad3: $(cat "$tmp/bad3.err")" >&2; fail=1; }
# "01" beside "1" pretrained the same replicate twice and broke the sweep's plan.json; shots
# and seeds likewise.
for bad in 'PRETRAIN_SEEDS="1 01"' 'SHOTS="05 10"' 'SEEDS=0'; do
  { grep -v '^PRETRAIN_SEEDS=' "$tmp/rep.conf"; echo "$bad"; } >"$tmp/bad4.conf"
  if "$repo/jobs/pipeline.sh" --dry-run "$tmp/bad4.conf" >/dev/null 2>"$tmp/bad4.err"; then echo "$bad was accepted" >&2; fail=1; fi
  grep -q "^config: ${bad%%=*}: " "$tmp/bad4.err" || { echo "$bad: $(cat "$tmp/bad4.err")" >&2; fail=1; }
done
# The other values the stages take, refused before anything is submitted (a typo failed hours
# later; GPUS_PER_NODE=four was a bash error, and the jobs went out without GPUs), each naming
# the variable; a task pattern is no pattern even where a file matches it.
touch "$tmp/promoter-file"
for bad in GPUS_PER_NODE=four 'RANKS_SWEEP=0' 'STEPS=1e4' DEVICE=gpu 'MASKINGS="genemask randm"' GENOME=nope.fa \
           MODEL=nope.json PRECISION=bf61 PROMOTER_WINDOW=core 'GENOME_WEIGHTS=temp:2' \
           "FINETUNE_JSON='{\"epochs\": 2,}'" 'TASKS="promoter-f*"'; do
  { grep -v "^${bad%%=*}=" "$tmp/pipeline.conf"; echo "$bad"; } >"$tmp/bad6.conf"
  if (cd "$tmp" && "$repo/jobs/pipeline.sh" --dry-run "$tmp/bad6.conf" >/dev/null 2>"$tmp/bad6.err"); then
    echo "$bad was accepted" >&2; fail=1
  fi
  grep -q "^config: .*${bad%%=*}" "$tmp/bad6.err" || { echo "$bad: $(cat "$tmp/bad6.err")" >&2; fail=1; }
done
grep -q "unknown task 'promoter-f\*'" "$tmp/bad6.err" || { echo "TASKS glob: $(cat "$tmp/bad6.err")" >&2; fail=1; }
# A command in the config that fails is named with its line (the scripts ended in silence).
# shellcheck disable=SC2016  # the config's own command substitution, written as it is
{ cat "$tmp/pipeline.conf"; echo 'OUT=$(false)/out'; } >"$tmp/cmdfail.conf"
if "$repo/jobs/pipeline.sh" --dry-run "$tmp/cmdfail.conf" >/dev/null 2>"$tmp/cmdfail.err"; then
  echo "a config whose command failed was accepted" >&2; fail=1
fi
grep -qF "config $tmp/cmdfail.conf: line $(wc -l <"$tmp/cmdfail.conf"): a command failed (exit status 1)" \
  "$tmp/cmdfail.err" || { echo "cmdfail: $(cat "$tmp/cmdfail.err")" >&2; fail=1; }
# A dry run writes nothing.
sed "s|^OUT=.*|OUT=dry-out|" "$tmp/pipeline.conf" >"$tmp/dry.conf"
"$repo/jobs/pipeline.sh" --dry-run "$tmp/dry.conf" >/dev/null 2>&1 || { echo "dry run failed" >&2; fail=1; }
[ ! -e "$tmp/dry-out" ] || { echo "a dry run made $(ls -R "$tmp/dry-out")" >&2; fail=1; }
# A sweep's progress (a requeue after a failure) counts the jobs that succeeded, not the records:
# a sweep whose jobs all fail alike adds failed records on every run and was requeued 5 times.
printf '%s\n' '{"status":"ok","job":"a"}' '{"status":"failed","job":"b","error":"x"}' '{"status": "ok","job":"c"}' \
  >"$tmp/records.jsonl"
# shellcheck source=jobs/lib.sh
got=$(source "$repo/jobs/lib.sh" && gm_ok_records "$tmp/records.jsonl" && gm_ok_records "$tmp/none.jsonl")
[ "$got" = $'2\n0' ] || { echo "gm_ok_records: '$got'" >&2; fail=1; }
# A config in a folder that is not there is named, never taken from another folder.
if "$repo/jobs/pipeline.sh" --dry-run "$tmp/no-such-dir/p.conf" >/dev/null 2>"$tmp/bad5.err"; then
  echo "a missing config was accepted" >&2; fail=1
fi
grep -qF "no config file $tmp/no-such-dir/p.conf" "$tmp/bad5.err" || { echo "bad5: $(cat "$tmp/bad5.err")" >&2; fail=1; }
# The binary is one absolute path for every stage: a bare name from PATH (mpirun alone would
# also have looked in the working folder), a relative path from here; neither an error.
mkdir -p "$tmp/binpath"
ln -sf "${GENEMASK_BIN:-$repo/build/src/cli/genemask}" "$tmp/binpath/gm-test"
# shellcheck source=jobs/lib.sh
got=$(source "$repo/jobs/lib.sh" && PATH=$tmp/binpath:$PATH GENEMASK_BIN=gm-test gm_bin)
[ "$got" = "$tmp/binpath/gm-test" ] || { echo "gm_bin, bare name: '$got'" >&2; fail=1; }
# shellcheck source=jobs/lib.sh
got=$(cd "$tmp" && source "$repo/jobs/lib.sh" && GENEMASK_BIN=binpath/gm-test gm_bin)
[ "$got" = "$tmp/binpath/gm-test" ] || { echo "gm_bin, relative path: '$got'" >&2; fail=1; }
for wrong in gm-not-on-path "$tmp/binpath/none" "$tmp/binpath"; do
  # shellcheck source=jobs/lib.sh
  if (source "$repo/jobs/lib.sh" && GENEMASK_BIN=$wrong gm_bin) >/dev/null 2>"$tmp/bin.err"; then
    echo "gm_bin accepted GENEMASK_BIN=$wrong" >&2; fail=1
  fi
  grep -q "genemask jobs: .*$(basename "$wrong")" "$tmp/bin.err" || { echo "gm_bin $wrong: $(cat "$tmp/bin.err")" >&2; fail=1; }
done
if GENEMASK_BIN=gm-not-on-path "$repo/jobs/pipeline.sh" --dry-run "$tmp/pipeline.conf" >/dev/null 2>"$tmp/bin.err"; then
  echo "pipeline.sh ran with a binary that is not there" >&2; fail=1
fi
# Many genomes (GENOMES, issue 32): the genome split in two files, listed with a genes file
# for one of them; count, shards and pretrain (GENOME_WEIGHTS) take the list.
many=$tmp/many
mkdir -p "$many"
"$py" - "$tmp" <<'PYEOF'
import sys
tmp = sys.argv[1]
text = open(f"{tmp}/genome.fa").read().split(">")[1:]
for i, rec in enumerate(text):
    open(f"{tmp}/part{i + 1}.fa", "w").write(">" + rec)
open(f"{tmp}/genes-first.gtf", "w").write("".join(
    f'chr1\ttest\tgene\t{a}\t{a + 3000}\t.\t+\t.\tgene_id "G{a}";\n' for a in range(5000, 150000, 20000)))
open(f"{tmp}/genomes.tsv", "w").write("name\tpath\tweight\tgenes\nfirst\tpart1.fa\t1\tgenes-first.gtf\nsecond\tpart2.fa\t3\n")
PYEOF
sed -e "s|^OUT=.*|OUT=many|" -e 's/^MASKINGS=.*/MASKINGS=random/' "$tmp/pipeline.conf" >"$tmp/many.conf"
printf 'GENOMES=genomes.tsv\nGENOME_WEIGHTS=list\n' >>"$tmp/many.conf"
(
  # shellcheck source=jobs/lib.sh
  source "$repo/jobs/lib.sh" && gm_load_config "$tmp/many.conf" &&
    GENEMASK_JOBS_DIR=$repo/jobs GENEMASK_NTASKS=2 bash "$repo/jobs/count.sbatch" --genomes "$GENOMES" "$many/count" --kmax 6 --quiet &&
    GENEMASK_JOBS_DIR=$repo/jobs GENEMASK_NTASKS=2 bash "$repo/jobs/shards.sbatch" "$tmp/many.conf" &&
    GENEMASK_JOBS_DIR=$repo/jobs GENEMASK_NTASKS=1 bash "$repo/jobs/pretrain.sbatch" "$tmp/many.conf" random
) >"$tmp/many.log" 2>&1 || { cat "$tmp/many.log"; fail=1; }
"$py" - "$many" <<'PYEOF' || fail=1
import json, sys
import h5py
many = sys.argv[1]
with h5py.File(f"{many}/count/counts.h5") as h:
    assert sorted(h["genomes"].keys()) == ["first", "second"], list(h["genomes"].keys())
    assert (h["counts/k6"][...] == h["genomes/first/counts/k6"][...] + h["genomes/second/counts/k6"][...]).all()
m = json.load(open(f"{many}/shards/manifest.json"))
assert [g["name"] for g in m["genomes"]] == ["first", "second"] and m["genomes"][0]["genes"], m["genomes"]
assert all(g["samples"]["train"] > 0 for g in m["genomes"])
lines = [json.loads(l) for l in open(f"{many}/runs/random/metrics.jsonl") if '"genome_tokens"' in l]
assert lines and all(set(l["genome_tokens"]) == {"first", "second"} for l in lines), lines[:1]
print("many genomes: counts per genome, shards labelled, pretrain logs tokens per genome")
PYEOF
grep -q -- "--genome-weights list" "$tmp/many.log" || { echo "pretrain did not get --genome-weights list" >&2; fail=1; }
# Sweep jobs that fail leave the tables short of them: the report stage, and so the pipeline,
# ends non-zero and says so (it printed "pipeline done" and exited 0 over a table1.md without
# the model under study). A copy of the run's outputs, its sweep and report removed.
cp -r "$out" "$tmp/out-fail"
rm -rf "$tmp/out-fail/sweep" "$tmp/out-fail/report"
sed "s|^OUT=.*|OUT=out-fail|" "$tmp/pipeline.conf" >"$tmp/fail.conf"
real_bin=$(cd "$tmp" && source "$repo/jobs/lib.sh" && gm_bin)
cat >"$tmp/gm-fail" <<WRAP
#!/usr/bin/env bash
# genemask, whose sweep fails every job of the genemask-masked model
if [ "\$1" = sweep ]; then exec "$real_bin" "\$@" --inject-failure '*genemask*:always'; fi
exec "$real_bin" "\$@"
WRAP
chmod +x "$tmp/gm-fail"
if GENEMASK_BIN=$tmp/gm-fail "$repo/jobs/pipeline.sh" --local --from sweep "$tmp/fail.conf" >"$tmp/fail.log" 2>&1; then
  echo "a pipeline whose sweep jobs failed ended 0" >&2; fail=1
fi
grep -q "report: sweep jobs failed and have no result in the tables" "$tmp/fail.log" || { cat "$tmp/fail.log" >&2; fail=1; }
if grep -q "pipeline done" "$tmp/fail.log"; then echo "a pipeline whose sweep jobs failed said done" >&2; fail=1; fi
[ -f "$tmp/out-fail/report/table1.md" ] || { echo "the report of the jobs that ran was not written" >&2; fail=1; }
# Every stage script and pipeline.sh answer --help with their usage (and run nothing).
for f in "$repo"/jobs/*.sbatch "$repo/jobs/pipeline.sh"; do
  "$f" --help >"$tmp/help.txt" 2>&1 || { echo "$f --help failed" >&2; fail=1; }
  grep -q 'Usage:\|usage:\|jobs/pipeline.sh CONFIG' "$tmp/help.txt" || { echo "$f --help: no usage" >&2; fail=1; }
done
if [ "$fail" != 0 ]; then cat "$tmp/sbatch.calls" >&2; echo "FAILED" >&2; exit 1; fi
echo "pipeline test passed"
