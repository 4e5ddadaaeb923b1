#!/usr/bin/env bash
# Builds the default genome: real human chr22 (hg19, soft-masked, N gaps) from the Debian
# package maffilter-examples (downloaded, not installed). Prints the FASTA path.
# Usage: scripts/default-genome.sh [DIR]   (default DIR: data/default)
set -euo pipefail
unset CDPATH  # cd DIR must not go to a folder of that name on CDPATH
here=$(cd "$(dirname "$0")" && pwd)
dir=${1:-"$here/../data/default"}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
fa="$dir/chr22.fa"
if [ -e "$fa" ]; then
  # Written whole under its name (a temporary renamed), so an empty one is not this script's.
  [ -s "$fa" ] || { echo "default-genome: $fa is empty and not made here: not written over" >&2; exit 1; }
  echo "$fa"
  exit 0
fi
maf_rel=usr/share/doc/maffilter/examples/Gorilla/Compara.epo_5_catarrhini_hsap-projected.chr22.subset.nogap.cleaned_aln.maf.gz
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && apt-get download maffilter-examples >/dev/null 2>&1) || {
  echo "default-genome: 'apt-get download maffilter-examples' failed (run 'apt-get update' first?)" >&2; exit 1; }
dpkg-deb --fsys-tarfile "$work"/maffilter-examples_*.deb | tar -x -C "$work" "./$maf_rel"
/usr/bin/python3 "$here/make-default-genome.py" "$work/$maf_rel" "$fa"
echo "$fa"
