#!/usr/bin/env bash
# Stage 4 benchmark on CPU: fine-tuning throughput (training examples/s) of `genemask
# finetune` (logo config, dropout 0.1, AdamW, warm-up schedule, clipping) against the same
# loop in Python PyTorch (bench/finetune_bench.py, PyTorch 2.11 in .venv, the same
# LibTorch), same run, same threads, batch and data: 70 bp (Prom-core-like) and 300 bp (Prom-300-like) windows of
# the benchmark genome. Median of RUNS runs per setting; prints the ratio.
# Usage: bench/finetune_bench.sh [RUNS (default 3)] [ROWS (default 100)] [EPOCHS (default 2)]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
runs=${1:-3}
rows=${2:-100}
epochs=${3:-2}
copies=1
# shellcheck source=bench/common.sh
source "$root/bench/common.sh"
py="$root/bench/finetune_bench.py"
for len in 70 300; do
  [ -s "$work/ft-$len.csv" ] || "$python" "$py" make "$g" "$work/ft-$len.csv" "$rows" "$len"
done
echo "== fine-tuning, logo config, $rows sequences x $epochs epochs, median of $runs runs"
for len in 70 300; do
  for batch in 5 15; do
    for t in 1 2; do
      for _ in $(seq "$runs"); do
        "$bin" finetune --model random --config logo --train "$work/ft-$len.csv" --test "$work/ft-$len.csv" \
          --out "$work/ft-out" --force --epochs "$epochs" --batch "$batch" --threads "$t" 2>/dev/null |
          LEN=$len BATCH=$batch T=$t "$python" -c 'import json, os, sys
s = json.loads(sys.stdin.read().splitlines()[-1])
print(json.dumps({"impl": "genemask", "len": int(os.environ["LEN"]), "batch": int(os.environ["BATCH"]),
                  "threads": int(os.environ["T"]), "train_examples_per_s": s["train_examples_per_s"]}))'
        "$python" "$py" run "$work/ft-$len.csv" logo "$t" "$batch" "$epochs" |
          LEN=$len "$python" -c 'import json, os, sys
r = json.loads(sys.stdin.read())
r["len"] = int(os.environ["LEN"])
print(json.dumps(r))'
      done
    done
  done
done > "$work/finetune.jsonl"
"$python" - "$work/finetune.jsonl" <<'PY'
import collections, json, statistics, sys
v = collections.defaultdict(list)
for l in open(sys.argv[1]):
    r = json.loads(l)
    v[(r["len"], r["batch"], r["threads"], r["impl"])].append(r["train_examples_per_s"])
print(f"{'length':>6} {'batch':>5} {'threads':>7} {'genemask ex/s':>14} {'PyTorch ex/s':>13} {'ratio':>6}")
for (n, b, t, impl) in sorted(v):
    if impl != "genemask":
        continue
    g, p = statistics.median(v[(n, b, t, "genemask")]), statistics.median(v[(n, b, t, "pytorch")])
    print(f"{n:>4}bp {b:>5} {t:>7} {g:>14.1f} {p:>13.1f} {g / p:>5.2f}x")
PY
