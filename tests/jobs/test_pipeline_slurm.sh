#!/usr/bin/env bash
# jobs/pipeline.sh on a real single-node Slurm: starts munged (when no munge daemon answers),
# slurmctld and slurmd with a minimal slurm.conf for this host in a temporary directory,
# submits the tiny pipeline with sbatch, waits, checks every job's final state and the
# outputs. Then the time limit's warning signal: jobs/pretrain.sbatch and jobs/sweep.sbatch
# submitted with --time=1 --signal=B:USR1@20 must be warned, stop, requeue themselves, resume
# and end COMPLETED (about 2.5 min more). Finally it stops the daemons it started. Needs root
# and the Debian packages slurm-wlm and munge (scripts/install-deps.sh). MPI stages use
# mpirun inside the allocations (GENEMASK_LAUNCHER=mpirun): Debian's srun --mpi=pmix does
# not start Debian's Open MPI.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
py=${PYTHON:-/usr/bin/python3}
if [ "$(id -u)" -ne 0 ]; then  # CI runs as root; ctest reports this case as skipped (77)
  echo "test_pipeline_slurm: needs root to start slurmctld/slurmd: not run" >&2
  exit 77
fi
for t in slurmctld slurmd munged sbatch squeue scontrol; do
  command -v "$t" >/dev/null || { echo "test_pipeline_slurm: $t not found: run scripts/install-deps.sh" >&2; exit 1; }
done
tmp=$(mktemp -d "${TMPDIR:-/tmp}/genemask-slurm-XXXXXX")
chmod 755 "$tmp"
started_munge=""
cleanup() {
  local pids=()
  # Jobs left by a failed check (the requeue phases run for a minute): cancel them first, so
  # that their processes do not outlive slurmd.
  if [ -n "${SLURM_CONF:-}" ] && [ -s "$tmp/slurmctld.pid" ]; then
    for _ in $(seq 10); do
      jobs_left=$(squeue -h -o %i 2>/dev/null || true)
      [ -z "$jobs_left" ] && break
      # shellcheck disable=SC2086  # job ids, one per line
      scancel $jobs_left 2>/dev/null || true
      sleep 1
    done
  fi
  for f in "$tmp/slurmd.pid" "$tmp/slurmctld.pid"; do
    if [ -s "$f" ]; then pids+=("$(cat "$f")"); fi
  done
  if [ -n "$started_munge" ]; then pids+=("$started_munge"); fi
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for _ in $(seq 50); do  # let them exit before their directories go
    alive=0
    for p in "${pids[@]}"; do if kill -0 "$p" 2>/dev/null; then alive=1; fi; done
    [ "$alive" = 0 ] && break
    sleep 0.2
  done
  if [ "${KEEP:-0}" != 1 ]; then rm -rf "$tmp"; else echo "files kept in $tmp"; fi
}
trap cleanup EXIT

# munge: reuse a running daemon, else start one with a fresh key.
if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
  mkdir -p /etc/munge /run/munge /var/lib/munge /var/log/munge
  [ -s /etc/munge/munge.key ] || dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 2>/dev/null
  chmod 400 /etc/munge/munge.key
  munged --force --pid-file="$tmp/munged.pid"
  started_munge=$(cat "$tmp/munged.pid")
fi

host=$(hostname -s)
cpus=$(nproc)
mem_mib=$(($(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 - 1024))
port=$((17000 + RANDOM % 2000))
mkdir -p "$tmp/state" "$tmp/spool" "$tmp/log"
cat >"$tmp/slurm.conf" <<CONF
ClusterName=genemasktest
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool
SlurmctldPidFile=$tmp/slurmctld.pid
SlurmdPidFile=$tmp/slurmd.pid
SlurmctldLogFile=$tmp/log/slurmctld.log
SlurmdLogFile=$tmp/log/slurmd.log
SlurmctldPort=$port
SlurmdPort=$((port + 1))
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
MinJobAge=3600
# A requeued job may start again only when its old job credential has expired (BeginTime =
# requeue + cred_expire + 1 s; the default 120 s would make the requeue phases slow), and an
# eligible pending job is started by the next pass of the main scheduler (every sched_interval
# s, default 60) or of the backfill scheduler (bf_interval, default 30; it skips passes when
# no job or node has changed).
AuthInfo=cred_expire=10
SchedulerParameters=sched_interval=5,bf_interval=5
NodeName=$host CPUs=$cpus RealMemory=$mem_mib State=UNKNOWN
PartitionName=test Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
CONF
export SLURM_CONF=$tmp/slurm.conf
slurmctld
slurmd
for _ in $(seq 60); do
  sinfo -h -o %T 2>/dev/null | grep -q idle && break
  sleep 1
done
sinfo -h -o %T | grep -q idle || { echo "slurm did not come up" >&2; cat "$tmp/log/"*.log >&2; exit 1; }

# shellcheck source=tests/jobs/tiny_pipeline.sh
source "$repo/tests/jobs/tiny_pipeline.sh"
tiny_pipeline_inputs "$tmp" "$py"
# The scripts' defaults ask for more than this node has (32G, 4 CPUs for pretraining): the
# config overrides them per stage, as a user on a small partition would.
echo 'SBATCH_OPTS_PRETRAIN="--cpus-per-task=1 --mem=2G"' >>"$tmp/pipeline.conf"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export GENEMASK_LAUNCHER=mpirun GENEMASK_MPIRUN_OPTS=--oversubscribe

ids=$("$repo/jobs/pipeline.sh" "$tmp/pipeline.conf")
echo "$ids"
[ "$(echo "$ids" | wc -l)" = 8 ] || { echo "expected 8 jobs" >&2; exit 1; }
deadline=$((SECONDS + ${SLURM_TEST_TIMEOUT_S:-300}))
while squeue -h | grep -q .; do
  if [ $SECONDS -gt $deadline ]; then echo "jobs still queued after the timeout:" >&2; squeue >&2; exit 1; fi
  sleep 2
done

fail=0
while read -r stage id; do
  state=$(scontrol show job -o "$id" | grep -o 'JobState=[A-Z_]*' | cut -d= -f2)
  code=$(scontrol show job -o "$id" | grep -o ' ExitCode=[0-9:]*' | cut -d= -f2)
  echo "$stage $id $state $code"
  if [ "$state" != COMPLETED ] || [ "$code" != 0:0 ]; then
    fail=1
    cat "$tmp/out/logs/$stage-$id.out" >&2 2>/dev/null || true
  fi
done <<<"$ids"
out=$tmp/out
for f in count/counts.h5 count/npmi.tsv count/motifs.md shards/manifest.json models/genemask/model.safetensors \
  models/random/model.safetensors dataset/promoter/fewshot/test.tsv sweep/results.jsonl report/table1.md; do
  [ -s "$out/$f" ] || { echo "MISSING: $f" >&2; fail=1; }
done
n_ok=$(grep -c '"status": *"ok"' "$out/sweep/results.jsonl" || true)
[ "$n_ok" = 8 ] || { echo "results.jsonl: $n_ok ok records, want 8" >&2; fail=1; }
grep -q '"ranks":2' "$out/logs/count-"*.out || { echo "count did not run on 2 MPI ranks" >&2; fail=1; }
if [ "$fail" != 0 ]; then echo "FAILED" >&2; exit 1; fi
echo "slurm pipeline test passed ($SECONDS s)"

# Phase 2: the time limit's warning signal, requeue and resume of jobs/pretrain.sbatch.
# --time=1 --signal=B:USR1@20: slurmctld checks time limits every 30 s and sends the warning
# at the first check that is at most warning + 30 s before the limit, i.e. 10-40 s after the
# start (with @50 it could come at once, before training has started). Pretraining is sized
# from a short calibration run to take about REQUEUE_TRAIN_S = 80 s, so it is still running
# then: twice the latest warning, for a margin over timing noise; the calibration takes the
# median steady-state step, as the first steps are slower than the rest (a 55 s target from
# the mean of 8 steps once gave a 37 s job under bf16, which ended before the warning).
# The first run writes a checkpoint, stops and requeues the job; while it is pending
# (Reason=BeginTime: requeued jobs wait for the credential lifetime, cred_expire above) the
# test raises the time limit, so that the second run is not warned again. The second run
# resumes from the checkpoint, finishes and exports the model.
t2=$SECONDS
# Slurm runs a copy of the script: it finds lib.sh through GENEMASK_JOBS_DIR (jobs/pipeline.sh
# exports it; ctest runs this test outside the checkout, so $SLURM_SUBMIT_DIR/jobs is no help).
export GENEMASK_JOBS_DIR=$repo/jobs
rq=$tmp/requeue
mkdir -p "$rq/out"
ln -s "$out/shards" "$rq/out/shards"
bin=${GENEMASK_BIN:-$repo/build/src/cli/genemask}
batch=8 accum=8
"$bin" pretrain --shards "$out/shards" --masking random --model "$tmp/tiny.json" --out "$rq/calib" --steps 24 \
  --warmup 1 --batch-per-rank "$batch" --grad-accum "$accum" --checkpoint-every 1000 --eval-every 0 --threads 1 \
  --log-every 1 >/dev/null 2>&1
steps=$("$py" - "$rq/calib/metrics.jsonl" "${REQUEUE_TRAIN_S:-80}" <<'PYEOF'
import json, math, sys
import statistics
t = [json.loads(l)["seconds"] for l in open(sys.argv[1]) if l.strip()]
# the steady state: the median step after the first four (allocator and cache warm-up)
per_step = statistics.median(b - a for a, b in zip(t[4:], t[5:]))
print(max(40, math.ceil(float(sys.argv[2]) / per_step)))
PYEOF
)
sed -e "s|^OUT=.*|OUT=$rq/out|" -e "s|^MODEL=.*|MODEL=$tmp/tiny.json|" -e "s|^STEPS=.*|STEPS=$steps|" \
  -e "s|^BATCH_PER_RANK=.*|BATCH_PER_RANK=$batch|" \
  -e "s|^GRAD_ACCUM=.*|GRAD_ACCUM=$accum|" -e "s|^CHECKPOINT_EVERY=.*|CHECKPOINT_EVERY=1000000|" \
  "$tmp/pipeline.conf" >"$rq/requeue.conf"
echo "requeue test: $steps pretraining steps (about ${REQUEUE_TRAIN_S:-80} s)"
log=$rq/pretrain.out
jid=$(sbatch --parsable --job-name=genemask-requeue --output="$log" --cpus-per-task=1 --mem=2G --time=1 \
  --signal=B:USR1@20 "$repo/jobs/pretrain.sbatch" "$rq/requeue.conf" random | cut -d';' -f1)
echo "submitted pretrain job $jid (--time=1 --signal=B:USR1@20)"
jobfield() { scontrol show job -o "$1" | grep -o " $2=[^ ]*" | cut -d= -f2; }
# wait_requeued JOB LOG: wait for JOB to end; once it is pending again after a requeue, raise
# its time limit, so that the second run is not warned again. (Not StartTime=now: a requeued
# job started before its BeginTime is killed by slurmd, "Job credential revoked", and FAILS.)
# Sets state and restarts.
wait_requeued() {
  local jid=$1 log=$2 t0=$SECONDS updated=0
  while true; do
    state=$(jobfield "$jid" JobState)
    restarts=$(jobfield "$jid" Restarts)
    case $state in COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY | PREEMPTED) break ;; esac
    if [ "$updated" = 0 ] && [ "$state" = PENDING ] && [ "${restarts:-0}" -ge 1 ]; then
      echo "job $jid requeued after $((SECONDS - t0)) s: Reason=$(jobfield "$jid" Reason)" \
        "EligibleTime=$(jobfield "$jid" EligibleTime) (now $(date +%FT%T))"
      scontrol update JobId="$jid" TimeLimit=10
      updated=1
    elif [ "$updated" = 1 ] && [ "$state" = RUNNING ]; then
      echo "job $jid running again after $((SECONDS - t0)) s"
      updated=2
    fi
    if [ $((SECONDS - t0)) -gt 240 ]; then
      echo "job $jid not done after 240 s:" >&2
      scontrol show job "$jid" >&2
      cat "$log" >&2
      exit 1
    fi
    sleep 1
  done
  echo "job $jid: $state, exit $(jobfield "$jid" ExitCode), restarts $restarts, $((SECONDS - t0)) s"
}
wait_requeued "$jid" "$log"
fail=0
sayfail() { echo "requeue: $*" >&2; fail=1; }
[ "$state" = COMPLETED ] || sayfail "final state $state, want COMPLETED"
[ "$(jobfield "$jid" ExitCode)" = 0:0 ] || sayfail "exit code $(jobfield "$jid" ExitCode), want 0:0"
[ "${restarts:-0}" -ge 1 ] || sayfail "Restarts=$restarts: the job was not requeued"
grep -q 'time limit near: sending SIGUSR1' "$log" || sayfail "no warning signal in the log"
grep -q "requeueing job $jid" "$log" || sayfail "the first run did not requeue the job"
grep -q 'resuming' "$log" || sayfail "the requeued run did not find the checkpoint"
grep -q -- '--resume' "$log" || sayfail "the requeued run did not pass --resume"
"$py" - "$log" "$rq/out/runs/random" "$steps" <<'PYEOF' || fail=1
import json, os, sys
log, run, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
runs = [j for j in (json.loads(l) for l in open(log) if l.startswith("{")) if j.get("command") == "pretrain"]
ok = True
def check(cond, msg):
    global ok
    if not cond:
        print("requeue:", msg, file=sys.stderr)
        ok = False
check(len(runs) == 2, f"{len(runs)} pretrain summaries in the log, want 2 (stopped + resumed)")
if len(runs) == 2:
    a, b = runs
    stop = a["steps_done"]
    print(f"first run: steps 0-{stop} of {steps}, interrupted={a['interrupted']}; "
          f"second run: start_step {b['start_step']}, steps_done {b['steps_done']}")
    check(a["interrupted"] and a["start_step"] == 0 and 0 < stop < steps, f"first run {a}")
    check(a["checkpoint"].endswith(f"step-{stop:08d}"), f"first run's checkpoint {a['checkpoint']}")
    check(not b["interrupted"] and b["start_step"] == stop and b["steps_done"] == steps, f"second run {b}")
    cks = sorted(os.listdir(os.path.join(run, "checkpoints")))
    check(cks == [".genemask-readers.lock", f"step-{stop:08d}", f"step-{steps:08d}"], f"checkpoints {cks}")
logged = [json.loads(l)["step"] for l in open(os.path.join(run, "metrics.jsonl")) if '"loss"' in l]
check(logged == list(range(1, steps + 1)), "metrics.jsonl: steps not 1..STEPS exactly once")
sys.exit(0 if ok else 1)
PYEOF
[ -s "$rq/out/models/random/model.safetensors" ] || sayfail "no exported model"
if [ "$fail" != 0 ]; then cat "$log" >&2; echo "FAILED" >&2; exit 1; fi
grep -E 'time limit near|requeueing|resuming' "$log" || true
echo "slurm pretrain requeue test passed ($((SECONDS - t2)) s)"

# Phase 3: the same for jobs/sweep.sbatch (USR1 to every sweep rank): the first run records what
# it has done and requeues; the requeued sweep skips those jobs; all records ok at the end.
# The sweep of the pipeline's two models is sized (seeds) to take about REQUEUE_TRAIN_S = 80 s.
t3=$SECONDS
sw=$tmp/sweep-requeue
mkdir -p "$sw/out/calib"
ln -s "$out/models" "$sw/out/models"
ln -s "$out/dataset" "$sw/out/dataset"
sed -e 's/"seeds": *[0-9]*/"seeds": 3/' -e 's/"epochs": *[0-9]*/"epochs": 20/' "$out/sweep-plan.json" \
  >"$sw/out/calib/plan.json"
mpirun -np 2 --oversubscribe "$bin" sweep --plan "$sw/out/calib/plan.json" --out "$sw/out/calib/sweep" \
  --progress-every 0 >"$sw/out/calib/summary.json" 2>/dev/null
seeds=$("$py" - "$sw/out/calib/summary.json" "${REQUEUE_TRAIN_S:-80}" <<'PYEOF'
import json, math, sys
s = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
per_seed = s["seconds"] / (s["jobs_total"] / 3)  # the 2 models x 2 shots of one seed
print(max(10, math.ceil(float(sys.argv[2]) / per_seed)))
PYEOF
)
sed -e "s|^OUT=.*|OUT=$sw/out|" -e "s|^MODEL=.*|MODEL=$tmp/tiny.json|" -e "s|^SEEDS=.*|SEEDS=$seeds|" \
  -e "s|^FINETUNE_JSON=.*|FINETUNE_JSON='{\"epochs\": 20}'|" "$tmp/pipeline.conf" >"$sw/sweep.conf"
total=$((seeds * 4))
log=$sw/sweep.out
jid=$(sbatch --parsable --job-name=genemask-sweep-requeue --output="$log" --ntasks=2 --mem-per-cpu=1G --time=1 \
  --signal=B:USR1@20 "$repo/jobs/sweep.sbatch" "$sw/sweep.conf" | cut -d';' -f1)
echo "submitted sweep job $jid: $total few-shot jobs (about ${REQUEUE_TRAIN_S:-80} s; --time=1 --signal=B:USR1@20)"
wait_requeued "$jid" "$log"
[ "$state" = COMPLETED ] || sayfail "sweep: final state $state, want COMPLETED"
[ "$(jobfield "$jid" ExitCode)" = 0:0 ] || sayfail "sweep: exit code $(jobfield "$jid" ExitCode), want 0:0"
[ "${restarts:-0}" -ge 1 ] || sayfail "sweep: Restarts=$restarts: the job was not requeued"
grep -q 'time limit near: sending SIGUSR1' "$log" || sayfail "sweep: no warning signal in the log"
grep -q "requeueing job $jid" "$log" || sayfail "sweep: the first run did not requeue the job"
"$py" - "$log" "$sw/out/sweep/results.jsonl" "$total" <<'PYEOF' || fail=1
import json, sys
log, results, total = sys.argv[1], sys.argv[2], int(sys.argv[3])
# (the summary can follow the last progress line of stderr on the same line)
runs = [j for j in (json.loads(l[l.index('{"'):]) for l in open(log) if '{"command":"sweep"' in l)]
ok = True
def check(cond, msg):
    global ok
    if not cond:
        print("sweep requeue:", msg, file=sys.stderr)
        ok = False
check(len(runs) == 2, f"{len(runs)} sweep summaries in the log, want 2 (stopped + requeued)")
if len(runs) == 2:
    a, b = runs
    print(f"first run: {a['ok']} of {a['jobs_total']} jobs ok, interrupted={a['interrupted']}; "
          f"second run: {b['jobs_skipped']} skipped, {b['ok']} ok, {b['remaining']} remaining")
    check(a["interrupted"] and 0 < a["ok"] < total, f"first run {a}")
    check(not b["interrupted"] and b["jobs_skipped"] == a["ok"] and b["ok"] == total - a["ok"]
          and b["failed"] == 0 and b["remaining"] == 0, f"second run {b}")
recs = [json.loads(l) for l in open(results) if l.strip()]
oks = [r["job"] for r in recs if r.get("status") == "ok"]
check(len(oks) == total and len(set(oks)) == total,
      f"results.jsonl: {len(oks)} ok records ({len(set(oks))} distinct), want {total}")
sys.exit(0 if ok else 1)
PYEOF
if [ "$fail" != 0 ]; then cat "$log" >&2; echo "FAILED" >&2; exit 1; fi
grep -E 'time limit near|requeueing' "$log" || true
echo "slurm sweep requeue test passed ($((SECONDS - t3)) s; $SECONDS s in all)"

# Phase 4: (a) a stage script submitted on its own from another folder, without
# GENEMASK_JOBS_DIR: Slurm runs a copy from its spool, and the script finds lib.sh beside the
# file submitted (it failed with "lib.sh: No such file or directory"); (b) a sweep whose jobs all
# fail alike (more shots than the task has) ends FAILED at once: a failed job's record is no
# progress (it was requeued 5 times).
t4=$SECONDS
elsewhere=$tmp/elsewhere
mkdir -p "$elsewhere"
log=$elsewhere/count.out
jid=$(cd "$elsewhere" && env -u GENEMASK_JOBS_DIR sbatch --parsable --wait --output="$log" --ntasks=1 --mem-per-cpu=1G --time=5 \
  "$repo/jobs/count.sbatch" "$tmp/genome.fa" "$elsewhere/count" --kmax 6 --quiet | cut -d';' -f1) || true
if [ "$(jobfield "$jid" JobState)" != COMPLETED ] || [ ! -s "$elsewhere/count/counts.h5" ]; then
  cat "$log" >&2
  sayfail "count.sbatch submitted from another folder: $(jobfield "$jid" JobState)"
fi
sed -e "s|^SHOTS=.*|SHOTS=200|" -e "s|^SEEDS=.*|SEEDS=1|" -e "s|^OUT=.*|OUT=$elsewhere/allfail|" "$sw/sweep.conf" \
  >"$elsewhere/allfail.conf"
mkdir -p "$elsewhere/allfail"
ln -s "$out/models" "$elsewhere/allfail/models"
ln -s "$out/dataset" "$elsewhere/allfail/dataset"
log=$elsewhere/allfail.out
# --open-mode=append keeps every run's lines: Slurm itself may requeue a job whose launch
# met a busy node (once in a loaded CI run, Restarts=1 with no word of the script's), which is
# no decision of the script's; the script must never requeue it.
jid=$(sbatch --parsable --output="$log" --open-mode=append --ntasks=2 --mem-per-cpu=1G --time=5 \
  "$repo/jobs/sweep.sbatch" "$elsewhere/allfail.conf" | cut -d';' -f1)
wait_requeued "$jid" "$log"
[ "$state" = FAILED ] || sayfail "all-failing sweep: $state, want FAILED"
if grep -q "requeueing job" "$log"; then sayfail "all-failing sweep requeued by the script: $(grep "requeueing job" "$log")"; fi
grep -q "progress 0 -> 0, requeues so far ${restarts:-0} of at most 5: not requeued" "$log" ||
  sayfail "all-failing sweep: $(tail -5 "$log")"
[ "${restarts:-0}" = 0 ] || echo "note: Slurm requeued job $jid itself ($restarts times; the script did not): $(cat "$log")"
if [ "$fail" != 0 ]; then echo "FAILED" >&2; exit 1; fi
echo "slurm stage-alone and all-failing sweep test passed ($((SECONDS - t4)) s; $SECONDS s in all)"
