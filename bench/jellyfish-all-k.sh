#!/usr/bin/env bash
# jellyfish has no multi-k mode: count k = 1..10 one after another, each k in a file of its
# own (OUT-k1.jf .. OUT-k10.jf), so that every one can be checked against genemask's counts.
# Usage: jellyfish-all-k.sh THREADS FASTA OUT
set -euo pipefail
for k in 1 2 3 4 5 6 7 8 9 10; do jellyfish count -m "$k" -s 4M -t "$1" -o "$3-k$k.jf" "$2"; done
