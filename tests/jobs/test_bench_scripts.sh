#!/usr/bin/env bash
# The benchmark scripts keep the user's data and publish only whole figures, on tiny inputs
# (a fake GENEMASK_BIN where a failure is needed): bench/sweep_bench.sh leaves a folder of the
# user's under BENCH_DIR alone, two runs at once on one BENCH_DIR both finish, and nothing of
# a run stays there; a sweep with jobs missing, and bench/corpus_bench.sh with a run failing
# partway, print no figure; count_bench.sh's cached .gz appears whole or not at all;
# make-bench-genome.py and finetune_bench.py make refuse an output that is their input, and
# two make-bench-genome.py at once write one whole genome; make-bench-genomes.py gives the
# same corpus whichever of its files were there, keeping the whole ones; finetune_bench.py
# summary refuses a results file short of rows; graphs_bench.sh on the CPU prints its figures
# (the fill and shapes among them); count_bench.sh prints its ratios only once every timed
# output (KMC, jellyfish, genemask at 2 ranks) equals genemask's counts, and names each one
# that differs; packing_bench.sh names a failed pretrain with its message and takes the rate
# of the last STEPS/2 steps. Uses the default chr22 (made if missing).
# shellcheck disable=SC2016,SC2317  # check's conditions are eval'ed (expanded there); only and same_corpus run through check
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
py=${PYTHON:-python3}
bin=${GENEMASK_BIN:-"$repo/build/src/cli/genemask"}
chr22=$("$repo/scripts/default-genome.sh")  # made once if missing (the scripts use it too)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/genemask-benchtest-XXXXXX")
if [ "${KEEP:-0}" != 1 ]; then trap 'rm -rf "$tmp"' EXIT; else echo "files kept in $tmp"; fi
export GENEMASK_PYTHON=$py OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fail=0
check() {  # DESCRIPTION COMMAND...: COMMAND must succeed
  local d=$1
  shift
  if "$@"; then echo "ok: $d"; else echo "FAILED: $d" >&2; fail=1; fi
}
only() {  # DIR NAMES...: DIR holds exactly NAMES (nothing of a run left behind)
  local d=$1
  shift
  [ "$(cd "$d" && find . -mindepth 1 -maxdepth 1 -printf '%f\n' | sort | tr '\n' ' ')" = "$(printf '%s\n' "$@" | sort | tr '\n' ' ')" ]
}
# A tiny benchmark genome (300 kb of chr22's bases) in the cache, so the scripts do not build
# the 22 Mbp one.
{ echo ">chr22"; awk 'NR > 1 && !/^N+$/ { print; if (++n == 5000) exit }' "$chr22"; } >"$tmp/g.fa"
"$py" "$repo/bench/make-bench-genome.py" "$tmp/g.fa" "$tmp/bench-1.fa" 3 2>/dev/null

# sweep_bench.sh: a folder of the user's named sweep under BENCH_DIR, two runs at once.
bd=$tmp/sweep-bd
mkdir -p "$bd/sweep"
echo mine >"$bd/sweep/precious.txt"
BENCH_DIR=$bd GENEMASK_BIN=$bin bash "$repo/bench/sweep_bench.sh" 0.01 1 >"$tmp/sweep1.log" 2>&1 &
pid=$!
rc=0
BENCH_DIR=$bd GENEMASK_BIN=$bin bash "$repo/bench/sweep_bench.sh" 0.01 1 >"$tmp/sweep2.log" 2>&1 || rc=$?
wait "$pid" || rc=$?
check "sweep_bench.sh: two runs at once on one BENCH_DIR both finish" [ "$rc" = 0 ]
check "sweep_bench.sh: figures printed" grep -q "^worker utilisation" "$tmp/sweep2.log"
check "sweep_bench.sh: the user's BENCH_DIR/sweep kept, nothing of the runs left" \
  eval '[ "$(cat "$bd/sweep/precious.txt")" = mine ] && only "$bd" sweep'
# A sweep that ends without every job done (exit 0, as without --strict): no figure.
cat >"$tmp/fake-sweep" <<'EOF'
#!/usr/bin/env bash
if [ "${OMPI_COMM_WORLD_RANK:-0}" = 0 ]; then
  echo '{"ok": 3, "failed": 77, "seconds": 1.0, "overhead_ms_per_job": 0.1, "write_ms_per_job": 0.1, "utilisation": {"mean": 1.0, "per_worker": [1, 1, 1, 1]}}'
fi
EOF
chmod +x "$tmp/fake-sweep"
rc=0
BENCH_DIR=$bd GENEMASK_BIN=$tmp/fake-sweep bash "$repo/bench/sweep_bench.sh" 0.01 1 >"$tmp/sweep3.log" 2>&1 || rc=$?
check "sweep_bench.sh: a sweep short of jobs fails and prints no figure" \
  eval '[ "$rc" != 0 ] && ! grep -q "^jobs:" "$tmp/sweep3.log"'

# corpus_bench.sh with a genemask that fails on its 2nd call: no median of the one run before.
bd=$tmp/corpus-bd
mkdir -p "$bd"
cp "$tmp/bench-1.fa" "$bd/"
cat >"$tmp/fail2" <<EOF
#!/usr/bin/env bash
n=\$(( \$(cat "$tmp/calls" 2>/dev/null || echo 0) + 1 ))
echo "\$n" >"$tmp/calls"
if [ "\$n" = 2 ]; then echo "fail2: call \$n fails" >&2; exit 1; fi
exec $(printf '%q' "$bin") "\$@"
EOF
chmod +x "$tmp/fail2"
rc=0
BENCH_DIR=$bd GENEMASK_BIN=$tmp/fail2 GENEMASK_MASK_BENCH=/bin/true bash "$repo/bench/corpus_bench.sh" 1 3 >"$tmp/corpus.log" 2>&1 || rc=$?
check "corpus_bench.sh: a run failing partway stops it before any median" \
  eval '[ "$rc" != 0 ] && [ "$(cat "$tmp/calls")" = 2 ] && ! grep -q "rank(s):" "$tmp/corpus.log"'
check "corpus_bench.sh: nothing of the run left in BENCH_DIR" only "$bd" bench-1.fa

# graphs_bench.sh on the CPU (GRAPHS_DEVICE=cpu: the fixed shapes without capture against the
# eager step), a tiny model: its figures, with the fill and the shapes; nothing left behind.
bd=$tmp/graphs-bd
mkdir -p "$bd"
cp "$tmp/bench-1.fa" "$bd/"
echo '{"vocab_size": 4101, "hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2,
 "intermediate_size": 32, "max_position_embeddings": 512}' >"$tmp/graphs-tiny.json"
rc=0
BENCH_DIR=$bd GENEMASK_BIN=$bin GRAPHS_DEVICE=cpu bash "$repo/bench/graphs_bench.sh" 2 1 "$tmp/graphs-tiny.json" 3 \
  >"$tmp/graphs.log" 2>&1 || rc=$?
check "graphs_bench.sh: the CPU's fixed shapes against the eager step" \
  eval '[ "$rc" = 0 ] && grep -Eq "^$tmp/graphs-tiny.json +off +[0-9]+, on +[0-9]+ real tokens/s \(medians of 1; on: static \(testing\)\); on / off [0-9.]+x; .*fill [0-9.]+ -> [0-9.]+, rows a micro-batch [0-9.]+ -> [0-9.]+; on: [1-9][0-9]* shapes, [1-9][0-9]* set-up steps" "$tmp/graphs.log"'
check "graphs_bench.sh: nothing of the run left in BENCH_DIR" only "$bd" bench-1.fa
rc=0
GRAPHS_DEVICE=tpu bash "$repo/bench/graphs_bench.sh" >"$tmp/graphs-bad.log" 2>&1 || rc=$?
check "graphs_bench.sh: GRAPHS_DEVICE=tpu refused" \
  eval '[ "$rc" = 2 ] && grep -q "GRAPHS_DEVICE must be cuda or cpu, got .tpu." "$tmp/graphs-bad.log"'

# count_bench.sh: a gzip that fails halfway leaves no .gz (nor a temporary) for the next run.
mkdir -p "$tmp/fakebin"
printf '#!/bin/sh\nhead -c 1000 "$2"\nexit 1\n' >"$tmp/fakebin/gzip"
chmod +x "$tmp/fakebin/gzip"
rc=0
PATH=$tmp/fakebin:$PATH BENCH_DIR=$bd GENEMASK_BIN=$bin bash "$repo/bench/count_bench.sh" 1 1 >"$tmp/count.log" 2>&1 || rc=$?
check "count_bench.sh: a failed gzip fails the run and leaves no part of bench-1.fa.gz" \
  eval '[ "$rc" != 0 ] && only "$bd" bench-1.fa'

# count_bench.sh: every output whose time it reports is held against genemask's 1-rank
# counts (KMC at 1 and 2 threads, jellyfish at each k, genemask at 2 ranks) before a ratio.
bd=$tmp/count-bd
mkdir -p "$bd"
cp "$tmp/bench-1.fa" "$bd/"
rc=0
BENCH_DIR=$bd GENEMASK_BIN=$bin bash "$repo/bench/count_bench.sh" 1 1 >"$tmp/count-ok.log" 2>&1 || rc=$?
check "count_bench.sh: 23 peer outputs and the 2-rank counts identical, then the ratios" \
  eval '[ "$rc" = 0 ] && grep -q ": 23 outputs identical$" "$tmp/count-ok.log" && grep -q "c2.h5: identical for all 10 k$" "$tmp/count-ok.log" && [ "$(grep -c "^ratio " "$tmp/count-ok.log")" = 4 ]'
# The same with one count changed in KMC's 1-thread output, in jellyfish's 2-thread k=3 one,
# and in genemask's 2-rank counts.h5: all three named, no ratio, exit 1.
mkdir -p "$tmp/diffbin"
cat >"$tmp/diffbin/kmc_tools" <<EOF
#!/usr/bin/env bash
$(command -v kmc_tools) "\$@" || exit
case \$2 in *kmc10-t1) sed -i '1s/[0-9]*\$/999999/' "\$4" ;; esac
EOF
cat >"$tmp/diffbin/jellyfish" <<EOF
#!/usr/bin/env bash
if [ "\$1" = dump ]; then
  case \$3 in *j-t2-k3.jf) $(command -v jellyfish) "\$@" | sed '1s/[0-9]*\$/999999/'; exit ;; esac
fi
exec $(command -v jellyfish) "\$@"
EOF
cat >"$tmp/diffbin/genemask" <<EOF
#!/usr/bin/env bash
$(printf '%q' "$bin") "\$@" || exit
out=; prev=
for a in "\$@"; do [ "\$prev" = --out ] && out=\$a; prev=\$a; done
case \$out in
  *c2.h5) [ "\${OMPI_COMM_WORLD_RANK:-0}" != 0 ] ||
    $(printf '%q' "$py") -c 'import h5py, sys; f = h5py.File(sys.argv[1], "r+"); f["counts/k4"][0] += 1' "\$out" ;;
esac
EOF
chmod +x "$tmp/diffbin/kmc_tools" "$tmp/diffbin/jellyfish" "$tmp/diffbin/genemask"
rc=0
PATH=$tmp/diffbin:$PATH BENCH_DIR=$bd GENEMASK_BIN=$tmp/diffbin/genemask bash "$repo/bench/count_bench.sh" 1 1 \
  >"$tmp/count-diff.log" 2>&1 || rc=$?
check "count_bench.sh: counts that differ (KMC 1 thread, jellyfish k=3, genemask 2 ranks) named, no ratio" \
  eval '[ "$rc" = 1 ] && ! grep -q "^ratio" "$tmp/count-diff.log" && grep -q "kmc10-t1.txt k=10: DIFFERENT in 1 10-mers$" "$tmp/count-diff.log" &&
    grep -q "j-t2-k3.txt k=3: DIFFERENT in 1 3-mers$" "$tmp/count-diff.log" && grep -q "c2.h5: DIFFERENT in k=4: 1 4-mers$" "$tmp/count-diff.log" &&
    grep -q "^count_bench: outputs differ from genemask.s 1-rank counts (or could not be read): no ratios$" "$tmp/count-diff.log"'
check "count_bench.sh: nothing of the runs left in BENCH_DIR" only "$bd" bench-1.fa bench-1.fa.gz bench-1.fa.bgz
# kmc-equal.py alone: "DIFFERENT" exits 1, an unreadable dump 2 (genomes_bench.sh stops on both).
printf 'AAAA 1\n' >"$tmp/k4.txt"
printf 'AAAA x\n' >"$tmp/k4-bad.txt"
"$bin" count --genome "$tmp/g.fa" --out "$tmp/eq.h5" --quiet >/dev/null
rc=0
"$py" "$repo/bench/kmc-equal.py" "$tmp/eq.h5" "$tmp/k4.txt" >"$tmp/eq.log" 2>&1 || rc=$?
rc2=0
"$py" "$repo/bench/kmc-equal.py" "$tmp/eq.h5" "$tmp/k4-bad.txt" >>"$tmp/eq.log" 2>&1 || rc2=$?
eq_ok=0
if [ "$rc" = 1 ] && [ "$rc2" = 2 ] && grep -q "k4.txt k=4: DIFFERENT in [0-9]* 4-mers$" "$tmp/eq.log"; then eq_ok=1; fi
check "kmc-equal.py: counts that differ exit 1, a dump it cannot read 2" [ "$eq_ok" = 1 ]

# packing_bench.sh: a pretrain that fails is named with its own message (not Python's
# JSONDecodeError); the rates are of the last STEPS/2 steps (--log-every), STEPS < 2 refused.
bd=$tmp/packing-bd
mkdir -p "$bd"
cp "$tmp/bench-1.fa" "$bd/"
rc=0
BENCH_DIR=$bd GENEMASK_BIN=$bin bash "$repo/bench/packing_bench.sh" 2 1 nosuch >"$tmp/packing-bad.log" 2>&1 || rc=$?
check "packing_bench.sh: a failed pretrain named with genemask's message, no JSONDecodeError" \
  eval '[ "$rc" = 1 ] && grep -q "^packing_bench: this command failed (exit code [1-9][0-9]*): .* pretrain " "$tmp/packing-bad.log" &&
    grep -q "nosuch" "$tmp/packing-bad.log" && ! grep -q JSONDecodeError "$tmp/packing-bad.log"'
cat >"$tmp/pretrain-args" <<EOF
#!/usr/bin/env bash
[ "\$1" = pretrain ] || exec $(printf '%q' "$bin") "\$@"
echo "\$*" >>$(printf '%q' "$tmp/pretrain-args.txt")
prev=
for a in "\$@"; do [ "\$prev" = --packing ] && pk=\$a; [ "\$prev" = --precision ] && pr=\$a; prev=\$a; done
echo "{\"precision\": \"\$pr\", \"packing\": \"\$pk\", \"tokens_per_s\": 100.0}"
EOF
chmod +x "$tmp/pretrain-args"
rc=0
BENCH_DIR=$bd GENEMASK_BIN=$tmp/pretrain-args bash "$repo/bench/packing_bench.sh" 6 1 logo >"$tmp/packing-steps.log" 2>&1 || rc=$?
check "packing_bench.sh: 6 steps logged every 3, the rates of the last 3" \
  eval '[ "$rc" = 0 ] && grep -q "6 steps (rates of the last 3)" "$tmp/packing-steps.log" &&
    [ "$(grep -c -- "--steps 6 .*--log-every 3 " "$tmp/pretrain-args.txt")" = "$(wc -l <"$tmp/pretrain-args.txt")" ] &&
    grep -q "on / off 1.00x" "$tmp/packing-steps.log"'
rc=0
BENCH_DIR=$bd bash "$repo/bench/packing_bench.sh" 1 >"$tmp/packing-1.log" 2>&1 || rc=$?
check "packing_bench.sh: STEPS 1 refused" \
  eval '[ "$rc" = 2 ] && grep -q "STEPS must be an integer of at least 2, got .1." "$tmp/packing-1.log"'
check "packing_bench.sh: nothing of the runs left in BENCH_DIR" only "$bd" bench-1.fa

# make-bench-genome.py: the input as output (itself, or a link to it) refused, input whole.
cp "$tmp/g.fa" "$tmp/g.copy"
ln -s g.fa "$tmp/link.fa"
rc=0
"$py" "$repo/bench/make-bench-genome.py" "$tmp/g.fa" "$tmp/g.fa" 2 2>/dev/null || rc=$((rc + 1))
"$py" "$repo/bench/make-bench-genome.py" "$tmp/g.fa" "$tmp/link.fa" 2 2>/dev/null || rc=$((rc + 1))
check "make-bench-genome.py: an output that is the input refused, the input kept" \
  eval '[ "$rc" = 2 ] && cmp -s "$tmp/g.fa" "$tmp/g.copy"'
# Two at once into one file: both finish, and the file is one whole genome.
mkdir "$tmp/two"
"$py" "$repo/bench/make-bench-genome.py" "$tmp/g.fa" "$tmp/two/b.fa" 40 2>/dev/null &
pid=$!
rc=0
"$py" "$repo/bench/make-bench-genome.py" "$tmp/g.fa" "$tmp/two/b.fa" 40 2>/dev/null || rc=$?
wait "$pid" || rc=$?
"$py" "$repo/bench/make-bench-genome.py" "$tmp/g.fa" "$tmp/one.fa" 40 2>/dev/null
check "make-bench-genome.py: two at once into one file write one whole genome" \
  eval '[ "$rc" = 0 ] && cmp -s "$tmp/one.fa" "$tmp/two/b.fa" && only "$tmp/two" b.fa'

# make-bench-genomes.py: the same corpus whichever files were there; whole ones kept.
same_corpus() { for f in sp01.fa sp02.fa sp03.fa sp04.fa sp05.fa; do cmp -s "$tmp/c1/$f" "$tmp/c2/$f" || return; done; }
"$py" "$repo/bench/make-bench-genomes.py" "$tmp/c1" 5 6 >/dev/null
cp -r "$tmp/c1" "$tmp/c2"
rm "$tmp/c2/sp02.fa"
truncate -s 1000 "$tmp/c2/sp03.fa"
ino=$(stat -c %i "$tmp/c2/sp04.fa")
"$py" "$repo/bench/make-bench-genomes.py" "$tmp/c2" 5 6 >/dev/null
check "make-bench-genomes.py: a missing and a cut genome made again, the same corpus" \
  same_corpus
check "make-bench-genomes.py: a whole genome kept, not written again" [ "$(stat -c %i "$tmp/c2/sp04.fa")" = "$ino" ]
cp "$tmp/c2/sp01.fa" "$tmp/sp01.copy"
rc=0
"$py" "$repo/bench/make-bench-genomes.py" "$tmp/c2" 5 6 "$tmp/c2/sp01.fa" >/dev/null 2>&1 || rc=$?
check "make-bench-genomes.py: a REAL.fa that is one of its outputs refused, kept" \
  eval '[ "$rc" != 0 ] && cmp -s "$tmp/c2/sp01.fa" "$tmp/sp01.copy"'

# finetune_bench.py: make refuses the genome as its table; summary refuses a short file.
rc=0
"$py" "$repo/bench/finetune_bench.py" make "$tmp/g.copy" "$tmp/g.copy" 10 70 2>/dev/null || rc=$?
check "finetune_bench.py make: an output that is the genome refused, the genome kept" \
  eval '[ "$rc" != 0 ] && cmp -s "$tmp/g.fa" "$tmp/g.copy"'
"$py" "$repo/bench/finetune_bench.py" make "$tmp/bench-1.fa" "$tmp/ft.csv" 10 70
check "finetune_bench.py make: the table whole" [ "$(wc -l <"$tmp/ft.csv")" = 11 ]
echo '{"impl": "pytorch", "len": 70, "batch": 5, "threads": 1, "precision": "fp32", "train_examples_per_s": 1.0}' >"$tmp/ft.jsonl"
rc=0
"$py" "$repo/bench/finetune_bench.py" summary "$tmp/ft.jsonl" 34 >"$tmp/ft.log" 2>&1 || rc=$?
check "finetune_bench.py summary: a results file short of rows refused" eval '[ "$rc" != 0 ] && ! grep -q "bp" "$tmp/ft.log"'

exit "$fail"
