#!/usr/bin/env bash
# The LOGO study at the paper's pretraining budget on one GPU (issue 30): `genemask pretrain`
# of the logo model (2 layers, hidden 256), 10,000 steps x 1000 sequences of up to 512
# tokens, once with GeneMask masking and once with random masking, each timed. Prints one
# line per arm (minutes, real tokens/s, model TFLOP/s, MFU against the GPU's datasheet peak,
# final loss) and writes them to OUTDIR/paper_scale.json. The goal: <= 12 minutes per arm on
# one H100 or H200. With PAPER_MODEL=dnabert the same on the DNABERT-size model (issue 30's
# "pretraining on real shards reaches the synthetic benchmark's MFU": compare its model
# TFLOP/s with train_bench's), written to OUTDIR/paper_scale-dnabert.json.
#
# Usage: bench/paper_scale.sh [OUTDIR]   (default: results/paper-scale)
# Environment:
#   PAPER_MODEL=logo       or dnabert (its arms beside logo's in the same OUTDIR, which
#                          share the counts and shards)
#   PAPER_GENOME=FASTA     the genome (default: the built-in one, human chr22); not one
#                          of the files this script writes in OUTDIR
#   PAPER_STEPS=10000      optimizer steps per arm
#   PAPER_BATCH=500 PAPER_ACCUM=2     sequences per micro-batch x micro-batches per step
#                          (1000 per step, the paper's effective batch; 500 x 2 measured
#                          5% faster than 250 x 4 on an H100)
#   PAPER_DEVICE=cuda      cpu for a dry run with tiny settings
#   PAPER_PRECISION=bf16   PAPER_MASKINGS="genemask random"   PAPER_RANKS=2 (count, shards)
#   PAPER_CUDA_GRAPHS=auto  pretrain's --cuda-graphs: on captures the step of any model
#                          (auto: logo's, not dnabert's), off never
#   PAPER_PROFILE_STEPS=0  N > 0: each arm's N steps before its last under LibTorch's
#                          profiler (pretrain --profile-steps), the arm's "profile" in the JSON
#                          (where a real step's time goes, beside train_bench's synthetic one)
#   GENEMASK_BIN
# Stages already done (counts, npmi, shards, a finished arm) are kept when it is run again;
# an arm that was stopped resumes from its last checkpoint (its minutes are then the rest's:
# the JSON says "resumed" and gives it no verdict). OUTDIR records the genome's sha256 and
# each arm's settings: a rerun with another genome, or an arm asked for with other steps,
# batch, device or precision, is refused, never served the old results. One run at a time in
# an OUTDIR (a second is refused).
set -euo pipefail
unset CDPATH  # cd DIR must not go to a folder of that name on CDPATH
case ${1:-} in
  -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
  -*) echo "usage: bench/paper_scale.sh [OUTDIR]  (--help)" >&2; exit 2 ;;
esac
root=$(cd "$(dirname "$0")/.." && pwd)
steps=${PAPER_STEPS:-10000}
batch=${PAPER_BATCH:-500}
accum=${PAPER_ACCUM:-2}
device=${PAPER_DEVICE:-cuda}
precision=${PAPER_PRECISION:-bf16}
ranks=${PAPER_RANKS:-2}
maskings=${PAPER_MASKINGS:-genemask random}
model=${PAPER_MODEL:-logo}
profile_steps=${PAPER_PROFILE_STEPS:-0}
graphs=${PAPER_CUDA_GRAPHS:-auto}
case $graphs in auto | on | off) ;; *) echo "paper_scale: PAPER_CUDA_GRAPHS must be auto, on or off, got '$graphs'" >&2; exit 2 ;; esac
case $profile_steps in '' | *[!0-9]*) echo "paper_scale: PAPER_PROFILE_STEPS must be an integer >= 0, got '$profile_steps'" >&2; exit 2 ;; esac
case $model in logo | dnabert) ;; *) echo "paper_scale: PAPER_MODEL must be logo or dnabert, got '$model'" >&2; exit 2 ;; esac
for v in steps batch accum ranks; do  # refused before anything is made (PAPER_MODEL too, below)
  case ${!v} in '' | *[!0-9]* | 0) echo "paper_scale: PAPER_${v^^} must be a positive integer, got '${!v}'" >&2; exit 2 ;; esac
done
bin=${GENEMASK_BIN:-"$root/build/src/cli/genemask"}
[ -x "$bin" ] || { echo "paper_scale: $bin not found: run scripts/build.sh first" >&2; exit 1; }
out=${1:-"$root/results/paper-scale"}
mkdir -p "$out"
out=$(cd "$out" && pwd)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpirun_opts=${GENEMASK_MPIRUN_OPTS:---oversubscribe}
genome=${PAPER_GENOME:-$("$root/scripts/default-genome.sh")}
json_name=paper_scale.json
[ "$model" = logo ] || json_name=paper_scale-$model.json
# The genome is never one of the files this script writes in OUTDIR (genemask's own commands
# refuse an output that is an input; these are the script's own).
written=(.paper_scale.lock genome.sha256 genome.sha256.tmp "$json_name" "$json_name.tmp")
for m in $maskings; do
  for f in log settings settings.tmp summary.tmp summary.part summary.json; do written+=("$model-$m.$f"); done
done
for f in "${written[@]}"; do
  if [ "$out/$f" -ef "$genome" ]; then
    echo "paper_scale: PAPER_GENOME '$genome' is $out/$f, which this script writes; move the genome out of the way" >&2
    exit 2
  fi
done
# One run at a time in OUTDIR: the counts, the shards and the arms are shared.
exec 9>>"$out/.paper_scale.lock"
if ! flock -n 9; then
  echo "paper_scale: another paper_scale.sh is running in $out; wait for it, or name another OUTDIR" >&2
  exit 2
fi
# What OUTDIR's stages were made from: the genome's bytes. A rerun with another genome is
# refused, never served the old genome's counts and shards.
sum=$(sha256sum <"$genome" | cut -d' ' -f1)
if [ -s "$out/genome.sha256" ]; then
  if [ "$(cat "$out/genome.sha256")" != "$sum" ]; then
    echo "paper_scale: $out holds the counts and shards of another genome (sha256 $(cat "$out/genome.sha256"));" \
      "PAPER_GENOME '$genome' is $sum: name another OUTDIR" >&2
    exit 2
  fi
elif [ -e "$out/counts.h5" ] || [ -e "$out/npmi.tsv" ] || [ -e "$out/shards" ]; then
  echo "paper_scale: $out holds counts or shards that do not say which genome they are of; name another OUTDIR" >&2
  exit 2
else
  echo "$sum" >"$out/genome.sha256.tmp"
  mv "$out/genome.sha256.tmp" "$out/genome.sha256"
fi

# shellcheck disable=SC2086  # mpirun_opts is a list of options
[ -s "$out/counts.h5" ] || mpirun $mpirun_opts -n "$ranks" "$bin" count --genome "$genome" --out "$out/counts.h5" >/dev/null
[ -s "$out/npmi.tsv" ] || "$bin" npmi --counts "$out/counts.h5" --out "$out/npmi.tsv" >/dev/null
# Samples of 5 to 510 tokens, as the paper's recipe.
# shellcheck disable=SC2086
[ -s "$out/shards/manifest.json" ] ||
  mpirun $mpirun_opts -n "$ranks" "$bin" shards --genome "$genome" --out "$out/shards" --force >/dev/null

arms=$(mktemp "$out/arms.XXXXXX")
trap 'rm -f "$arms"' EXIT
for m in $maskings; do
  run="$out/$model-$m"
  log="$out/$model-$m.log"
  # An arm is kept (finished) or resumed (stopped) only if made with these settings: a
  # finished arm of 2 steps is never reported as one of 10,000.
  settings="model=$model masking=$m steps=$steps batch=$batch accum=$accum device=$device precision=$precision genome=$sum"
  [ "$graphs" = auto ] || settings+=" cuda_graphs=$graphs"  # (auto: as the arms made before the setting)
  if [ -e "$run" ] || [ -e "$run.summary.json" ]; then
    if [ "$(cat "$run.settings" 2>/dev/null)" != "$settings" ]; then
      echo "paper_scale: $run was made with other settings ($(cat "$run.settings" 2>/dev/null || echo "not recorded"));" \
        "these are $settings: name another OUTDIR" >&2
      exit 2
    fi
  else
    echo "$settings" >"$run.settings.tmp"
    mv "$run.settings.tmp" "$run.settings"
  fi
  if [ ! -s "$run.summary.json" ]; then
    t=$SECONDS
    resume=()
    [ -d "$run" ] && resume=(--resume)  # an arm stopped earlier continues
    profile=()
    [ "$profile_steps" -gt 0 ] && profile=(--profile-steps "$profile_steps")
    tables=()
    [ "$m" = genemask ] && tables=(--npmi "$out/npmi.tsv")  # read by genemask masking only
    "$bin" pretrain --shards "$out/shards" --masking "$m" "${tables[@]}" --model "$model" \
      --out "$run" "${resume[@]}" --steps "$steps" --batch-per-rank "$batch" --grad-accum "$accum" \
      --device "$device" --precision "$precision" --cuda-graphs "$graphs" --log-every 100 --eval-every 0 \
      --checkpoint-every "$steps" "${profile[@]}" >"$run.summary.tmp" 2>"$log"
    # The arm's summary under its final name only once whole (a later run then skips the arm).
    # A resumed arm's minutes are its last part's only: it says so, and is given no verdict.
    tail -n 1 "$run.summary.tmp" | python3 -c 'import json, sys; s = json.load(sys.stdin); s["wall_s"] = float(sys.argv[1]); s["resumed"] = sys.argv[2] == "1"; print(json.dumps(s))' \
      "$((SECONDS - t))" "${#resume[@]}" >"$run.summary.part"
    mv "$run.summary.part" "$run.summary.json"
    rm -f "$run.summary.tmp"
  fi
  cat "$run.summary.json" >>"$arms"
done
python3 - "$arms" "$out/$json_name" "$steps" "$batch" "$accum" "$device" "$model" <<'PY'
import json, sys
src, dst, steps, batch, accum = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:6])
model = sys.argv[7]
# The goal speaks of the LOGO study at the paper's budget on a GPU; other settings only report.
paper = model == "logo" and steps == 10000 and batch * accum == 1000 and sys.argv[6] == "cuda"
arms = [json.loads(l) for l in open(src) if l.strip()]
rows = []
for s in arms:
    # An arm's steps are its whole run's: steps_done is the step the run reached, and a
    # resumed one began at start_step (timed: the steps of this part); a run that stopped
    # short of the steps asked is not published.
    done, timed = s["steps_done"], s["steps_done"] - s.get("start_step", 0)
    if done != steps:
        sys.exit(f"paper_scale: the {s['masking']} arm stopped at step {done} of {steps}; run it again to resume it")
    # The rates are the timed part's; a part with no step has none.
    rate = lambda v: v if timed else None
    mfu = rate(s.get("mfu_datasheet"))
    resumed = s.get("resumed", False)
    # The goal is judged on an arm timed whole; a resumed arm's minutes are its last part's.
    goal = None if not paper or resumed else s["wall_s"] <= 720
    rows.append({"model": s["model"], "masking": s["masking"], "steps": done, "steps_timed": timed,
                 "minutes": s["wall_s"] / 60, "resumed": resumed, "goal_met": goal,
                 "tokens_per_s": rate(s["tokens_per_s"]), "model_tflops": rate(s["model_tflops"]), "mfu_datasheet": mfu,
                 "loss": s["loss"], "precision": s["precision"], "packing": s.get("packing"),
                 "cuda_graphs": s.get("cuda_graphs"), "packed_attention": s.get("packed_attention"),
                 "fixed_shapes": s.get("fixed_shapes"), "shape_setup_steps": s.get("shape_setup_steps"),
                 "shape_setup_s": s.get("shape_setup_s"),
                 "layout": s["layout"], "profile": s.get("profile"),
                 "fill": rate(s.get("fill")), "rows_per_micro_batch": rate(s.get("rows_per_micro_batch")),
                 "input_wait": rate(s.get("input_wait")), "loader_busy": rate(s.get("loader_busy"))})
    verdict = ""
    if paper:
        verdict = (", resumed: its minutes are the last part's, no verdict" if resumed
                   else f", goal <= 12 min: {'met' if goal else 'missed'}")
    fig = lambda v, f: "-" if v is None else format(v, f)
    print(f"{s['masking']:10s} {model} {done} steps x {batch * accum} sequences: {s['wall_s'] / 60:6.1f} min, "
          f"{fig(rate(s['tokens_per_s']), ',.0f')} real tokens/s, {fig(rate(s['model_tflops']), '.1f')} model TFLOP/s, "
          f"MFU (datasheet) {fig(mfu, '.1%')}, final loss {s['loss']}" + verdict)
with open(dst + ".tmp", "w") as f:
    json.dump({"model": model, "steps": steps, "sequences_per_step": batch * accum, "paper_budget": paper, "arms": rows},
              f, indent=2)
import os
os.replace(dst + ".tmp", dst)
PY
echo "paper_scale: wrote $out/$json_name"
