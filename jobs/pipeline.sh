#!/usr/bin/env bash
# The whole genemask pipeline from one config (see jobs/pipeline.conf.example):
#   count -> npmi (GRANK, Gene-PMI-VOC, motif table) -> shards -> pretrain per masking
#   strategy (+ export-hf; with PRETRAIN_SEEDS, once per seed: the strategy's replicates) ->
#   task datasets (TASKS) -> few-shot sweep of the models -> report (baseline: random
#   masking; with replicates, also the arms compared over their replicates)
#
#   jobs/pipeline.sh CONFIG            submit the stages to Slurm, chained with
#                                      --dependency=afterok:, and print "stage job-id" lines
#   jobs/pipeline.sh --local CONFIG    run the same stage scripts here in order, without
#                                      Slurm (mpirun for the MPI stages; extra mpirun
#                                      options in $GENEMASK_MPIRUN_OPTS)
#   jobs/pipeline.sh --dry-run CONFIG  print the sbatch commands instead of submitting them
#   --from STAGE                       (with any of the above) start at STAGE, taking the
#                                      earlier stages' outputs as they are in OUT: count,
#                                      npmi, shards, pretrain, dataset, sweep or report
# The binary: $GENEMASK_BIN, else build/src/cli/genemask of this checkout. The stages read a
# copy of CONFIG as it was checked here (OUT/logs/config-TIME.conf, every path absolute), so
# that editing CONFIG for the next experiment changes nothing of a chain already submitted.
set -euo pipefail
unset CDPATH  # cd DIR must not go to a folder of that name on CDPATH
usage() { echo "usage: jobs/pipeline.sh [--local|--dry-run] [--from STAGE] CONFIG" >&2; exit 2; }
mode=slurm
from=count
stages=(count npmi shards pretrain dataset sweep report)
while [ $# -gt 0 ]; do
  case $1 in
    --local) mode=local; shift ;;
    --dry-run) mode=dry; shift ;;
    --from)
      [ $# -ge 2 ] || usage
      from=$2
      shift 2
      case " ${stages[*]} " in *" $from "*) ;; *)
        echo "jobs/pipeline.sh: --from $from: not a stage (${stages[*]})" >&2; exit 2 ;; esac ;;
    -h | --help) sed -n '2,19p' "$0"; exit 0 ;;
    -*) usage ;;
    *) break ;;
  esac
done
[ $# -eq 1 ] || usage
GENEMASK_JOBS_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export GENEMASK_JOBS_DIR
# shellcheck source=jobs/lib.sh
source "$GENEMASK_JOBS_DIR/lib.sh"
[ -f "$1" ] || { echo "jobs/pipeline.sh: no config file $1" >&2; exit 2; }
cfg=$(cd "$(dirname -- "$1")" && pwd)/$(basename -- "$1")
gm_load_config "$cfg"
gm_check_tasks
gm_check_inputs
gm_check_baseline
GENEMASK_BIN=$(gm_bin)
export GENEMASK_BIN
read -r -a count_opts <<<"$COUNT_OPTS"
count_input=("$GENOME")
[ -z "$GENOMES" ] || count_input=(--genomes "$GENOMES")
mapfile -t units < <(gm_pretrain_units)
J=$GENEMASK_JOBS_DIR
if [ "$mode" != dry ]; then  # a dry run writes nothing
  mkdir -p "$OUT/logs"
  # The config as checked now, for every stage: not the user's file, which they may edit for
  # the next experiment while this chain waits in the queue.
  snapshot=$OUT/logs/config-$(date -u +%Y%m%dT%H%M%SZ)-$$.conf
  gm_save_config "$snapshot"
  cfg=$snapshot
fi

# wanted STAGE: true when STAGE is at or after --from.
wanted() {
  local s
  for s in "${stages[@]}"; do
    [ "$s" = "$from" ] && return 0
    [ "$s" = "$1" ] && return 1
  done
  return 1
}

if [ "$mode" = local ]; then
  stage() { # NAME RANKS SCRIPT ARGS...
    local name=$1 n=$2
    shift 2
    wanted "${name%%-*}" || return 0
    gm_log "== $name"
    # Appended, each run under its own header: a rerun (--from) keeps the earlier run's log,
    # and a file of that name that is not the pipeline's loses nothing.
    printf '== genemask jobs/pipeline.sh --local: stage %s, %s\n' "$name" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
      >>"$OUT/logs/$name.log"
    GENEMASK_NTASKS=$n bash "$@" 2>&1 | tee -a "$OUT/logs/$name.log"
  }
  t0=$SECONDS
  stage count "$RANKS_COUNT" "$J/count.sbatch" "${count_input[@]}" "$OUT/count" "${count_opts[@]}"
  stage npmi 1 "$J/npmi.sbatch" "$cfg"
  stage shards "$RANKS_SHARDS" "$J/shards.sbatch" "$cfg"
  for u in "${units[@]}"; do
    stage "pretrain-$(gm_run_name "$u")" "$RANKS_PRETRAIN" "$J/pretrain.sbatch" "$cfg" "$u"
  done
  stage dataset 1 "$J/dataset.sbatch" "$cfg"
  stage sweep "$RANKS_SWEEP" "$J/sweep.sbatch" "$cfg"
  stage report 1 "$J/report.sbatch" "$cfg"
  gm_log "pipeline done in $((SECONDS - t0)) s: $OUT/report/table1.md"
  exit 0
fi

read -r -a site <<<"$SBATCH_OPTS"
# sbatch --output reads % as a pattern (%j, %u, ...) and a backslash as "no patterns": OUT's
# own % are doubled, and a backslash in OUT is refused (every stage would share one log).
case $OUT in *\\*)
  echo "jobs/pipeline.sh: OUT=$OUT holds a backslash, which sbatch --output cannot take in a path; use another OUT" >&2
  exit 2 ;;
esac
log_pattern=${OUT//%/%%}/logs
# submit NAME DEPENDENCIES SBATCH-OPTIONS... -- SCRIPT ARGS...: prints the job id, or nothing
# for a stage before --from. DEPENDENCIES: job ids joined by ':' (empty ones are dropped).
submit() {
  local name=$1 deps
  deps=$(tr -s ':' <<<"$2" | sed 's/^://; s/:$//')
  shift 2
  wanted "${name%%-*}" || return 0
  # Per-stage sbatch options: SBATCH_OPTS_COUNT, _NPMI, _SHARDS, _PRETRAIN, _DATASET, _SWEEP, _REPORT.
  local var=${name%%-*}
  var=SBATCH_OPTS_${var^^}
  local -a stage_opts=()
  read -r -a stage_opts <<<"${!var:-}"
  local -a cmd=(sbatch --parsable --job-name="genemask-$name" --output="$log_pattern/$name-%j.out" "${site[@]}")
  [ -z "$deps" ] || cmd+=(--dependency="afterok:$deps" --kill-on-invalid-dep=yes)
  while [ "$1" != -- ]; do cmd+=("$1"); shift; done
  shift
  cmd+=("${stage_opts[@]}" "$@")
  if [ "$mode" = dry ]; then
    printf '%q ' "${cmd[@]}" >&2  # as a shell reads it back: paths with spaces stay whole
    echo >&2
    echo "<$name>"
  else
    "${cmd[@]}" | cut -d';' -f1
  fi
}
# say NAME ID: the "stage job-id" line, for submitted stages only.
submitted=()
say() {
  [ -z "$2" ] || { echo "$1 $2"; submitted+=("$2"); }
}
# refused NAME: sbatch refused stage NAME (its message is above). The stages submitted before it
# would run as a chain without it, and a second pipeline.sh would run them all again: they are
# cancelled (scancel), and the line says which.
refused() {
  if [ "${#submitted[@]}" -gt 0 ]; then
    echo "jobs/pipeline.sh: sbatch refused stage $1 (above); cancelling the ${#submitted[@]} stage job(s) submitted" \
      "before it (${submitted[*]}): correct the config or SBATCH_OPTS_* and run jobs/pipeline.sh again" >&2
    scancel "${submitted[@]}" || echo "jobs/pipeline.sh: scancel failed: cancel jobs ${submitted[*]} yourself" >&2
  else
    echo "jobs/pipeline.sh: sbatch refused stage $1 (above); nothing was submitted" >&2
  fi
  exit 1
}
gpu_opts=()
if [ "$GPUS_PER_NODE" -gt 0 ]; then
  gpu_opts=(--nodes=$(((RANKS_PRETRAIN + GPUS_PER_NODE - 1) / GPUS_PER_NODE))
    --ntasks-per-node="$GPUS_PER_NODE" --gpus-per-node="$GPUS_PER_NODE")
fi
count=$(submit count "" --ntasks="$RANKS_COUNT" -- "$J/count.sbatch" "${count_input[@]}" "$OUT/count" \
  "${count_opts[@]}") || refused count
say count "$count"
npmi=$(submit npmi "$count" -- "$J/npmi.sbatch" "$cfg") || refused npmi
say npmi "$npmi"
shards=$(submit shards "" --ntasks="$RANKS_SHARDS" -- "$J/shards.sbatch" "$cfg") || refused shards
say shards "$shards"
pre=()
for u in "${units[@]}"; do
  name=pretrain-$(gm_run_name "$u")
  id=$(submit "$name" "$npmi:$shards" --ntasks="$RANKS_PRETRAIN" "${gpu_opts[@]}" -- "$J/pretrain.sbatch" "$cfg" \
    "$u") || refused "$name"
  say "$name" "$id"
  pre+=("$id")
done
dataset=$(submit dataset "" -- "$J/dataset.sbatch" "$cfg") || refused dataset
say dataset "$dataset"
sweep_gpu=()
if [ "$DEVICE" = cuda ] && [ "$GPUS_PER_NODE" -gt 0 ]; then sweep_gpu=(--gpus-per-node="$GPUS_PER_NODE"); fi
sweep=$(submit sweep "$(IFS=:; echo "${pre[*]}"):$dataset" --ntasks="$RANKS_SWEEP" "${sweep_gpu[@]}" -- \
  "$J/sweep.sbatch" "$cfg") || refused sweep
say sweep "$sweep"
report=$(submit report "$sweep" -- "$J/report.sbatch" "$cfg") || refused report
say report "$report"
