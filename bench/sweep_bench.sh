#!/usr/bin/env bash
# Sweep driver benchmark (simulated jobs, `genemask sweep --simulate`), 4 workers
# (mpirun -np 5: rank 0 manages):
#  1. trivial jobs (0 s): the driver's own cost per job in ms (manager: result arrived ->
#     next job sent; and the fsync'ed append of the result line) and jobs/s end to end;
#  2. a realistic mix: durations proportional to shots (10..1000, the paper's five shot
#     counts, 10 seeds, 4 tasks), SECONDS per 1000-shot job: worker utilisation (busy / wall)
#     and the makespan against its lower bound max(total work / workers, longest job).
# Usage: bench/sweep_bench.sh [SECONDS_PER_1000_SHOTS (default 1)] [TRIVIAL_JOBS_SEEDS (default 50)]
set -euo pipefail
unset CDPATH  # cd DIR must not go to a folder of that name on CDPATH
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${GENEMASK_BIN:-"$root/build/src/cli/genemask"}
per1000=${1:-1}
seeds=${2:-50}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# This run's own folder under BENCH_DIR, removed on exit (the user's files and concurrent
# runs there are left alone).
mkdir -p "${BENCH_DIR:-/tmp/genemask-bench}"
work=$(mktemp -d "${BENCH_DIR:-/tmp/genemask-bench}/sweep.XXXXXX")
trap 'rm -rf "$work"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
printf 'sequence,label\nACGTACGTAC,0\nTTGACCATGA,1\n' > "$work/t.csv"
# plan NAME MODELS TASKS SEEDS
plan() {
  python3 - "$work/$1" "$2" "$3" "$4" <<'PY'
import json, sys
path, models, tasks, seeds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
json.dump({"models": [{"name": f"m{i}", "path": "random"} for i in range(models)],
           "tasks": [{"name": f"t{i}", "train": "t.csv", "test": "t.csv"} for i in range(tasks)],
           "shots": [10, 50, 100, 500, 1000], "seeds": seeds}, open(path, "w"))
PY
}
plan trivial.json 4 4 "$seeds"
plan mix.json 1 4 10
sweep() {  # PLAN OUT SECONDS: the summary line to OUT.log (read once the sweep has succeeded)
  mpirun -np 5 --oversubscribe "$bin" sweep --plan "$work/$1" --out "$work/$2" --simulate "$3" --quiet >"$work/$2.log"
}

echo "== trivial jobs (0 s), 4 workers: $(nproc) cores, results in $work (fsync per line; removed at exit)"
sweep trivial.json trivial 0
python3 - "$work/trivial.log" "$((4 * 4 * 5 * seeds))" <<'PY'
import json, sys
s = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
if s["ok"] != int(sys.argv[2]):  # a figure only from a whole sweep
    sys.exit(f"sweep_bench: {s['ok']} jobs done of {sys.argv[2]}: no figures")
print("jobs: {}  wall: {:.2f} s  jobs/s: {:.0f}".format(s["ok"], s["seconds"], s["ok"] / s["seconds"]))
print("driver cost per job: {:.3f} ms dispatch (result in -> next job out) + {:.3f} ms append+fsync".format(
    s["overhead_ms_per_job"], s["write_ms_per_job"]))
PY

echo "== realistic mix: shots 10..1000 x 10 seeds x 4 tasks, $per1000 s per 1000-shot job, 4 workers"
sweep mix.json mix "$per1000"
python3 - "$work/mix.log" "$per1000" <<'PY'
import json, sys
per1000, workers = float(sys.argv[2]), 4
s = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
if s["ok"] != 4 * 10 * 5:  # a figure only from a whole sweep
    sys.exit(f"sweep_bench: {s['ok']} jobs done of {4 * 10 * 5}: no figures")
work = 4 * 10 * sum([10, 50, 100, 500, 1000]) / 1000 * per1000
bound = max(work / workers, per1000)
print("jobs: {}  wall: {:.2f} s  lower bound: {:.2f} s  (makespan / bound {:.3f})".format(
    s["ok"], s["seconds"], bound, s["seconds"] / bound))
print("worker utilisation: mean {:.3f}, per worker {}".format(
    s["utilisation"]["mean"], " ".join("{:.3f}".format(u) for u in s["utilisation"]["per_worker"])))
print("driver cost per job: {:.3f} ms dispatch + {:.3f} ms append+fsync".format(
    s["overhead_ms_per_job"], s["write_ms_per_job"]))
PY
