#!/usr/bin/env bash
# The whole genemask pipeline from one config (see jobs/pipeline.conf.example):
#   count -> npmi (GRANK, Gene-PMI-VOC, motif table) -> shards -> pretrain per masking
#   strategy (+ export-hf)
#   -> promoter dataset -> few-shot sweep of the models -> report (baseline: random masking)
#
#   jobs/pipeline.sh CONFIG            submit the stages to Slurm, chained with
#                                      --dependency=afterok:, and print "stage job-id" lines
#   jobs/pipeline.sh --local CONFIG    run the same stage scripts here in order, without
#                                      Slurm (mpirun for the MPI stages; extra mpirun
#                                      options in $GENEMASK_MPIRUN_OPTS)
#   jobs/pipeline.sh --dry-run CONFIG  print the sbatch commands instead of submitting them
# The binary: $GENEMASK_BIN, else build/src/cli/genemask of this checkout.
set -euo pipefail
usage() { echo "usage: jobs/pipeline.sh [--local|--dry-run] CONFIG" >&2; exit 2; }
mode=slurm
case ${1:-} in
  --local) mode=local; shift ;;
  --dry-run) mode=dry; shift ;;
  -h | --help) sed -n '2,12p' "$0"; exit 0 ;;
esac
[ $# -eq 1 ] || usage
GENEMASK_JOBS_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export GENEMASK_JOBS_DIR
# shellcheck source=jobs/lib.sh
source "$GENEMASK_JOBS_DIR/lib.sh"
cfg=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
gm_load_config "$cfg"
GENEMASK_BIN=$(gm_bin)
export GENEMASK_BIN NPMI_OPTS PMI_VOCAB_OPTS
read -r -a maskings <<<"$MASKINGS"
read -r -a count_opts <<<"$COUNT_OPTS"
mkdir -p "$OUT/logs"
J=$GENEMASK_JOBS_DIR

if [ "$mode" = local ]; then
  stage() { # NAME RANKS SCRIPT ARGS...
    local name=$1 n=$2
    shift 2
    gm_log "== $name"
    GENEMASK_NTASKS=$n bash "$@" 2>&1 | tee "$OUT/logs/$name.log"
  }
  t0=$SECONDS
  stage count "$RANKS_COUNT" "$J/count.sbatch" "$GENOME" "$OUT/count" "${count_opts[@]}"
  stage npmi 1 "$J/npmi.sbatch" "$cfg"
  stage shards "$RANKS_SHARDS" "$J/shards.sbatch" "$cfg"
  for m in "${maskings[@]}"; do
    stage "pretrain-$m" "$RANKS_PRETRAIN" "$J/pretrain.sbatch" "$cfg" "$m"
  done
  stage dataset 1 "$J/dataset.sbatch" "$cfg"
  stage sweep "$RANKS_SWEEP" "$J/sweep.sbatch" "$cfg"
  stage report 1 "$J/report.sbatch" "$cfg"
  gm_log "pipeline done in $((SECONDS - t0)) s: $OUT/report/table1.md"
  exit 0
fi

read -r -a site <<<"$SBATCH_OPTS"
submit() { # NAME DEPENDENCIES SBATCH-OPTIONS... -- SCRIPT ARGS...; prints the job id
  local name=$1 deps=$2
  shift 2
  # Per-stage sbatch options: SBATCH_OPTS_COUNT, _NPMI, _SHARDS, _PRETRAIN, _DATASET, _SWEEP, _REPORT.
  local var=${name%%-*}
  var=SBATCH_OPTS_${var^^}
  local -a stage_opts=()
  read -r -a stage_opts <<<"${!var:-}"
  local -a cmd=(sbatch --parsable --job-name="genemask-$name" --output="$OUT/logs/$name-%j.out" "${site[@]}")
  [ -z "$deps" ] || cmd+=(--dependency="afterok:$deps" --kill-on-invalid-dep=yes)
  while [ "$1" != -- ]; do cmd+=("$1"); shift; done
  shift
  cmd+=("${stage_opts[@]}" "$@")
  if [ "$mode" = dry ]; then
    echo "${cmd[*]}" >&2
    echo "<$name>"
  else
    "${cmd[@]}" | cut -d';' -f1
  fi
}
gpu_opts=()
if [ "$GPUS_PER_NODE" -gt 0 ]; then
  gpu_opts=(--nodes=$(((RANKS_PRETRAIN + GPUS_PER_NODE - 1) / GPUS_PER_NODE))
    --ntasks-per-node="$GPUS_PER_NODE" --gpus-per-node="$GPUS_PER_NODE")
fi
count=$(submit count "" --ntasks="$RANKS_COUNT" -- "$J/count.sbatch" "$GENOME" "$OUT/count" "${count_opts[@]}")
echo "count $count"
npmi=$(submit npmi "$count" -- "$J/npmi.sbatch" "$cfg")
echo "npmi $npmi"
shards=$(submit shards "" --ntasks="$RANKS_SHARDS" -- "$J/shards.sbatch" "$cfg")
echo "shards $shards"
pre=()
for m in "${maskings[@]}"; do
  id=$(submit "pretrain-$m" "$npmi:$shards" --ntasks="$RANKS_PRETRAIN" "${gpu_opts[@]}" -- "$J/pretrain.sbatch" "$cfg" "$m")
  echo "pretrain-$m $id"
  pre+=("$id")
done
dataset=$(submit dataset "" -- "$J/dataset.sbatch" "$cfg")
echo "dataset $dataset"
sweep_gpu=()
if [ "$DEVICE" = cuda ] && [ "$GPUS_PER_NODE" -gt 0 ]; then sweep_gpu=(--gpus-per-node="$GPUS_PER_NODE"); fi
sweep=$(submit sweep "$(IFS=:; echo "${pre[*]}"):$dataset" --ntasks="$RANKS_SWEEP" "${sweep_gpu[@]}" -- "$J/sweep.sbatch" "$cfg")
echo "sweep $sweep"
report=$(submit report "$sweep" -- "$J/report.sbatch" "$cfg")
echo "report $report"
