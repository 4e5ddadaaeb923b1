#!/usr/bin/env bash
# Is a masking strategy's effect real? The study design of issue 33, end to end on the
# built-in genome (human chr22): each strategy is pretrained with several seeds (its
# replicates), every replicate is fine-tuned on a few-shot task built from the genome with
# `genemask dataset`, and the report compares the strategies with the replicate as the
# unit (replicates.md), besides Table 1's test over fine-tuning seeds. It also audits what
# each strategy masks (mask-stats --by-kmer).
#
# Usage: bench/masking_study.sh [OUTDIR]   (default: results/masking-study)
# Environment (defaults are the 2-core size, under an hour):
#   STUDY_SEEDS="1 2 3"          pretraining seeds (replicates) of every strategy
#   STUDY_MASKINGS="genemask random"
#   STUDY_STEPS=800              pretraining steps per replicate (the demo's)
#   STUDY_MODEL=small            small (2 layers, hidden 128), logo, dnabert, or a config.json
#   STUDY_DEVICE=cpu             cuda on a GPU node (then a larger STUDY_MODEL/STUDY_STEPS)
#   STUDY_SHOTS="10 50"  STUDY_FINETUNE_SEEDS=5  STUDY_SITES=1500 (real windows in the task)
#   STUDY_RANKS_SWEEP=3          sweep ranks (1 manager + workers)
#   GENEMASK_BIN
# Running it again continues where it stopped (pretraining resumes, the sweep skips its jobs).
# OUTDIR must be new, empty or an earlier study's made with the same settings (its
# study-settings.json says which): anything else is refused, and the study never writes over
# a file it would write differently.
set -euo pipefail
unset CDPATH  # cd DIR must not go to a folder of that name on CDPATH
case ${1:-} in
  -h | --help) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  -*) echo "usage: bench/masking_study.sh [OUTDIR]  (--help)" >&2; exit 2 ;;
esac
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-"$root/results/masking-study"}
mkdir -p "$out"
out=$(cd "$out" && pwd)
export GENEMASK_BIN=${GENEMASK_BIN:-"$root/build/src/cli/genemask"}
[ -x "$GENEMASK_BIN" ] || { echo "masking_study: $GENEMASK_BIN not found: run scripts/build.sh first" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export GENEMASK_MPIRUN_OPTS=${GENEMASK_MPIRUN_OPTS:---oversubscribe}
t0=$SECONDS
seeds=${STUDY_SEEDS:-1 2 3}
maskings=${STUDY_MASKINGS:-genemask random}
model=${STUDY_MODEL:-small}
who=masking_study what=study
# shellcheck source=scripts/outdir.sh
source "$root/scripts/outdir.sh"

genome=$("$root/scripts/default-genome.sh")
model_sha=
case $model in
  small | logo | dnabert) ;;
  *) # a config.json: absolute (the config's relative paths are taken from OUTDIR), and its digest
    [ -f "$model" ] || { echo "masking_study: STUDY_MODEL=$model: not small, logo, dnabert or a file" >&2; exit 1; }
    model=$(cd "$(dirname -- "$model")" && pwd)/$(basename -- "$model")
    model_sha=$(sha256sum <"$model" | cut -d' ' -f1) ;;
esac
# Everything the results depend on. An OUTDIR that has none is a new one (made here, or
# empty); one with other settings is refused: the stages would resume or skip with results
# of the old ones (other steps, seeds, sites) and mix them into the report.
settings=$(/usr/bin/python3 -c 'import json, sys; a = sys.argv[1:]
print(json.dumps({"script": "bench/masking_study.sh", "settings": dict(zip(a[::2], a[1::2]))}, indent=1))' \
  genome "$genome" seeds "$seeds" maskings "$maskings" model "$model" model_sha256 "$model_sha" \
  device "${STUDY_DEVICE:-cpu}" steps "${STUDY_STEPS:-800}" shots "${STUDY_SHOTS:-10 50}" \
  finetune_seeds "${STUDY_FINETUNE_SEEDS:-5}" sites "${STUDY_SITES:-1500}" ranks_sweep "${STUDY_RANKS_SWEEP:-3}")
claim_outdir "$out" study-settings.json "$settings"

# The task: real chr22 windows at random unmasked sites against DeePromoter-style copies of
# them (the demo's task; scripts/demo-sites.py). Made again on a rerun (under a second) to
# check the one there.
newtmp "$out/sites.bed"
/usr/bin/python3 "$root/scripts/demo-sites.py" "$genome" "$tmp" "${STUDY_SITES:-1500}"
settle "$tmp" "$out/sites.bed"
if [ "$model" = small ]; then
  put "$out/model.json" <"$root/scripts/demo-model.json"  # the demo's small BERT
  model=model.json
fi

put "$out/study.conf" <<CONF
# The masking study's pipeline config (written by bench/masking_study.sh; see jobs/pipeline.conf.example)
# shellcheck disable=SC2034
GENOME=$(conf_word "$genome")
TSS=sites.bed
OUT=$(conf_word "$out")
MODEL=$(conf_word "$model")
MODEL_LABEL=study
MASKINGS=$(conf_word "$maskings")
PRETRAIN_SEEDS=$(conf_word "$seeds")
BASELINE_MASKING=random
PRECISION=fp32
DEVICE=$(conf_word "${STUDY_DEVICE:-cpu}")
STEPS=$(conf_word "${STUDY_STEPS:-800}")
WARMUP=30
BATCH_PER_RANK=16
GRAD_ACCUM=2
CHECKPOINT_EVERY=100
EVAL_EVERY=100
RANKS_COUNT=2
RANKS_SHARDS=2
RANKS_PRETRAIN=1
RANKS_SWEEP=$(conf_word "${STUDY_RANKS_SWEEP:-3}")
THREADS_PER_WORKER=1
SHOTS=$(conf_word "${STUDY_SHOTS:-10 50}")
SEEDS=$(conf_word "${STUDY_FINETUNE_SEEDS:-5}")
SHARDS_OPTS="--max-tokens 128 --min-tokens 64"
FINETUNE_JSON='{"precision": "fp32"}'
PRETRAIN_OPTS="--log-every 50 --eval-batches 10"
PMI_VOCAB_OPTS="--min-count 1000"
CONF

"$root/jobs/pipeline.sh" --local "$out/study.conf"

echo
echo "== What each strategy masks (mask-stats --by-kmer, 5000 sequences): $out/audit-*.tsv"
for m in $maskings; do
  opts=(--npmi "$out/count/npmi.tsv")
  [ "$m" = pmi-vocab ] && opts+=(--pmi-vocab "$out/count/pmi_vocab.tsv")
  # Reports under temporaries, renamed once whole (a rerun replaces the earlier run's).
  # --by-kmer's table is genemask's own output, written whole under its name.
  newtmp "$out/audit-$m.json"
  j=$tmp
  newtmp "$out/audit-$m.txt"
  e=$tmp
  if ! "$GENEMASK_BIN" mask-stats --shards "$out/shards" --masking "$m" "${opts[@]}" --samples 5000 \
    --by-kmer "$out/audit-$m.tsv" >"$j" 2>"$e"; then
    cat "$e" >&2
    exit 1
  fi
  chmod 644 "$j" "$e"
  mv "$j" "$out/audit-$m.json"
  mv "$e" "$out/audit-$m.txt"
  /usr/bin/python3 - "$m" "$out/audit-$m.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[2]))
k, lk, sp = s["by_kmer"], s["leakage"], s["by_kmer"]["splice_motifs"]
print(f"{sys.argv[1]}: masked {s['masked_fraction']:.4f}; leaking spans {lk['leaking_span_share']:.4f}, "
      f"{lk['hidden_bases_per_span']:.2f} bases hidden per span; 6-mers masked > {k['flag_factor']}x the mean: "
      f"{k['flagged_high']}, < 1/{k['flag_factor']}: {k['flagged_low']}; GT... {sp['GT']['relative']:.2f}x, "
      f"...AG {sp['AG']['relative']:.2f}x the mean rate")
PY
done
echo
echo "== Strategies over their pretraining replicates: $out/report/replicates.md"
cat "$out/report/replicates.md"
echo
echo "Study done in $((SECONDS - t0)) s: $out (report/table1.md has every replicate over its fine-tuning seeds)"
