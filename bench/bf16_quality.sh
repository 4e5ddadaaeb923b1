#!/usr/bin/env bash
# bf16 against fp32 on the demo (scripts/demo.sh: real chr22, a 2 x 128 BERT, GeneMask
# masking, 800 steps, the same seed), in one run: the final validation perplexity of the
# pretraining, and a few-shot sweep of the demo's task with 10 seeds (10 and 50 shots),
# fine-tuning in the same precision: mean accuracy and AUC with the seeds' standard error.
# Usage: bench/bf16_quality.sh [STEPS (default 800)] [OUTDIR (default results/bf16-quality)]
# OUTDIR holds the two demos (fp32/, bf16/) and their logs (fp32.log, bf16.log). It must be
# new, empty or this script's with the same STEPS (bf16-quality.json says which): a rerun
# continues the demos.
set -euo pipefail
unset CDPATH  # cd DIR must not go to a folder of that name on CDPATH
root=$(cd "$(dirname "$0")/.." && pwd)
steps=${1:-800}
out=${2:-$root/results/bf16-quality}
py=${PYTHON:-$root/.venv/bin/python3}
export GENEMASK_BIN=${GENEMASK_BIN:-$root/build/src/cli/genemask}
mkdir -p "$out"
out=$(cd "$out" && pwd)
# One run at a time in OUTDIR (two would write the same files): a lock on the directory.
exec 9<"$out"
flock -n 9 || { echo "bf16_quality: another run is using $out" >&2; exit 1; }
tmp=
trap 'rm -f ${tmp:+"$tmp"}' EXIT
settings=$(printf '{"script": "bench/bf16_quality.sh", "steps": "%s"}' "$steps")
marker=$out/bf16-quality.json
if [ -e "$marker" ]; then
  if [ "$(cat "$marker")" != "$settings" ]; then
    echo "bf16_quality: $out was made with other settings ($marker: $(cat "$marker")): remove it, or use another OUTDIR" >&2
    exit 1
  fi
elif [ -n "$(ls -A "$out")" ]; then
  echo "bf16_quality: $out is not empty and not this script's (no bf16-quality.json): use a new or empty OUTDIR" >&2
  exit 1
else
  tmp=$(mktemp "$marker.tmp.XXXXXX")
  echo "$settings" >"$tmp"
  chmod 644 "$tmp"
  mv "$tmp" "$marker"
fi
"$GENEMASK_BIN" --version | sed -n 4p
for p in fp32 bf16; do
  t0=$SECONDS
  ft='{"precision": "'$p'"}'
  # The log under a temporary, renamed once the demo has ended (well or not).
  tmp=$(mktemp "$out/$p.log.tmp.XXXXXX")
  rc=0
  DEMO_STEPS=$steps DEMO_SEEDS=10 DEMO_MASKINGS=genemask DEMO_BASELINE=genemask DEMO_PRECISION=$p \
    DEMO_FINETUNE_JSON=$ft bash "$root/scripts/demo.sh" "$out/$p" >"$tmp" 2>&1 || rc=$?
  chmod 644 "$tmp"
  mv "$tmp" "$out/$p.log"
  tmp=
  if [ "$rc" != 0 ]; then tail -n 30 "$out/$p.log" >&2; exit 1; fi
  echo "$p: demo with $steps steps in $((SECONDS - t0)) s"
done
"$py" - "$out" "$steps" <<'PY'
import json, math, statistics, sys
out, steps, n_seeds = sys.argv[1], int(sys.argv[2]), 10
def lines(path):
    # Whole lines only: a last line without its newline is a write cut short.
    return [json.loads(l) for l in open(path) if l.endswith("\n") and l.strip()]
def final_ppl(p):
    m = lines(f"{out}/{p}/runs/genemask/metrics.jsonl")
    ran = {r["precision"] for r in m if "precision" in r}
    if ran != {p}:
        sys.exit(f"bf16_quality: {p}: the pretraining ran in {sorted(ran)}, not {p}")
    ev = [r for r in m if "eval_perplexity" in r]
    if not ev or ev[-1]["step"] != steps:
        sys.exit(f"bf16_quality: {p}: no evaluation at the last step, {steps}")
    return ev[-1]["eval_perplexity"]
def records(p):
    # The last record of each job (a job that failed may have run again).
    rs = list({r["job"]: r for r in lines(f"{out}/{p}/sweep/results.jsonl")}.values())
    for r in rs:
        if r["status"] != "ok" or r.get("precision") != p:
            sys.exit(f"bf16_quality: {p}: sweep job {r['job']}: {r['status']}, precision {r.get('precision')}")
    return rs
# Everything checked before anything is printed.
p32, p16 = final_ppl("fp32"), final_ppl("bf16")
recs = {p: records(p) for p in ("fp32", "bf16")}
rows = []
for shots in sorted({r["shots"] for r in recs["fp32"]} | {r["shots"] for r in recs["bf16"]}):
    for metric in ("accuracy", "auc"):
        row = [shots, metric]
        for p in ("fp32", "bf16"):
            rs = [r for r in recs[p] if r["shots"] == shots]
            if len({r["seed"] for r in rs}) != n_seeds or len(rs) != n_seeds:
                sys.exit(f"bf16_quality: {p}, {shots} shots: {len(rs)} records, not one per seed of {n_seeds}")
            v = [r[metric] for r in rs]
            row += [statistics.mean(v), statistics.stdev(v) / math.sqrt(len(v)), len(v)]
        rows.append(row)
print(f"validation perplexity at step {steps}: fp32 {p32:.3f}, bf16 {p16:.3f} ({(p16 / p32 - 1) * 100:+.2f}%; goal: within 1%)")
for shots, metric, m32, se32, n32, m16, se16, n16 in rows:
    ok = abs(m16 - m32) <= max(se32, se16)
    print(f"{shots:3d} shots {metric:8s}: fp32 {m32:.4f} +- {se32:.4f} ({n32} seeds), bf16 {m16:.4f} +- {se16:.4f} "
          f"({n16} seeds); difference {m16 - m32:+.4f}: {'within' if ok else 'NOT within'} one standard error")
PY
