#!/usr/bin/env bash
# The main job on the built-in default data (human chr22, hg19, from the Debian package
# maffilter-examples): the whole genemask pipeline, as jobs/pipeline.sh --local runs it:
#   count (2 MPI ranks) -> npmi: GRANK, Gene-PMI-VOC, motif table -> shards (2 ranks)
#   -> pretraining of a small BERT with GeneMask and with random masking, same steps
#   -> a few-shot task built from chr22 -> sweep: 2 models x 10/50 shots x 5 seeds
#   -> report: Table 1 layout with paired t-tests, improvement table, plots
# About 12 minutes on 2 cores. Running it again continues where it stopped (finished
# stages are cheap to redo, pretraining resumes, the sweep skips finished jobs); for a fresh
# run remove the output directory first. OUTDIR must be new, empty or an earlier demo's made
# with the same settings (its demo-settings.json says which): anything else is refused, and
# the demo never writes over a file it would write differently.
#
# Usage: scripts/demo.sh [OUTDIR]   (default: results/demo)
# Environment: DEMO_STEPS (pretraining steps per masking, default 800), DEMO_SEEDS (default 5),
# DEMO_MASKINGS (default "genemask random"), DEMO_BASELINE (the report's, default random),
# DEMO_PRECISION (pretraining: fp32, bf16 or auto; default fp32, so that the demo's figures
#              reproduce on any CPU), DEMO_SITES (real windows in the task, default 2000),
#              DEMO_FINETUNE_JSON (fine-tuning overrides; default '{"precision": "fp32"}'),
#              GENEMASK_BIN.
set -euo pipefail
unset CDPATH  # cd DIR must not go to a folder of that name on CDPATH
case ${1:-} in
  -h | --help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  -*) echo "usage: scripts/demo.sh [OUTDIR]  (scripts/demo.sh --help)" >&2; exit 2 ;;
esac
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-"$root/results/demo"}
mkdir -p "$out"
out=$(cd "$out" && pwd)
export GENEMASK_BIN=${GENEMASK_BIN:-"$root/build/src/cli/genemask"}
[ -x "$GENEMASK_BIN" ] || { echo "demo: $GENEMASK_BIN not found: run scripts/build.sh first" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export GENEMASK_MPIRUN_OPTS=${GENEMASK_MPIRUN_OPTS:---oversubscribe}
t0=$SECONDS
who=demo what=demo
# shellcheck source=scripts/outdir.sh
source "$root/scripts/outdir.sh"

genome=$("$root/scripts/default-genome.sh")
maskings=${DEMO_MASKINGS:-genemask random}
ft_json=${DEMO_FINETUNE_JSON:-'{"precision": "fp32"}'}
# Everything the results depend on. An OUTDIR that has none is a new one (made here, or
# empty); one with other settings is refused: the stages would resume or skip with results
# of the old ones (other steps, seeds, sites) and mix them into the report.
settings=$(/usr/bin/python3 -c 'import json, sys; a = sys.argv[1:]
print(json.dumps({"script": "scripts/demo.sh", "settings": dict(zip(a[::2], a[1::2]))}, indent=1))' \
  genome "$genome" steps "${DEMO_STEPS:-800}" seeds "${DEMO_SEEDS:-5}" maskings "$maskings" \
  baseline "${DEMO_BASELINE:-random}" precision "${DEMO_PRECISION:-fp32}" sites "${DEMO_SITES:-2000}" \
  finetune_json "$ft_json")
claim_outdir "$out" demo-settings.json "$settings"

# The task: chr22 has no promoter annotation here, so the positives are real chr22 windows at
# random unmasked sites (scripts/demo-sites.py) and the negatives DeePromoter-style copies of
# them (12 of 20 parts replaced by random bases). With EPDnew's TSS BED (TSS= in a config)
# the same stages build the paper's promoter task. Made again on a rerun (under a second) to
# check the one there.
newtmp "$out/sites.bed"
/usr/bin/python3 "$root/scripts/demo-sites.py" "$genome" "$tmp" "${DEMO_SITES:-2000}"
settle "$tmp" "$out/sites.bed"

# A small BERT (2 layers, hidden 128) with the DNABERT 6-mer vocabulary: big enough to learn
# something in a few minutes on 2 cores.
# Fine-tuning in fp32 too unless told (the sweep's default is auto: bf16 on bf16 hardware).
put "$out/model.json" <"$root/scripts/demo-model.json"

put "$out/demo.conf" <<CONF
# The demo's pipeline config (written by scripts/demo.sh; see jobs/pipeline.conf.example)
# shellcheck disable=SC2034
GENOME=$(conf_word "$genome")
TSS=sites.bed
OUT=$(conf_word "$out")
MODEL=model.json
MODEL_LABEL=small
MASKINGS=$(conf_word "$maskings")
BASELINE_MASKING=$(conf_word "${DEMO_BASELINE:-random}")
PRECISION=$(conf_word "${DEMO_PRECISION:-fp32}")
STEPS=$(conf_word "${DEMO_STEPS:-800}")
WARMUP=50
BATCH_PER_RANK=16
GRAD_ACCUM=2
CHECKPOINT_EVERY=100
EVAL_EVERY=100
RANKS_COUNT=2
RANKS_SHARDS=2
RANKS_PRETRAIN=1
RANKS_SWEEP=3
THREADS_PER_WORKER=1
SHOTS="10 50"
SEEDS=$(conf_word "${DEMO_SEEDS:-5}")
SHARDS_OPTS="--max-tokens 128 --min-tokens 64"
FINETUNE_JSON=$(conf_word "$ft_json")
PRETRAIN_OPTS="--log-every 50 --eval-batches 10"
PMI_VOCAB_OPTS="--min-count 1000"
CONF

"$root/jobs/pipeline.sh" --local "$out/demo.conf"

echo
echo "== What the two masking strategies mask (genemask mask-stats, 5000 sequences)"
for m in genemask random; do
  opts=()
  [ "$m" = genemask ] && opts=(--npmi "$out/count/npmi.tsv")
  # Reports under temporaries, renamed once whole (a rerun replaces the earlier run's).
  newtmp "$out/mask-stats-$m.json"
  j=$tmp
  newtmp "$out/mask-stats-$m.txt"
  e=$tmp
  if ! "$GENEMASK_BIN" mask-stats --shards "$out/shards" --masking "$m" "${opts[@]}" --samples 5000 >"$j" 2>"$e"; then
    cat "$e" >&2
    exit 1
  fi
  chmod 644 "$j" "$e"
  mv "$j" "$out/mask-stats-$m.json"
  mv "$e" "$out/mask-stats-$m.txt"
  echo "$m: $(head -n 1 "$out/mask-stats-$m.txt")"
done

echo
echo "== Motif table (GRANK ranks of the paper's Table 5 motifs on chr22): $out/count/motifs.md"
cat "$out/count/motifs.md"
echo
echo "== Pretraining: final validation perplexity"
read -r -a ms <<<"$maskings"
for m in "${ms[@]}"; do
  ppl=$(grep "eval_perplexity" "$out/runs/$m/metrics.jsonl" | tail -n 1 | grep -o '"eval_perplexity":[0-9.e+-]*' | cut -d: -f2)
  echo "$m: ${ppl:-n/a}   (curve: $out/runs/$m/perplexity.svg)"
done
echo
echo "== Few-shot results: $out/report/table1.md"
cat "$out/report/table1.md"
echo
echo "Demo done in $((SECONDS - t0)) s. Results are in $out:"
echo "  count/     counts.h5, npmi.tsv (GRANK), pmi_vocab.tsv, motifs.md"
echo "  shards/    the HDF5 pretraining corpus"
echo "  runs/      pretraining runs (metrics.jsonl, perplexity.svg, checkpoints)"
echo "  models/    the pretrained models (Hugging Face layout)"
echo "  dataset/   the few-shot task (dataset/promoter: train/test, fewshot/)"
echo "  sweep/     results.jsonl (one line per fine-tuning run) and runs/"
echo "  report/    table1.md/.tex/.csv, improvement.md, plots (svg, png)"
echo "  logs/      one log per stage"
