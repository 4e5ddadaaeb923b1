#!/usr/bin/env bash
# bf16 against fp32 on the demo (scripts/demo.sh: real chr22, a 2 x 128 BERT, GeneMask
# masking, 800 steps, the same seed), in one run: the final validation perplexity of the
# pretraining, and a few-shot sweep of the demo's task with 10 seeds (10 and 50 shots),
# fine-tuning in the same precision: mean accuracy and AUC with the seeds' standard error.
# Usage: bench/bf16_quality.sh [STEPS (default 800)] [OUTDIR (default results/bf16-quality)]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
steps=${1:-800}
out=${2:-$root/results/bf16-quality}
py=${PYTHON:-$root/.venv/bin/python3}
mkdir -p "$(dirname "$out")"
"$root/build/src/cli/genemask" --version | sed -n 4p
for p in fp32 bf16; do
  t0=$SECONDS
  ft='{"precision": "'$p'"}'
  DEMO_STEPS=$steps DEMO_SEEDS=10 DEMO_MASKINGS=genemask DEMO_BASELINE=genemask DEMO_PRECISION=$p \
    DEMO_FINETUNE_JSON=$ft bash "$root/scripts/demo.sh" "$out/$p" >"$out-$p.log" 2>&1 ||
    { tail -n 30 "$out-$p.log" >&2; exit 1; }
  echo "$p: demo with $steps steps in $((SECONDS - t0)) s"
done
"$py" - "$out" <<'PY'
import json, math, statistics, sys
out = sys.argv[1]
def final_ppl(p):
    ev = [json.loads(l) for l in open(f"{out}/{p}/runs/genemask/metrics.jsonl") if '"eval_perplexity"' in l]
    return ev[-1]["step"], ev[-1]["eval_perplexity"]
s32, p32 = final_ppl("fp32")
s16, p16 = final_ppl("bf16")
print(f"validation perplexity at step {s32}: fp32 {p32:.3f}, bf16 {p16:.3f} ({(p16 / p32 - 1) * 100:+.2f}%; goal: within 1%)")
def records(p):
    return [json.loads(l) for l in open(f"{out}/{p}/sweep/results.jsonl") if '"ok"' in l]
for shots in sorted({r["shots"] for r in records("fp32")}):
    for metric in ("accuracy", "auc"):
        row = []
        for p in ("fp32", "bf16"):
            v = [r[metric] for r in records(p) if r["shots"] == shots]
            se = statistics.stdev(v) / math.sqrt(len(v))
            row.append((statistics.mean(v), se, len(v)))
        (m32, se32, n), (m16, se16, _) = row
        ok = abs(m16 - m32) <= max(se32, se16)
        print(f"{shots:3d} shots {metric:8s}: fp32 {m32:.4f} +- {se32:.4f}, bf16 {m16:.4f} +- {se16:.4f} "
              f"({n} seeds; difference {m16 - m32:+.4f}: {'within' if ok else 'NOT within'} one standard error)")
PY
