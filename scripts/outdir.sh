#!/usr/bin/env bash
# Sourced by scripts/demo.sh and bench/masking_study.sh: an OUTDIR that is the script's own,
# and files written into it whole, never over a file that is not the script's.
# Expects: who (the script's name in messages), what (what it runs: "demo", "study").
# Sets: tmp (newtmp's temporary), tmps (the temporaries, removed at exit unless renamed).
# shellcheck disable=SC2154  # who and what are set by the sourcing script
tmps=()
trap 'rm -f "${tmps[@]}"' EXIT
# settle TMP FILE: TMP (in FILE's folder) becomes FILE, whole; a FILE that is there must
# already hold the same bytes (a rerun), else it is not ours: refused, left as it is.
settle() {
  if [ ! -e "$2" ]; then
    chmod 644 "$1"
    mv "$1" "$2"
  elif cmp -s "$1" "$2"; then
    rm "$1"
  else
    echo "$who: $2 differs from what the $what writes there: not overwritten (remove it, or use another OUTDIR)" >&2
    exit 1
  fi
}
# newtmp FILE: a new temporary beside FILE, in $tmp (removed at exit unless renamed).
newtmp() { tmp=$(mktemp "$1.tmp.XXXXXX"); tmps+=("$tmp"); }
# put FILE: stdin, settled as FILE.
put() { newtmp "$1"; cat >"$tmp"; settle "$tmp" "$1"; }
# conf_word VALUE: VALUE as one shell word for a pipeline config line (which the pipeline
# sources): bare when it has only plain characters, "quoted" when it also has spaces, else
# 'quoted' with its single quotes escaped. A path with a space, a quote or a $ stays whole.
conf_word() {
  if [[ $1 =~ ^[A-Za-z0-9_./:+@%=,-]+$ ]]; then
    printf '%s' "$1"
  elif [[ $1 =~ ^[A-Za-z0-9_./:+@%=,\ -]*$ ]]; then
    printf '"%s"' "$1"
  else
    printf "'%s'" "${1//\'/\'\\\'\'}"
  fi
}
# claim_outdir OUT MARKER SETTINGS: one run at a time in OUT (a lock on the directory, held
# until the script exits), and OUT new, empty, or made by this script with SETTINGS, which
# OUT/MARKER records. One made with other settings is refused with the difference: its
# stages would resume or be skipped with results of the old settings, mixed into the new.
claim_outdir() {
  local out=$1 marker=$1/$2 settings=$3
  exec 9<"$out"
  flock -n 9 || { echo "$who: another $what is running in $out" >&2; exit 1; }
  if [ -e "$marker" ]; then
    if ! cmp -s "$marker" <(printf '%s\n' "$settings"); then
      echo "$who: $out was made with other settings (<: its $marker, >: this run's):" >&2
      diff "$marker" <(printf '%s\n' "$settings") >&2 || true
      echo "$who: remove $out for a fresh run, or use another OUTDIR" >&2
      exit 1
    fi
  elif [ -n "$(ls -A "$out")" ]; then
    echo "$who: $out is not empty and not a $what's OUTDIR (no $2): use a new or empty OUTDIR" >&2
    exit 1
  else
    put "$marker" <<<"$settings"
  fi
}
