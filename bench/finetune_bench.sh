#!/usr/bin/env bash
# Stage 4 benchmark on CPU: fine-tuning throughput (training examples/s) of `genemask
# finetune` (logo config, dropout 0.1, AdamW, warm-up schedule, clipping) against the same
# loop in Python PyTorch (bench/finetune_bench.py, PyTorch 2.11 in .venv, the same
# LibTorch), same run, same threads, batch and data: 70 bp (Prom-core-like) and 300 bp
# (Prom-300-like) windows of the benchmark genome. In fp32 and, on a CPU with bf16
# instructions (AMX-BF16, AVX512-BF16), in bf16 autocast; elsewhere it says so and measures
# fp32 only. MFU against this machine's fp32 and bf16 matrix-product peaks, measured in the
# same run (build/bench/train_bench peaks). Median of RUNS runs per setting; prints the ratios.
# Usage: bench/finetune_bench.sh [RUNS (default 3)] [ROWS (default 100)] [EPOCHS (default 2)]
set -euo pipefail
unset CDPATH  # cd DIR must not go to a folder of that name on CDPATH
root=$(cd "$(dirname "$0")/.." && pwd)
runs=${1:-3}
rows=${2:-100}
epochs=${3:-2}
copies=1
# shellcheck source=bench/common.sh
source "$root/bench/common.sh"
py="$root/bench/finetune_bench.py"
tb="$root/build/bench/train_bench"
for len in 70 300; do  # cached whole (make renames a finished table) under a name with ROWS
  [ -s "$work/ft-$len-$rows.csv" ] || "$python" "$py" make "$g" "$work/ft-$len-$rows.csv" "$rows" "$len"
done
bench_precisions
echo "== fine-tuning, logo config, $rows sequences x $epochs epochs, median of $runs runs ($precisions)"
{
  for t in 1 2; do "$tb" peaks "$t"; done
  for len in 70 300; do
    for batch in 5 15; do
      for t in 1 2; do
        for _ in $(seq "$runs"); do
          for p in $precisions; do
            logged "$bin" finetune --model random --config logo --train "$work/ft-$len-$rows.csv" --test "$work/ft-$len-$rows.csv" \
              --out "$run/ft-out" --force --epochs "$epochs" --batch "$batch" --threads "$t" --precision "$p" \
              >"$run/summary.json"
            LEN=$len BATCH=$batch T=$t P=$p "$python" -c 'import json, os, sys
s = json.loads(sys.stdin.read().splitlines()[-1])
print(json.dumps({"impl": "genemask", "len": int(os.environ["LEN"]), "batch": int(os.environ["BATCH"]),
                  "threads": int(os.environ["T"]), "precision": os.environ["P"],
                  "train_examples_per_s": s["train_examples_per_s"]}))' <"$run/summary.json"
            "$python" "$py" run "$work/ft-$len-$rows.csv" logo "$t" "$batch" "$epochs" "$p" |
              LEN=$len "$python" -c 'import json, os, sys
r = json.loads(sys.stdin.read())
r["len"] = int(os.environ["LEN"])
print(json.dumps(r))'
          done
        done
      done
    done
  done
} > "$run/finetune.jsonl"
# rows: 2 peaks, and 2 lengths x 2 batches x 2 thread counts x runs x precisions x 2 implementations
read -ra ps <<<"$precisions"
"$python" "$py" summary "$run/finetune.jsonl" $((2 + 2 * 2 * 2 * runs * ${#ps[@]} * 2))
