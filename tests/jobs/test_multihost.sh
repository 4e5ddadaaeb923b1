#!/usr/bin/env bash
# Every MPI stage across hosts, on a test cluster of 3 hosts on this machine
# (tests/jobs/cluster.sh: network namespaces on a private bridge, node1..node3, a real Slurm
# with slurmctld on node1 and a slurmd per node, Open MPI over TCP on the test subnet only).
# Needs root (CI runs as root) and the Debian packages slurm-wlm and munge.
#
#  1. count and shards with sbatch -N 2 (2 ranks per node) and -N 3 (1 per node): outputs
#     byte-identical (h5diff, cmp) to one host's; the same for a 3-genome list on -N 3.
#  2. pretrain with -N 3 x 1 and -N 2 x 2 ranks: the loss curve of one host with the same
#     number of ranks, checkpoints written once, node-local ranks per host.
#  3. jobs/pipeline.sh (Slurm, not --local) end to end on the 3 nodes, every job COMPLETED;
#     its sweep's records equal a one-host sweep of the same plan, and so does the report.
#  4. Faults: a node killed mid-pretrain (the job requeues itself, resumes on the remaining
#     nodes and ends with the model of an uninterrupted run; checkpoints written before stay
#     intact); a node killed mid-sweep (no job lost or run twice; the requeued sweep runs only
#     what is missing); a slow link (count still identical); a cut link (every rank ends
#     within GENEMASK_MPI_TIMEOUT, no output under the final name); locks and temporaries
#     across hosts.
# Set KEEP=1 to keep the files. Prints the time of each phase (docs/benchmarks.md).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
py=${PYTHON:-/usr/bin/python3}
bin=${GENEMASK_BIN:-$repo/build/src/cli/genemask}
if [ "$(id -u)" -ne 0 ]; then  # CI runs as root; ctest reports this case as skipped (77)
  echo "test_multihost: needs root for network namespaces and slurmd: not run" >&2
  exit 77
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/genemask-multihost-XXXXXX")
chmod 755 "$tmp"
# shellcheck source=tests/jobs/cluster.sh
source "$repo/tests/jobs/cluster.sh"
# shellcheck source=tests/jobs/tiny_pipeline.sh
source "$repo/tests/jobs/tiny_pipeline.sh"
finish() {
  local rc=$?
  if [ "$rc" != 0 ] && [ -n "$CLUSTER_DIR" ]; then
    echo "== logs (failed with status $rc)" >&2
    tail -n 15 "$CLUSTER_DIR"/log/*.log >&2 2>/dev/null || true
  fi
  [ -z "${ref_pid:-}" ] || kill "$ref_pid" 2>/dev/null || true  # phase 4's reference run, if still going
  cluster_down
  if [ "${KEEP:-0}" = 1 ]; then echo "files kept in $tmp"; else rm -rf "$tmp"; fi
  return "$rc"
}
check() { "$py" "$repo/tests/jobs/mh_check.py" "$@"; }
t_phase=$SECONDS
phase() {
  echo "== $1 (previous phase: $((SECONDS - t_phase)) s; total $SECONDS s)"
  t_phase=$SECONDS
}

cluster_up "$tmp/cluster" 3
trap finish EXIT
on_node 1 sinfo -N
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export GENEMASK_LAUNCHER=mpirun GENEMASK_MPIRUN_OPTS=--oversubscribe GENEMASK_JOBS_DIR=$repo/jobs GENEMASK_BIN=$bin
# Open MPI on the cluster: TCP between hosts (shared memory within one), on the test subnet
# only. Given to the jobs through sbatch's environment (on_node), not to the one-host runs.
net=(env "OMPI_MCA_btl=tcp,vader,self" "OMPI_MCA_btl_tcp_if_include=$CLUSTER_SUBNET"
  "OMPI_MCA_oob_tcp_if_include=$CLUSTER_SUBNET")
# sub NAME SBATCH-OPTIONS... -- CMD...: sbatch on node1 of a job script that runs CMD (in
# $tmp, or --chdir), waiting for its end; prints the job id, or the job's output and fails.
# The job's output: $tmp/NAME.out.
sub() {
  local name=$1 opts=() id rc=0
  shift
  while [ "$1" != -- ]; do opts+=("$1"); shift; done
  shift
  { echo '#!/usr/bin/env bash'; echo 'set -euo pipefail'; printf '%q ' "$@"; echo; } >"$tmp/$name.sh"
  id=$(on_node 1 "${net[@]}" sbatch --parsable --wait --job-name="$name" --output="$tmp/$name.out" \
    --chdir="$tmp" "${opts[@]}" "$tmp/$name.sh") || rc=$?
  if [ "$rc" != 0 ]; then
    echo "job $name ($id) failed with status $rc:" >&2
    cat "$tmp/$name.out" >&2
    return 1
  fi
  echo "${id%%;*}"
}
ck() { printf "step-%08d" "$1"; }  # a checkpoint directory name
gm_lines() { if [ -f "$1" ]; then wc -l <"$1"; else echo 0; fi; }
jobfield() { on_node 1 scontrol show job -o "$1" | grep -o " $2=[^ ]*" | cut -d= -f2; }

tiny_pipeline_inputs "$tmp" "$py"
# run_in DIR CMD...: CMD in DIR (made first), so that outputs named relative to it give the
# same command line (which count and shards record) wherever DIR is.
run_in() { mkdir -p "$1" && (cd "$1" && shift && "$@"); }
count=("$bin" count --genome "$tmp/genome.fa" --out counts.h5 --kmax 8 --presence15 --quiet)
shards=("$bin" shards --genome "$tmp/genome.fa" --out shards --max-tokens 60 --min-tokens 20)
pre=("$bin" pretrain --shards "$tmp/one-2/shards" --masking random --model "$tmp/tiny.json" --out run --steps 6
  --warmup 1 --batch-per-rank 2 --grad-accum 1 --checkpoint-every 3 --eval-every 0 --threads 1 --log-every 1)

phase_1() {
phase "1. count and shards across hosts"
for n in 2 3 4; do  # one host, as many ranks as each cluster layout below
  run_in "$tmp/one-$n" mpiexec --oversubscribe -n "$n" "${count[@]}" >/dev/null
  run_in "$tmp/one-$n" mpiexec --oversubscribe -n "$n" "${shards[@]}" >/dev/null
done
for layout in "2 2" "3 1"; do
  read -r nodes ppn <<<"$layout"
  n=$((nodes * ppn)) d=$tmp/n$nodes
  mkdir -p "$d"
  sub "count-n$nodes" -N "$nodes" --ntasks-per-node="$ppn" --chdir="$d" -- mpirun "${count[@]}" >/dev/null
  sub "shards-n$nodes" -N "$nodes" --ntasks-per-node="$ppn" --chdir="$d" -- mpirun "${shards[@]}" >/dev/null
  grep -q "\"ranks\":$n" "$tmp/count-n$nodes.out" || { cat "$tmp/count-n$nodes.out"; exit 1; }
  cmp "$tmp/one-$n/counts.h5" "$d/counts.h5"
  [ "$(ls "$d/shards")" = "$(ls "$tmp/one-$n/shards")" ] || { echo "shard files differ" >&2; exit 1; }
  for f in "$tmp/one-$n"/shards/*; do cmp "$f" "$d/shards/$(basename "$f")"; done
  echo "count and shards on $nodes nodes x $ppn ranks: byte-identical to one host with $n ranks"
done
# A 3-genome corpus (a genome list: plain, bgzip, plain; issue 32) on 3 nodes x 1 rank:
# counts.h5 and the shard files byte-identical to one host's with 3 ranks.
"$py" - "$tmp" <<'PYEOF'
import subprocess, sys
tmp = sys.argv[1]
recs = open(f"{tmp}/genome.fa").read().split(">")[1:]
open(f"{tmp}/g1.fa", "w").write(">" + recs[0])
open(f"{tmp}/g2.fa", "w").write(">" + recs[1])
with open(f"{tmp}/g2.fa.bgz", "wb") as out:
    subprocess.run(["bgzip", "-c", f"{tmp}/g2.fa"], stdout=out, check=True)
open(f"{tmp}/g3.fa", "w").write(">other\n" + recs[0].split("\n", 1)[1][::-1].strip() + "\n")
open(f"{tmp}/genomes.tsv", "w").write("one\tg1.fa\ntwo\tg2.fa.bgz\nthree\tg3.fa\n")
PYEOF
count_g=("$bin" count --genomes "$tmp/genomes.tsv" --out counts.h5 --kmax 8 --quiet)
shards_g=("$bin" shards --genomes "$tmp/genomes.tsv" --out shards --max-tokens 60 --min-tokens 20)
run_in "$tmp/genomes-one" mpiexec --oversubscribe -n 3 "${count_g[@]}" >/dev/null
run_in "$tmp/genomes-one" mpiexec --oversubscribe -n 3 "${shards_g[@]}" >/dev/null
d=$tmp/genomes-n3
mkdir -p "$d"
sub count-genomes -N 3 --ntasks-per-node=1 --chdir="$d" -- mpirun "${count_g[@]}" >/dev/null
sub shards-genomes -N 3 --ntasks-per-node=1 --chdir="$d" -- mpirun "${shards_g[@]}" >/dev/null
cmp "$tmp/genomes-one/counts.h5" "$d/counts.h5"
[ "$(ls "$d/shards")" = "$(ls "$tmp/genomes-one/shards")" ] || { echo "genome-list shard files differ" >&2; exit 1; }
for f in "$tmp/genomes-one"/shards/*; do cmp "$f" "$d/shards/$(basename "$f")"; done
echo "a 3-genome list on 3 nodes x 1 rank: counts and shards byte-identical to one host with 3 ranks"
}

# The one-host shards (phase 1), made here when phase 1 did not run.
need_shards() {
  [ -f "$tmp/one-2/shards/manifest.json" ] || run_in "$tmp/one-2" mpiexec --oversubscribe -n 2 "${shards[@]}" >/dev/null
}

phase_2() {
phase "2. pretrain across hosts"
need_shards
for layout in "3 1" "2 2"; do
  read -r nodes ppn <<<"$layout"
  n=$((nodes * ppn))
  mkdir -p "$tmp/pre-n$nodes"
  run_in "$tmp/pre-one-$n" mpiexec --oversubscribe -n "$n" "${pre[@]}" >"$tmp/pre-one-$n.out" 2>&1
  sub "pre-n$nodes" -N "$nodes" --ntasks-per-node="$ppn" --chdir="$tmp/pre-n$nodes" -- mpirun "${pre[@]}" >/dev/null
  check curves "$tmp/pre-one-$n/run/metrics.jsonl" "$tmp/pre-n$nodes/run/metrics.jsonl" 1e-6
  check weights "$tmp/pre-one-$n/run/checkpoints/step-00000006/model.safetensors" \
    "$tmp/pre-n$nodes/run/checkpoints/step-00000006/model.safetensors" 1e-6
  check layout "$tmp/pre-n$nodes.out" "$n" "$ppn"
  check checkpoints "$tmp/pre-n$nodes/run"
  # Written once: one directory per checkpoint step, no temporaries or second copies (and the
  # lock that readers of the run share with its rotation).
  [ "$(ls -A "$tmp/pre-n$nodes/run/checkpoints")" = "$(printf '.genemask-readers.lock\nstep-00000003\nstep-00000006')" ] ||
    { ls -A "$tmp/pre-n$nodes/run/checkpoints" >&2; exit 1; }
done
}

phase_3() {
phase "3. jobs/pipeline.sh on the 3-node cluster"
# Every MPI stage spans the nodes: count, shards and the sweep on 3 nodes, pretraining on 2.
cat >>"$tmp/pipeline.conf" <<'CONF'
RANKS_COUNT=3
RANKS_SHARDS=3
RANKS_PRETRAIN=2
RANKS_SWEEP=3
SBATCH_OPTS_COUNT="--nodes=3"
SBATCH_OPTS_SHARDS="--nodes=3"
SBATCH_OPTS_PRETRAIN="--nodes=2 --cpus-per-task=1 --mem=2G"
SBATCH_OPTS_SWEEP="--nodes=3 --mem-per-cpu=1G"
CONF
ids=$(on_node 1 "${net[@]}" "$repo/jobs/pipeline.sh" "$tmp/pipeline.conf")
[ "$(echo "$ids" | wc -l)" = 8 ] || { echo "expected 8 jobs: $ids" >&2; exit 1; }
deadline=$((SECONDS + 300))
while on_node 1 squeue -h | grep -q .; do
  [ $SECONDS -lt $deadline ] || { echo "jobs still queued after 300 s:" >&2; on_node 1 squeue >&2; exit 1; }
  sleep 1
done
out=$tmp/out
while read -r stage id; do
  state=$(jobfield "$id" JobState) nodes=$(jobfield "$id" NodeList)
  echo "$stage $id $state on $nodes"
  if [ "$state" != COMPLETED ]; then cat "$out/logs/$stage-$id.out" >&2; exit 1; fi
  case $stage in count | shards | sweep) [ "$nodes" = "node[1-3]" ] || { echo "$stage ran on $nodes" >&2; exit 1; } ;; esac
done <<<"$ids"
# The sweep of the same plan on one host: the same records; the report from them: the same.
mpiexec --oversubscribe -n 3 "$bin" sweep --plan "$out/sweep-plan.json" --out "$tmp/sweep-one" >/dev/null 2>&1
check records "$out/sweep/results.jsonl" "$tmp/sweep-one/results.jsonl"
"$bin" report --results "$tmp/sweep-one/results.jsonl" --plan "$tmp/sweep-one/plan.json" --out "$tmp/report-one" \
  --baseline tiny-random --no-png >/dev/null
for f in table1.md table1.csv; do cmp "$out/report/$f" "$tmp/report-one/$f"; done
echo "pipeline: every job COMPLETED; sweep records and report identical to one host"
}

phase_4() {
phase "4. a node lost mid-pretrain"
need_shards
# jobs/pretrain.sbatch with 3 ranks on 2 or 3 nodes: the node of rank 2 dies after the first
# checkpoint; the job requeues itself and resumes on the nodes left.
local f=$tmp/f4 steps=400 every=100
mkdir -p "$f/out"
ln -s "$tmp/one-2/shards" "$f/out/shards"
sed -e "s|^OUT=.*|OUT=$f/out|" -e "s|^STEPS=.*|STEPS=$steps|" -e "s|^CHECKPOINT_EVERY=.*|CHECKPOINT_EVERY=$every|" \
  -e "s|^BATCH_PER_RANK=.*|BATCH_PER_RANK=4|" -e "s|^PRETRAIN_OPTS=.*|PRETRAIN_OPTS=\"--threads 1 --log-every 10 --keep-checkpoints 10\"|" \
  "$tmp/pipeline.conf" >"$tmp/f4.conf"
local id
id=$(on_node 1 "${net[@]}" sbatch --parsable --nodes=2-3 --ntasks=3 --cpus-per-task=1 --mem=2G \
  --output="$f/pretrain.out" "$repo/jobs/pretrain.sbatch" "$tmp/f4.conf" random | cut -d';' -f1)
# The same run on one host, uninterrupted, in the background while the job runs (not before
# watching the job: if the job outran it, the job could finish before the fault).
run_in "$f/one" mpiexec --oversubscribe -n 3 "$bin" pretrain --shards "$f/out/shards" --masking random \
  --model "$tmp/tiny.json" --out run --steps "$steps" --warmup 1 --batch-per-rank 4 --grad-accum 1 \
  --checkpoint-every "$every" --eval-every 0 --threads 1 --log-every 10 --keep-checkpoints 10 >"$f/one.out" 2>&1 &
ref_pid=$!  # (global: the exit trap stops it)
local run=$f/out/runs/random t0=$SECONDS
until [ -d "$run/checkpoints/$(ck "$every")" ]; do
  [ $((SECONDS - t0)) -lt 120 ] || { echo "no checkpoint after 120 s" >&2; cat "$f/pretrain.out" >&2; exit 1; }
  sleep 0.1
done
[ ! -d "$run/checkpoints/$(ck "$steps")" ] || { echo "training ended before the fault: make it longer" >&2; exit 1; }
local before
before=$(cd "$run/checkpoints" && sha256sum "$(ck "$every")"/*)
echo "checkpoint $every written; node3 dies now"
node_kill 3
local t_kill=$SECONDS state
# The job must not hang: it ends its first run and is pending or running again within 60 s.
until [ "$(jobfield "$id" Restarts)" -ge 1 ] 2>/dev/null; do
  state=$(jobfield "$id" JobState)
  case $state in COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY)
    echo "job $id ended $state instead of requeueing" >&2; cat "$f/pretrain.out" >&2; exit 1 ;; esac
  [ $((SECONDS - t_kill)) -lt 60 ] || { echo "job $id still $state 60 s after the node died" >&2; exit 1; }
  sleep 0.5
done
echo "job requeued $((SECONDS - t_kill)) s after the node died"
until state=$(jobfield "$id" JobState) && [ "$state" = COMPLETED ]; do
  case $state in FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY)
    echo "job $id ended $state" >&2; cat "$f/pretrain.out" >&2; exit 1 ;; esac
  [ $((SECONDS - t_kill)) -lt 180 ] || { echo "job $id still $state 180 s after the node died" >&2; exit 1; }
  sleep 0.5
done
echo "job COMPLETED on $(jobfield "$id" NodeList) $((SECONDS - t_kill)) s after the node died" \
  "($(jobfield "$id" Restarts) restart)"
grep -q "resuming" "$f/pretrain.out" || { echo "the requeued run did not resume" >&2; exit 1; }
wait "$ref_pid" || { echo "the one-host reference run failed" >&2; cat "$f/one.out" >&2; exit 1; }
ref_pid=
[ "$before" = "$(cd "$run/checkpoints" && sha256sum "$(ck "$every")"/*)" ] ||
  { echo "checkpoint $every changed after the fault" >&2; exit 1; }
check checkpoints "$run"
check curves "$f/one/run/metrics.jsonl" "$run/metrics.jsonl" 1e-6
check weights "$f/one/run/checkpoints/$(ck "$steps")/model.safetensors" \
  "$run/checkpoints/$(ck "$steps")/model.safetensors" 1e-6
[ -s "$f/out/models/random/model.safetensors" ] || { echo "no exported model" >&2; exit 1; }
node_start 3
wait_idle 3
}

# wait_state JOB STATE... : until JOB is in one of the states (60 s at most); prints it.
wait_state() {
  local id=$1 st t0=$SECONDS
  shift
  while true; do
    st=$(jobfield "$id" JobState)
    case " $* " in *" $st "*) echo "$st"; return 0 ;; esac
    [ $((SECONDS - t0)) -lt "${WAIT:-60}" ] || { echo "job $id still $st after ${WAIT:-60} s (waiting for $*)" >&2; return 1; }
    sleep 0.2
  done
}

# wait_started LOG: until the test hook says that a rank is held back.
wait_started() {
  local t0=$SECONDS
  until grep -q "pausing" "$1" 2>/dev/null; do
    [ $((SECONDS - t0)) -lt 60 ] || { echo "the job did not start" >&2; cat "$1" >&2; exit 1; }
    sleep 0.1
  done
}

# wait_idle N: until all N nodes are idle again (after a node came back).
wait_idle() {
  local t0=$SECONDS
  until [ "$(on_node 1 sinfo -h -N -o '%T' | grep -c '^idle$')" = "$1" ]; do
    [ $((SECONDS - t0)) -lt 60 ] || { on_node 1 sinfo -N >&2; exit 1; }
    sleep 0.5
  done
}

phase_5() {
phase "5. a node lost mid-sweep"
[ -d "$tmp/out/models" ] || phase_3
# jobs/sweep.sbatch on 3 nodes (manager on node1, a worker on node2 and node3) over the
# pipeline's models; node3 dies once some records are written.
local f=$tmp/f5 id n_before
mkdir -p "$f/out"
ln -s "$tmp/out/models" "$f/out/models"
ln -s "$tmp/out/dataset" "$f/out/dataset"
# 20 epochs: about a second per job, so that the sweep is still running when node3 dies.
sed -e "s|^OUT=.*|OUT=$f/out|" -e 's|^SEEDS=.*|SEEDS="1 2 3 4 5 6 7 8"|' \
  -e "s|^FINETUNE_JSON=.*|FINETUNE_JSON='{\"epochs\": 20}'|" "$tmp/pipeline.conf" >"$tmp/f5.conf"
grep -q '"epochs": 20' "$tmp/f5.conf"
id=$(on_node 1 "${net[@]}" sbatch --parsable --nodes=2-3 --ntasks=3 --ntasks-per-node=1 --mem-per-cpu=1G \
  --output="$f/sweep.out" "$repo/jobs/sweep.sbatch" "$tmp/f5.conf" | cut -d';' -f1)
local t0=$SECONDS
until [ "$(gm_lines "$f/out/sweep/results.jsonl")" -ge 3 ]; do
  [ $((SECONDS - t0)) -lt 120 ] || { echo "no sweep records after 120 s" >&2; cat "$f/sweep.out" >&2; exit 1; }
  sleep 0.1
done
node_kill 3
echo "$(gm_lines "$f/out/sweep/results.jsonl") records written; node3 died"
# The sweep's first run ends and the job requeues itself (progress: records were written).
local t_kill=$SECONDS
until [ "$(jobfield "$id" Restarts)" -ge 1 ] 2>/dev/null; do
  case $(jobfield "$id" JobState) in COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL)
    echo "job $id ended $(jobfield "$id" JobState) instead of requeueing" >&2; cat "$f/sweep.out" >&2; exit 1 ;; esac
  [ $((SECONDS - t_kill)) -lt 60 ] || { echo "job $id not requeued 60 s after the node died" >&2; exit 1; }
  sleep 0.2
done
n_before=$(gm_lines "$f/out/sweep/results.jsonl")
echo "requeued $((SECONDS - t_kill)) s after the node died, with $n_before records"
node_start 3
wait_idle 3
[ "$(WAIT=180 wait_state "$id" COMPLETED FAILED CANCELLED NODE_FAIL)" = COMPLETED ] ||
  { cat "$f/sweep.out" >&2; exit 1; }
check summary "$f/sweep.out" jobs_skipped "$n_before"
mpiexec --oversubscribe -n 3 "$bin" sweep --plan "$f/out/sweep-plan.json" --out "$f/one" >/dev/null 2>&1
check records "$f/out/sweep/results.jsonl" "$f/one/results.jsonl"
}

phase_6() {
phase "6. a slow link and a cut link during count"
[ -f "$tmp/one-3/counts.h5" ] || run_in "$tmp/one-3" mpiexec --oversubscribe -n 3 "${count[@]}" >/dev/null
local d=$tmp/f6 t0 id st
mkdir -p "$d/slow" "$d/cut"
# (Without the 15-mer set: its 128 MiB per rank would take minutes at this rate.)
local small=("$bin" count --genome "$tmp/genome.fa" --out counts.h5 --kmax 8 --quiet)
run_in "$d/slow-one" mpiexec --oversubscribe -n 3 "${small[@]}" >/dev/null
link_slow 3 8mbit
t0=$SECONDS
sub count-slow -N 3 --ntasks-per-node=1 --chdir="$d/slow" -- mpirun "${small[@]}" >/dev/null
link_fast 3
cmp "$d/slow-one/counts.h5" "$d/slow/counts.h5"
echo "count over an 8 Mbit/s link to node3: identical to one host, $((SECONDS - t0)) s"
# A rank that hangs (rank 2 on node3 held back 60 s before its first reduction): ranks 0
# and 1 give up after GENEMASK_MPI_TIMEOUT with a message that says so, and the launcher ends
# the job.
id=$(on_node 1 "${net[@]}" GENEMASK_MPI_TIMEOUT=10 GENEMASK_TEST_COLLECTIVE_DELAY=2:MPI_Reduce:60 \
  sbatch --parsable -N 3 --ntasks=3 --ntasks-per-node=1 --output="$d/hang.out" "$repo/jobs/count.sbatch" "$tmp/genome.fa" \
  "$d/hang" --kmax 8 --quiet | cut -d';' -f1)
wait_started "$d/hang.out"
t0=$SECONDS
st=$(wait_state "$id" COMPLETED FAILED CANCELLED NODE_FAIL TIMEOUT)
echo "count with a hung rank: $st after $((SECONDS - t0)) s"
[ "$st" = FAILED ] || { cat "$d/hang.out" >&2; exit 1; }
grep -q "rank 0 of 3 on host node1 waited 1[0-9] s in MPI_Reduce without an answer from the other ranks.*GENEMASK_MPI_TIMEOUT=10" \
  "$d/hang.out" || { echo "no timeout message:" >&2; cat "$d/hang.out" >&2; exit 1; }
[ $((SECONDS - t0)) -le 30 ] || { echo "the job took more than 30 s to end" >&2; exit 1; }
[ ! -e "$d/hang/counts.h5" ] || { echo "counts.h5 written although count failed" >&2; exit 1; }
# The link to node3 goes down while rank 2 is held back: TCP alone would notice after many
# minutes; mpirun's keepalive (jobs/lib.sh's default 30 s + 3 x 10 s, here 3 s + 2 x 2 s)
# notices the lost node, and GENEMASK_MPI_TIMEOUT stays as the last resort.
id=$(on_node 1 "${net[@]}" GENEMASK_MPI_TIMEOUT=30 GENEMASK_TEST_COLLECTIVE_DELAY=2:MPI_Reduce:5 \
  OMPI_MCA_oob_tcp_keepalive_time=3 OMPI_MCA_oob_tcp_keepalive_intvl=2 OMPI_MCA_oob_tcp_keepalive_probes=2 \
  sbatch --parsable --no-requeue -N 3 --ntasks=3 --ntasks-per-node=1 --output="$d/cut.out" "$repo/jobs/count.sbatch" \
  "$tmp/genome.fa" "$d/cut" --kmax 8 --quiet | cut -d';' -f1)
wait_started "$d/cut.out"
link_down 3
t0=$SECONDS
# The batch script ends (COMPLETING: Slurm still waits for node3 to clean up, until it
# declares the node DOWN after SlurmdTimeout).
st=$(wait_state "$id" COMPLETING COMPLETED FAILED CANCELLED NODE_FAIL TIMEOUT)
local took=$((SECONDS - t0))
echo "count with node3's link cut: the job script ended ($st) $took s after the cut"
[ "$took" -le 20 ] || { echo "the job took more than 20 s to end after the cut" >&2; exit 1; }
link_up 3
st=$(wait_state "$id" COMPLETED FAILED CANCELLED NODE_FAIL TIMEOUT)
case $st in FAILED | NODE_FAIL) ;; *) cat "$d/cut.out" >&2; exit 1 ;; esac
grep -q "ORTE has lost communication with a remote daemon" "$d/cut.out" ||
  { echo "no message about the lost node:" >&2; cat "$d/cut.out" >&2; exit 1; }
[ ! -e "$d/cut/counts.h5" ] || { echo "counts.h5 written although count failed" >&2; exit 1; }
wait_idle 3
}

phase_7() {
phase "7. locks and temporaries across hosts"
need_shards
local d=$tmp/f7 holder rc=0 msg
mkdir -p "$d"
local run=("$bin" pretrain --shards "$tmp/one-2/shards" --masking random --model "$tmp/tiny.json" --out "$d/run"
  --steps 100000 --warmup 1 --batch-per-rank 2 --checkpoint-every 5 --eval-every 0 --threads 1 --log-every 1000)
on_node 1 "${run[@]}" >"$d/holder.out" 2>&1 &
local t0=$SECONDS
until [ -d "$d/run/checkpoints/$(ck 5)" ]; do
  [ $((SECONDS - t0)) -lt 60 ] || { cat "$d/holder.out" >&2; exit 1; }
  sleep 0.1
done
# The holder: the genemask process on node1 (no pid namespaces: pids are the machine's).
holder=$(pgrep -f -n -- "--out $d/run ")
[ "$(nsenter -t "$holder" --uts hostname)" = node1 ] || { echo "holder $holder is not on node1" >&2; exit 1; }
# A second run on the same --out from node2: refused, naming node1 and the holder's pid.
msg=$(on_node 2 "${run[@]}" 2>&1) || rc=$?
if [ "$rc" = 0 ] || ! grep -q "in use by another.*host node1, pid $holder" <<<"$msg"; then
  echo "second run on node2 was not refused as it should be (status $rc): $msg" >&2
  exit 1
fi
echo "refused on node2: $(grep -o 'is in use.*' <<<"$msg")"
# The holder dies without a word: its lock dies with it, and node2 continues the run.
kill -9 "$holder"
wait 2>/dev/null || true
local last
last=$(find "$d/run/checkpoints" -maxdepth 1 -name 'step-*' -printf '%f\n' | sort | tail -n 1)
last=$((10#${last#step-}))
on_node 2 "${run[@]}" --resume --stop-after $((last + 1)) >"$d/resume.out" 2>&1 ||
  { echo "node2 could not take over after the holder on node1 died:" >&2; cat "$d/resume.out" >&2; exit 1; }
echo "node2 took over the run of the dead holder on node1 (resumed at step $last)"
# A temporary of a count killed on node3 while it finished: another host names it and leaves
# it (it cannot tell whether node3's process still runs); node3's next run removes it.
mkdir -p "$d/c"
(cd "$d/c" && on_node 3 env GENEMASK_TEST_HOLD_TEMP=60 "${count[@]}" >"$d/hold.out" 2>&1) &
local hold=$!
t0=$SECONDS
until grep -q "holding" "$d/hold.out" 2>/dev/null; do
  [ $((SECONDS - t0)) -lt 60 ] || { cat "$d/hold.out" >&2; exit 1; }
  sleep 0.1
done
local tmpfile
tmpfile=$(grep -o 'holding .*' "$d/hold.out" | cut -d' ' -f2)
node_kill 3
wait "$hold" 2>/dev/null || true
[ -f "$d/c/$tmpfile" ] || [ -f "$tmpfile" ] || { echo "no temporary left: $tmpfile" >&2; exit 1; }
msg=$(cd "$d/c" && on_node 1 "${count[@]}" 2>&1 >/dev/null)
grep -q "note: .*counts.h5.tmp.node3.[0-9]* is an unfinished output of process [0-9]* on host node3; it was left alone" \
  <<<"$msg" || { echo "node1 did not name node3's temporary: $msg" >&2; exit 1; }
ls "$d/c"/counts.h5.tmp.node3.* >/dev/null
node_start 3
wait_idle 3
msg=$(cd "$d/c" && on_node 3 "${count[@]}" 2>&1 >/dev/null)
grep -q "removed .*counts.h5.tmp.node3.[0-9]*, an unfinished output of process" <<<"$msg" ||
  { echo "node3 did not remove its own stale temporary: $msg" >&2; exit 1; }
! ls "$d/c"/counts.h5.tmp.* >/dev/null 2>&1 || { echo "a temporary is left" >&2; exit 1; }
echo "node3's temporary named on node1, removed by node3's next run"
}

# MULTIHOST_PHASES: the phases to run (all by default).
for p in ${MULTIHOST_PHASES:-1 2 3 4 5 6 7}; do "phase_$p"; done
phase "done"
echo "multi-host test passed in $SECONDS s"
