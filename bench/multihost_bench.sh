#!/usr/bin/env bash
# Across hosts against one host, on the 3-host test cluster of tests/jobs/cluster.sh (network
# namespaces on one machine; needs root). In one run:
#  1. the gradient all-reduce alone (build/bench/allreduce_bench: hpc::allreduce_sum_f32, as
#     the trainer calls it) on 3 ranks: one host (shared memory) vs 3 hosts (TCP), with the
#     bytes each host sent per call (its eth0 counters) against the ring all-reduce's closed
#     form 2 (p-1)/p x 4 x FLOATS;
#  2. the same pretraining (3 ranks, a small BERT, fixed steps) on 1, 2 and 3 hosts: tokens/s
#     of the last STEPS/2 steps (the last log window: the cold first steps left out) and the
#     ratio to one host.
# All hosts share this machine's cores, so the figures show what crossing hosts costs (TCP
# instead of shared memory), not what more nodes gain.
# Usage: bench/multihost_bench.sh [STEPS (default 40, at least 2)]
set -euo pipefail
unset CDPATH  # cd DIR must not go to a folder of that name on CDPATH
root=$(cd "$(dirname "$0")/.." && pwd)
build=${GENEMASK_BUILD_DIR:-$root/build}
bin=${GENEMASK_BIN:-$build/src/cli/genemask}
ab=$build/bench/allreduce_bench
py=${PYTHON:-$root/.venv/bin/python3}
steps=${1:-40}
case $steps in *[!0-9]* | '' | 0 | 1) echo "multihost_bench: STEPS must be an integer of at least 2, got '$steps'" >&2; exit 2 ;; esac
[ "$(id -u)" = 0 ] || { echo "multihost_bench: needs root (network namespaces, slurmd)" >&2; exit 2; }
[ -x "$ab" ] || { echo "multihost_bench: $ab missing: run scripts/build.sh" >&2; exit 2; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/genemask-mhbench-XXXXXX")
chmod 755 "$tmp"
# shellcheck source=tests/jobs/cluster.sh
source "$root/tests/jobs/cluster.sh"
# shellcheck source=tests/jobs/tiny_pipeline.sh
source "$root/tests/jobs/tiny_pipeline.sh"
done_() {
  local rc=$?
  cluster_down
  rm -rf "$tmp"
  return "$rc"
}
cluster_up "$tmp/cluster" 3 2>/dev/null
trap done_ EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
net=(env "OMPI_MCA_btl=tcp,vader,self" "OMPI_MCA_btl_tcp_if_include=$CLUSTER_SUBNET"
  "OMPI_MCA_oob_tcp_if_include=$CLUSTER_SUBNET")
# job NAME SBATCH-OPTIONS... -- CMD...: runs CMD in an allocation and waits; output $tmp/NAME.out.
job() {
  local name=$1 opts=()
  shift
  while [ "$1" != -- ]; do opts+=("$1"); shift; done
  shift
  { echo '#!/usr/bin/env bash'; printf '%q ' "$@"; echo; } >"$tmp/$name.sh"
  on_node 1 "${net[@]}" sbatch --parsable --wait --output="$tmp/$name.out" --chdir="$tmp" "${opts[@]}" \
    "$tmp/$name.sh" >/dev/null && return
  { echo "multihost_bench: job $name failed:$(printf ' %q' "$@")"; echo "its last output:"; tail -n 20 "$tmp/$name.out"; } >&2
  exit 1
}
# shellcheck disable=SC2016  # awk's fields
tx() { on_node "$1" awk '$1 == "eth0:" {print $10}' /proc/net/dev; }
echo "== machine: $(nproc) cores, $(lscpu | sed -n 's/Model name: *//p'); hosts: 3 network namespaces on it"

echo "== 1. gradient all-reduce, 3 ranks (median of 20 calls)"
printf '%-10s %-22s %10s %10s %14s %14s %8s\n' floats layout "s/call" Gbit/s "sent/host/call" "ring closed" ratio
for n in 1048576 16777216; do
  one=$(mpiexec --oversubscribe -n 3 "$ab" "$n" 20 | tail -n 1)
  b1=$(tx 1) b2=$(tx 2) b3=$(tx 3)
  job "ar-$n" -N 3 --ntasks-per-node=1 -- mpirun "$ab" "$n" 20
  three=$(tail -n 1 "$tmp/ar-$n.out")
  sent=$((($(tx 1) - b1 + $(tx 2) - b2 + $(tx 3) - b3) / 3 / 23))  # 20 timed + 3 warm-up calls
  "$py" - "$one" "$three" "$sent" <<'PY'
import json, sys
one, three, sent = json.loads(sys.argv[1]), json.loads(sys.argv[2]), int(sys.argv[3])
ring = three["ring_bytes_per_rank"]
for name, r in (("1 host (shm)", one), ("3 hosts (TCP)", three)):
    extra = (f"{sent:14d} {ring:14.0f} {sent / ring:8.2f}" if r is three else f"{'':14s} {ring:14.0f} {'':8s}")
    print(f"{r['floats']:<10d} {name:<22s} {r['median_s']:10.4f} {r['gbit_per_s']:10.2f} {extra}")
print(f"{'':10s} 3 hosts / 1 host: {three['median_s'] / one['median_s']:.2f}x the time per call")
PY
done

echo "== 2. the same pretraining (3 ranks, $steps steps) on 1, 2 and 3 hosts"
tiny_pipeline_inputs "$tmp" "$py"
"$py" - "$tmp/small.json" <<'PY'
import json, sys
json.dump({"model_type": "bert", "vocab_size": 4101, "hidden_size": 256, "num_hidden_layers": 2,
           "num_attention_heads": 4, "intermediate_size": 1024, "max_position_embeddings": 512,
           "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1}, open(sys.argv[1], "w"))
PY
(cd "$tmp" && "$bin" shards --genome genome.fa --out shards --max-tokens 120 --min-tokens 60 >/dev/null)
pre=("$bin" pretrain --shards "$tmp/shards" --masking random --model "$tmp/small.json" --steps "$steps" --warmup 1
  --batch-per-rank 8 --grad-accum 1 --checkpoint-every 100000 --eval-every 0 --threads 1 --log-every "$(((steps + 1) / 2))")
if ! mpiexec --oversubscribe -n 3 "${pre[@]}" --out "$tmp/pre-1" >"$tmp/pre-1.out" 2>"$tmp/pre-1.err"; then
  { echo "multihost_bench: the one-host pretraining failed:$(printf ' %q' mpiexec --oversubscribe -n 3 "${pre[@]}")"
    echo "its last messages:"; tail -n 20 "$tmp/pre-1.err"; } >&2
  exit 1
fi
job pre-2 -N 2 -n 3 -- mpirun "${pre[@]}" --out "$tmp/pre-2"
job pre-3 -N 3 -n 3 -- mpirun "${pre[@]}" --out "$tmp/pre-3"
"$py" - "$tmp" <<'PY'
import json, sys
def summary(path):
    return [json.loads(l) for l in open(path) if l.startswith("{") and '"command":"pretrain"' in l][-1]
base = None
for hosts in (1, 2, 3):
    s = summary(f"{sys.argv[1]}/pre-{hosts}.out")
    base = base or s["tokens_per_s"]
    placed = sorted({p["host"] for p in s["layout"]})
    print(f"{hosts} host(s) {placed}: {s['tokens_per_s']:9.0f} tokens/s of the last steps  ({s['tokens_per_s'] / base:.2f}x one host)")
PY
