#!/usr/bin/env bash
# Shared helpers of the genemask job scripts (sourced, not run).
#
# Slurm runs a copy of a batch script from its spool directory, so the scripts find this file
# through GENEMASK_JOBS_DIR (jobs/pipeline.sh exports it), else next to the script, else
# $SLURM_SUBMIT_DIR/jobs.
#
#   gm_bin                 the genemask binary's absolute path: $GENEMASK_BIN (a path, or a
#                          bare name looked up on PATH), else build/src/cli/genemask of this
#                          checkout, else PREFIX/bin/genemask when these scripts are installed
#                          (PREFIX/share/genemask/jobs), else `genemask` on PATH; an error
#                          when that is not an executable file
#   gm_launch N CMD...     run CMD on N ranks: `srun` inside a Slurm allocation; without srun
#                          `mpirun -np $SLURM_NTASKS` (N outside Slurm); the plain command when
#                          N is 1 and there is no allocation. Extra mpirun options:
#                          $GENEMASK_MPIRUN_OPTS (word-split, e.g. "--oversubscribe").
#                          GENEMASK_LAUNCHER=mpirun uses mpirun inside allocations too (for
#                          sites whose srun lacks a PMI that their Open MPI speaks).
#   gm_run_requeueable N SIGNAL CMD...
#                          gm_launch in the background; Slurm's warning signal (USR1, sent to
#                          the batch shell by `#SBATCH --signal=B:USR1@...`) is forwarded to
#                          CMD as SIGNAL (USR1 or USR2, which mpirun passes on to every
#                          rank), and after CMD exits the job is requeued with
#                          `scontrol requeue` (needs `#SBATCH --requeue`) and the script
#                          exits (outside Slurm: exit status 3). Scripts should run
#                          `trap 'GM_WARNED=1' USR1` first: a warning before the command
#                          starts then requeues without starting it (instead of killing the
#                          shell), and one after it has finished is logged and ignored.
#                          A command that fails (a node died, a link failed, GENEMASK_MPI_TIMEOUT)
#                          after it has made progress is requeued too, so that it continues
#                          on the nodes Slurm gives it next: progress is measured by the
#                          command in the array GM_PROGRESS (prints a number; the scripts use
#                          gm_checkpoint_step RUN and gm_ok_records FILE), before and after.
#                          At most GENEMASK_MAX_REQUEUES (default 5) such requeues per job; a
#                          failure without progress (a bad input, a deterministic error) ends
#                          the job FAILED as before.
#   gm_put FILE            stdin written whole as FILE (a file under OUT the scripts write
#                          themselves): through a private temporary, renamed when complete;
#                          a FILE already there is replaced only if these scripts wrote it
#                          (its SHA-256 is the last one OUT/.genemask-jobs.sha256 records) or
#                          it holds the same bytes, else it is the user's: refused, kept
#   gm_check_tasks         check the config's TASKS and their inputs
#   gm_check_inputs        check that the config's GENOME (or GENOMES) and MODEL file exist
#   gm_check_baseline      check that BASELINE_MASKING is one of MASKINGS
#   gm_load_config FILE    source a pipeline config (jobs/pipeline.conf.example), fill in
#                          the defaults of everything it leaves out and check the values
#   gm_save_config FILE    the loaded config, every value resolved (absolute paths), as a
#                          config file: what pipeline.sh submits, so that an edit of the
#                          user's file after submission changes nothing of the chain

unset CDPATH  # `cd DIR && pwd` must give DIR, not a folder of the same name elsewhere
gm_repo=$(cd "${GENEMASK_JOBS_DIR:-$(dirname "${BASH_SOURCE[0]}")}/.." && pwd)

gm_bin() {
  local b p
  if [ -n "${GENEMASK_BIN:-}" ]; then
    b=$GENEMASK_BIN
  elif [ -x "$gm_repo/build/src/cli/genemask" ]; then
    b=$gm_repo/build/src/cli/genemask
  elif [ -x "$gm_repo/../../bin/genemask" ]; then
    b=$gm_repo/../../bin/genemask
  else
    b=genemask
  fi
  # One absolute path for every stage: a bare name is looked up on PATH (mpirun would also
  # look in the working folder, the shell would not), a relative path from here.
  case $b in
    */*) ;;
    *)
      p=$(type -P -- "$b") || {
        echo "genemask jobs: '$b' is not a command on PATH: set GENEMASK_BIN to the genemask binary's path" \
          "(or build this checkout with scripts/build.sh)" >&2
        return 1
      }
      b=$p ;;
  esac
  if [ ! -f "$b" ] || [ ! -x "$b" ]; then
    echo "genemask jobs: GENEMASK_BIN=$b is not an executable file" >&2
    return 1
  fi
  printf '%s/%s\n' "$(cd "$(dirname -- "$b")" && pwd)" "$(basename -- "$b")"
}

gm_log() { printf '[%s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }

gm_put() {
  local file=$1 record=$OUT/.genemask-jobs.sha256 staged sum name old
  name=${file#"$OUT"/}
  if [ -e "$file" ] && [ ! -f "$file" ]; then  # a directory (or a device) where the file goes: the user's
    echo "genemask jobs: $file is not a regular file (a directory?): not a file these scripts wrote; move it" \
      "away and run again" >&2
    return 1
  fi
  staged=$(mktemp "$file.XXXXXX") || return 1
  if ! cat >"$staged"; then rm -f "$staged"; return 1; fi
  sum=$(sha256sum <"$staged" | cut -d' ' -f1)
  if [ -e "$file" ] && ! cmp -s "$staged" "$file"; then
    old=$(sha256sum <"$file" | cut -d' ' -f1)
    if [ "$(awk -F'\t' -v n="$name" '$2 == n { s = $1 } END { print s }' "$record" 2>/dev/null)" != "$old" ]; then
      rm -f "$staged"
      echo "genemask jobs: $file is not a file these scripts wrote (or was changed since): not replaced; move it" \
        "away (or remove it, if it is an earlier pipeline's) and run again" >&2
      return 1
    fi
  fi
  chmod "$(printf '%o' $((0666 & ~$(umask))))" "$staged"  # mktemp makes 0600
  mv -f "$staged" "$file"
  printf '%s\t%s\n' "$sum" "$name" >>"$record"
}

# gm_launch_cmd N CMD...: the launch command line of gm_launch, into the array GM_CMD.
gm_launch_cmd() {
  local n=$1
  shift
  local -a opts=()
  if [ -n "${SLURM_JOB_ID:-}" ] && [ "${GENEMASK_LAUNCHER:-srun}" = srun ] && command -v srun >/dev/null; then
    # srun does not take the job's --cpus-per-task on every Slurm version (22.05 to 23.02 do
    # not): without it each rank may be bound to one CPU and run its threads there.
    GM_CMD=(srun -n "${SLURM_NTASKS:-$n}" ${SLURM_CPUS_PER_TASK:+"--cpus-per-task=$SLURM_CPUS_PER_TASK"} "$@")
  elif [ -n "${SLURM_JOB_ID:-}" ] || [ "$n" -gt 1 ]; then
    read -r -a opts <<<"${GENEMASK_MPIRUN_OPTS:-}"
    # A node whose link fails silently: mpirun's daemons notice it by TCP keepalive after
    # 30 s + 3 x 10 s (Open MPI's default: 300 s + 9 x 20 s) and end the job.
    export OMPI_MCA_oob_tcp_keepalive_time=${OMPI_MCA_oob_tcp_keepalive_time:-30}
    export OMPI_MCA_oob_tcp_keepalive_intvl=${OMPI_MCA_oob_tcp_keepalive_intvl:-10}
    export OMPI_MCA_oob_tcp_keepalive_probes=${OMPI_MCA_oob_tcp_keepalive_probes:-3}
    GM_CMD=(mpirun -np "${SLURM_NTASKS:-$n}" "${opts[@]}" "$@")
  else
    GM_CMD=("$@")
  fi
}

gm_launch() {
  gm_launch_cmd "$@"
  gm_log "${GM_CMD[*]}"
  "${GM_CMD[@]}"
}

# _gm_pass_signal SIG PID: send SIG to the command started by gm_run_requeueable. Use USR1 or
# USR2: mpirun passes those on to every rank, while on SIGTERM it kills the ranks itself
# (SIGKILL after odls_base_sigkill_timeout = 1 s), too soon for a clean stop.
_gm_pass_signal() {
  gm_log "time limit near: sending SIG$1"
  kill -s "$1" "$2" 2>/dev/null || true
}

# gm_checkpoint_step RUN: the step of RUN's newest checkpoint directory (0 without one).
gm_checkpoint_step() {
  local d best=0 step
  for d in "$1"/checkpoints/step-*; do
    step=${d##*/step-}
    case $step in '' | *[!0-9]*) continue ;; esac
    step=$((10#$step))
    [ "$step" -gt "$best" ] && best=$step
  done
  echo "$best"
}

# gm_ok_records FILE: the records of a sweep's results.jsonl whose job succeeded (0 when it
# does not exist). A failed job's record is no progress: a sweep whose jobs all fail the same
# way adds such records on every run, and was requeued for them.
gm_ok_records() {
  if [ -f "$1" ]; then grep -c '"status": *"ok"' "$1" || true; else echo 0; fi
}

gm_run_requeueable() {
  local n=$1 sig=$2
  shift 2
  local pid rc=0 before=0 after=0
  if [ "${GM_PROGRESS[*]+set}" = set ]; then before=$("${GM_PROGRESS[@]}"); fi
  # A warning that came before this point (the scripts trap USR1 as their first command and
  # set GM_WARNED=1) or while the command is being started is remembered, not fatal: bash's
  # default action for USR1 would kill the batch shell and with it the job (no requeue).
  GM_WARNED=${GM_WARNED:-0}
  trap 'GM_WARNED=1' USR1
  if [ "$GM_WARNED" = 1 ]; then
    gm_log "time limit near before the command started: not starting it"
  else
    gm_launch_cmd "$n" "$@"
    gm_log "${GM_CMD[*]}"
    "${GM_CMD[@]}" &
    pid=$!
    # The warning signal: pass it on and remember to requeue once the command has stopped.
    trap 'GM_WARNED=1; _gm_pass_signal "$sig" "$pid"' USR1
    if [ "$GM_WARNED" = 1 ]; then _gm_pass_signal "$sig" "$pid"; fi
    while true; do
      rc=0
      wait "$pid" || rc=$?
      # wait returns > 128 when the trap interrupted it while the command still runs.
      if kill -0 "$pid" 2>/dev/null; then continue; fi
      break
    done
  fi
  # Too late to stop: what follows (export-hf) is short and runs to the end.
  trap 'gm_log "time limit near: the command has finished; carrying on"' USR1
  if [ "$GM_WARNED" = 1 ]; then
    # Stopped early: the rest of the script (e.g. exporting the model) must not run now.
    gm_log "stopped by the warning signal (exit status $rc)"
    if [ -n "${SLURM_JOB_ID:-}" ]; then
      gm_log "requeueing job $SLURM_JOB_ID (restarts so far: ${SLURM_RESTART_COUNT:-0}; it continues where it stopped)"
      # The requeue ends this run (Slurm signals what is left of it); the job goes back to
      # PENDING with the same id, script and arguments. Exit at once either way.
      scontrol requeue "$SLURM_JOB_ID" || { gm_log "scontrol requeue failed (is the job --requeue?)"; exit 1; }
      exit 0
    fi
    gm_log "run the stage again to continue"
    exit 3
  fi
  if [ "$rc" != 0 ] && [ "${GM_PROGRESS[*]+set}" = set ] && [ -n "${SLURM_JOB_ID:-}" ]; then
    after=$("${GM_PROGRESS[@]}")
    local restarts=${SLURM_RESTART_COUNT:-0} most=${GENEMASK_MAX_REQUEUES:-5}
    if [ "$after" -gt "$before" ] && [ "$restarts" -lt "$most" ]; then
      # A node or link failed (or a rank hung: GENEMASK_MPI_TIMEOUT) after real progress:
      # go on from there instead of losing the allocation's remaining work.
      gm_log "the command failed (exit status $rc) after progress ($before -> $after): requeueing job" \
        "$SLURM_JOB_ID to continue from there (requeue $((restarts + 1)) of at most $most, GENEMASK_MAX_REQUEUES)"
      scontrol requeue "$SLURM_JOB_ID" || { gm_log "scontrol requeue failed (is the job --requeue?)"; exit "$rc"; }
      exit 0
    fi
    gm_log "the command failed (exit status $rc); progress $before -> $after, requeues so far $restarts of" \
      "at most $most: not requeued"
  fi
  return "$rc"
}

# The variables of a config (gm_load_config fills in their defaults, gm_save_config writes them).
GM_CONFIG_VARS=(GENOME OUT GENES GENOMES GENOME_WEIGHTS TSS MODEL MODEL_LABEL MASKINGS PRETRAIN_SEEDS
  BASELINE_MASKING STEPS WARMUP BATCH_PER_RANK GRAD_ACCUM CHECKPOINT_EVERY EVAL_EVERY DEVICE PRECISION
  GPUS_PER_NODE RANKS_COUNT RANKS_SHARDS RANKS_PRETRAIN RANKS_SWEEP PROMOTER_WINDOW TASKS SPLICE_ANNOTATION
  ENHANCER_INTERVALS SHOTS SEEDS THREADS_PER_WORKER RANKS_PER_GPU FINETUNE_JSON COUNT_OPTS NPMI_OPTS
  PMI_VOCAB_OPTS MOTIFS SHARDS_OPTS PRETRAIN_OPTS DATASET_OPTS SWEEP_OPTS REPORT_OPTS SBATCH_OPTS)

gm_load_config() {
  local cfg=${1:?config file}
  [ -f "$cfg" ] || { echo "genemask jobs: no config file $cfg" >&2; return 2; }
  # A command in the config that fails (OUT=$(ws_find space)/out on an expired workspace)
  # ends the script (set -e) with this line, not in silence.
  trap 'echo "config $cfg: line $LINENO: a command failed (exit status $?)" >&2' ERR
  # shellcheck source=jobs/pipeline.conf.example
  source "$cfg"
  trap - ERR
  : "${GENOME:?config: GENOME (genome FASTA) is not set}"
  : "${OUT:?config: OUT (output root) is not set}"
  GENES=${GENES:-}
  GENOMES=${GENOMES:-}
  GENOME_WEIGHTS=${GENOME_WEIGHTS:-}
  TSS=${TSS:-}
  MODEL=${MODEL:-logo}
  MODEL_LABEL=${MODEL_LABEL:-$(basename -- "${MODEL%.json}")}
  MASKINGS=${MASKINGS:-genemask random}
  PRETRAIN_SEEDS=${PRETRAIN_SEEDS:-}
  BASELINE_MASKING=${BASELINE_MASKING:-random}
  STEPS=${STEPS:-10000}
  WARMUP=${WARMUP:-500}
  BATCH_PER_RANK=${BATCH_PER_RANK:-10}
  GRAD_ACCUM=${GRAD_ACCUM:-25}
  CHECKPOINT_EVERY=${CHECKPOINT_EVERY:-1000}
  EVAL_EVERY=${EVAL_EVERY:-500}
  DEVICE=${DEVICE:-cpu}
  PRECISION=${PRECISION:-auto}
  GPUS_PER_NODE=${GPUS_PER_NODE:-0}
  RANKS_COUNT=${RANKS_COUNT:-2}
  RANKS_SHARDS=${RANKS_SHARDS:-2}
  RANKS_PRETRAIN=${RANKS_PRETRAIN:-1}
  RANKS_SWEEP=${RANKS_SWEEP:-2}
  PROMOTER_WINDOW=${PROMOTER_WINDOW:-prom-core}
  TASKS=${TASKS:-promoter}
  SPLICE_ANNOTATION=${SPLICE_ANNOTATION:-$GENES}
  ENHANCER_INTERVALS=${ENHANCER_INTERVALS:-}
  SHOTS=${SHOTS:-10 50}
  SEEDS=${SEEDS:-5}
  THREADS_PER_WORKER=${THREADS_PER_WORKER:-1}
  RANKS_PER_GPU=${RANKS_PER_GPU:-1}
  FINETUNE_JSON=${FINETUNE_JSON:-}
  COUNT_OPTS=${COUNT_OPTS:-}
  NPMI_OPTS=${NPMI_OPTS:-}
  PMI_VOCAB_OPTS=${PMI_VOCAB_OPTS:-}
  MOTIFS=${MOTIFS-n[TATAAA]r [GTGGCT]sw nCyy[CCTCC]n* sCw[GCAGC]n ks[CTGGG]m [TTTTTT]TTTn}
  SHARDS_OPTS=${SHARDS_OPTS:-}
  PRETRAIN_OPTS=${PRETRAIN_OPTS:-}
  DATASET_OPTS=${DATASET_OPTS:-}
  SWEEP_OPTS=${SWEEP_OPTS:-}
  REPORT_OPTS=${REPORT_OPTS:-}
  SBATCH_OPTS=${SBATCH_OPTS:-}
  # Relative paths in the config are relative to the config file.
  local base
  base=$(cd "$(dirname "$cfg")" && pwd)
  GENOME=$(gm_abspath "$base" "$GENOME")
  OUT=$(gm_abspath "$base" "$OUT")
  [ -z "$GENES" ] || GENES=$(gm_abspath "$base" "$GENES")
  [ -z "$GENOMES" ] || GENOMES=$(gm_abspath "$base" "$GENOMES")
  if [ -n "$GENOME_WEIGHTS" ] && [ -z "$GENOMES" ]; then
    echo "config: GENOME_WEIGHTS needs GENOMES (a genome list): one genome has nothing to weight" >&2
    return 2
  fi
  [ -z "$TSS" ] || TSS=$(gm_abspath "$base" "$TSS")
  [ -z "$SPLICE_ANNOTATION" ] || SPLICE_ANNOTATION=$(gm_abspath "$base" "$SPLICE_ANNOTATION")
  [ -z "$ENHANCER_INTERVALS" ] || ENHANCER_INTERVALS=$(gm_abspath "$base" "$ENHANCER_INTERVALS")
  case $MODEL in logo | dnabert) ;; *) MODEL=$(gm_abspath "$base" "$MODEL") ;; esac
  # PRETRAIN_SEEDS: the pretraining replicates of every strategy (distinct non-negative
  # integers); SHOTS and SEEDS: positive integers. Written plainly: "01" would be a second
  # replicate of seed 1 under another name, and is not a number in the sweep's plan.json.
  local -a seeds=()
  local seed var
  for var in PRETRAIN_SEEDS SHOTS SEEDS; do
    read -r -a seeds <<<"${!var}"
    for seed in "${seeds[@]}"; do
      case $seed in
        '' | *[!0-9]* | 0?*) echo "config: $var: '$seed' is not an integer written plainly (digits, no leading 0)" >&2
          return 2 ;;
        0) [ "$var" = PRETRAIN_SEEDS ] || { echo "config: $var: 0 is not a positive integer" >&2; return 2; } ;;
      esac
    done
  done
  read -r -a seeds <<<"$PRETRAIN_SEEDS"
  [ -z "$(printf '%s\n' "${seeds[@]}" | sort | uniq -d)" ] ||
    { echo "config: PRETRAIN_SEEDS lists a seed twice: $PRETRAIN_SEEDS" >&2; return 2; }
  # The rest of what the stages take, checked before anything is submitted: a typo found by
  # the stage that reads it failed hours later, after the expensive stages; a GPUS_PER_NODE
  # of "four" was a bash error, and the jobs went out without GPUs.
  local v least
  for var in GPUS_PER_NODE:0 THREADS_PER_WORKER:0 RANKS_COUNT:1 RANKS_SHARDS:1 RANKS_PRETRAIN:1 RANKS_SWEEP:1 \
             RANKS_PER_GPU:1 STEPS:1 WARMUP:0 BATCH_PER_RANK:1 GRAD_ACCUM:1 CHECKPOINT_EVERY:0 EVAL_EVERY:0; do
    least=${var#*:} var=${var%%:*} v=${!var}
    case $v in
      '' | *[!0-9]* | 0?*) echo "config: $var: '$v' is not an integer written plainly (digits, no leading 0)" >&2
        return 2 ;;
    esac
    [ "$v" -ge "$least" ] || { echo "config: $var: $v is below $least" >&2; return 2; }
  done
  case $DEVICE in cpu | cuda) ;; *) echo "config: DEVICE: '$DEVICE' is not cpu or cuda" >&2; return 2 ;; esac
  case $PRECISION in auto | fp32 | bf16) ;;
    *) echo "config: PRECISION: '$PRECISION' is not auto, fp32 or bf16" >&2; return 2 ;;
  esac
  if ! [[ $PROMOTER_WINDOW =~ ^(prom-core|prom-300|-?[0-9]+:-?[0-9]+)$ ]]; then
    echo "config: PROMOTER_WINDOW: '$PROMOTER_WINDOW' is not prom-core, prom-300 or FIRST:LAST (e.g. -249:50)" >&2
    return 2
  fi
  if [ -n "$GENOME_WEIGHTS" ] && ! [[ $GENOME_WEIGHTS =~ ^(bases|uniform|list|temperature:[0-9]*\.?[0-9]+)$ ]]; then
    echo "config: GENOME_WEIGHTS: '$GENOME_WEIGHTS' is not bases, uniform, list or temperature:T (T > 0)" >&2
    return 2
  fi
  # FINETUNE_JSON goes into the sweep's plan as it is: a JSON object, checked here (with python3
  # where there is one) rather than by the sweep, after the pretraining.
  if [ -n "$FINETUNE_JSON" ] && command -v python3 >/dev/null &&
    ! python3 -c 'import json, sys; assert isinstance(json.loads(sys.argv[1]), dict)' "$FINETUNE_JSON" 2>/dev/null; then
    echo "config: FINETUNE_JSON: '$FINETUNE_JSON' is not a JSON object (e.g. {\"epochs\": 5, \"lr\": 2e-5})" >&2
    return 2
  fi
  local -a maskings=()
  read -r -a maskings <<<"$MASKINGS"
  [ "${#maskings[@]}" -gt 0 ] || { echo "config: MASKINGS is empty (genemask, random, pmi-vocab)" >&2; return 2; }
  for v in "${maskings[@]}"; do
    case $v in genemask | random | pmi-vocab) ;;
      *) echo "config: MASKINGS: '$v' is not a masking strategy (genemask, random, pmi-vocab)" >&2; return 2 ;;
    esac
  done
}

# gm_save_config FILE: the loaded config as a file of plain assignments (printf %q quoting),
# written whole (gm_put).
gm_save_config() {
  {
    printf '# The config as jobs/pipeline.sh read it (%s), every path absolute: the stages of that\n' \
      "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
    printf '# submission read this copy, so that an edit of the original changes nothing of them.\n'
    local v
    for v in "${GM_CONFIG_VARS[@]}"; do printf '%s=%q\n' "$v" "${!v}"; done
  } | gm_put "$1"
}

# gm_check_baseline: BASELINE_MASKING is one of MASKINGS (pipeline.sh, before anything is
# submitted: the report compares every model with the baseline's, and found it missing only
# after the pretraining and the sweep). A stage run alone (bench/paper_scale.sh with one
# strategy) may have no baseline, so the stages do not check it.
gm_check_baseline() {
  local -a maskings=()
  read -r -a maskings <<<"$MASKINGS"
  case " ${maskings[*]} " in *" $BASELINE_MASKING "*) return 0 ;; esac
  echo "config: BASELINE_MASKING: '$BASELINE_MASKING' is not one of MASKINGS ($MASKINGS): the report's baseline" \
    "is a model the pipeline pretrains; add it to MASKINGS or choose one of them" >&2
  return 2
}

# gm_check_inputs: the genome (or genome list) and a MODEL config file exist (pipeline.sh,
# before anything is submitted; a stage that reads neither runs without them).
gm_check_inputs() {
  [ -n "$GENOMES" ] || [ -e "$GENOME" ] || { echo "config: GENOME=$GENOME does not exist" >&2; return 2; }
  [ -z "$GENOMES" ] || [ -e "$GENOMES" ] || { echo "config: GENOMES=$GENOMES does not exist" >&2; return 2; }
  case $MODEL in logo | dnabert) ;;
    *) [ -e "$MODEL" ] || { echo "config: MODEL=$MODEL is neither logo, dnabert nor an existing config file" >&2
      return 2; } ;;
  esac
}

# gm_check_tasks: every name in TASKS is known and has its input set and present (before
# anything is submitted or built).
gm_check_tasks() {
  local t need what
  local -a tasks=()
  read -r -a tasks <<<"$TASKS"  # never a pattern: "prom*" matched a file of the working folder
  for t in "${tasks[@]}"; do
    case $t in
      promoter | prom-core | prom-300) need=TSS what="TSS positions, EPDnew BED or SGA" ;;
      splice-40) need=SPLICE_ANNOTATION what="a GTF or GFF3 with exons; default: GENES" ;;
      cohn-enh) need=ENHANCER_INTERVALS what="a genomic-benchmarks interval directory" ;;
      *) echo "config: unknown task '$t' in TASKS (known: promoter prom-core prom-300 splice-40 cohn-enh)" >&2
        return 2 ;;
    esac
    if [ -z "${!need}" ]; then echo "config: task $t needs $need ($what)" >&2; return 2; fi
    if [ ! -e "${!need}" ]; then echo "config: $need=${!need} (for task $t) does not exist" >&2; return 2; fi
  done
}

gm_abspath() {
  case $2 in /*) printf '%s\n' "$2" ;; *) printf '%s/%s\n' "$1" "$2" ;; esac
}

# The pretraining runs of the config, one per line: MASKING, or MASKING:SEED for each seed of
# PRETRAIN_SEEDS (the replicates of the strategy).
gm_pretrain_units() {
  local m s
  local -a maskings=() seeds=()
  read -r -a maskings <<<"$MASKINGS"
  read -r -a seeds <<<"$PRETRAIN_SEEDS"
  for m in "${maskings[@]}"; do
    if [ "${#seeds[@]}" -eq 0 ]; then
      echo "$m"
    else
      for s in "${seeds[@]}"; do echo "$m:$s"; done
    fi
  done
}

# The directory name of a pretraining unit under OUT/runs and OUT/models: MASKING, or
# MASKING-sSEED.
gm_run_name() { case $1 in *:*) printf '%s-s%s\n' "${1%%:*}" "${1#*:}" ;; *) printf '%s\n' "$1" ;; esac; }

# The name of a masking strategy's model in the sweep and the report (with a seed, the
# replicate's: the strategy's name is then its arm's).
gm_model_name() { printf '%s-%s\n' "$MODEL_LABEL" "$(gm_run_name "$1")"; }
