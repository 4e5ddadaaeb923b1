#!/usr/bin/env bash
# Packs a built genemask for a GPU node that has a CUDA PyTorch but neither a compiler nor
# the libraries genemask links (Open MPI, HDF5, Boost, fmt, ...): a rented cloud GPU, a
# node cut off from the network, a node whose build would cost GPU hours. On the node,
# in the same source tree (the bundle inside it or beside it):
#   scripts/gpu-check.sh --no-build --build DIR/build --prefix DIR/deps
#
# Usage: scripts/gpu-bundle.sh DIR [options]
#   DIR              a new directory (an existing one is refused: nothing is written over)
#   --build BUILD    the build to pack (default $GENEMASK_BUILD_DIR, else ./build, as
#                    scripts/build.sh makes it; CUDA-enabled for a GPU node)
#   --python PY      the Python whose PyTorch the build linked (default .venv/bin/python3)
#   --archive        write one file, DIR.tar.gz, instead of DIR (about 40% of its size: one
#                    file to copy to the node); there, `tar -xzf DIR.tar.gz -C PARENT` (DIR's
#                    parent folder) makes DIR as it would have been
#
# What DIR holds:
#   build/src/cli/genemask, build/bench/train_bench, build/bench/kernel_bench,
#   build/tests/model_tests
#                    the programs gpu-check.sh runs, without their debug information
#   build/lib/       genemask's own shared libraries (libgenemask_model.so, which genemask
#                    loads for the training commands, and those it links), likewise
#   deps/            every Debian package that holds a shared library the programs load, or
#                    one that Open MPI's launcher and plugins load, unpacked as `dpkg -x`
#                    would (from this machine's installed files), with openmpi-bin and
#                    openmpi-common (mpirun and its help texts; mpirun and mpiexec link to
#                    their .openmpi programs, as update-alternatives would make them). Left out: the C library and
#                    the C++ runtime (libc6, libstdc++6, libgcc-s1: the node's own, which
#                    must be at least as new as this machine's), the CUDA toolkit's and the
#                    driver's, and PyTorch's libraries (the node's own PyTorch, of the same
#                    version, provides them)
#   build/bundle.json  what it was built with: torch (its version), cuda, glibc,
#                    packages (name and version of each in deps/). gpu-check.sh --no-build
#                    refuses a Python whose PyTorch is another version (its libraries would
#                    not match the programs') and puts that PyTorch's libraries on the
#                    library path.
# Written to DIR.tmp.PID first and renamed to DIR (or DIR.tar.gz) at the end: a failure
# leaves neither.
# Exit codes: 0 packed; 1 a program missing, a library from outside any package, or a
# copy failed; 2 a bad option, or DIR (with --archive: DIR.tar.gz) exists.
set -euo pipefail
unset CDPATH  # cd DIR must not go to a folder of that name on CDPATH
root=$(cd "$(dirname "$0")/.." && pwd)
build=${GENEMASK_BUILD_DIR:-"$root/build"}
python=${GENEMASK_VENV:-"$root/.venv"}/bin/python3
dir=""
archive=0
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
  case "$1" in
    --build | --python) [ $# -ge 2 ] || { echo "gpu-bundle.sh: $1 needs a value (see --help)" >&2; exit 2; } ;;
  esac
  case "$1" in
    --build) build=$2; shift 2 ;;
    --python) python=$2; shift 2 ;;
    --archive) archive=1; shift ;;
    -h|--help) usage; exit 0 ;;
    -*) echo "gpu-bundle.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    *) [ -z "$dir" ] || { echo "gpu-bundle.sh: one DIR only (got '$dir' and '$1')" >&2; exit 2; }
       dir=$1; shift ;;
  esac
done
[ -n "$dir" ] || { echo "gpu-bundle.sh: name the bundle's directory: scripts/gpu-bundle.sh DIR (see --help)" >&2; exit 2; }
# Without trailing slashes: DIR.tmp.PID must be DIR's sibling, not a folder inside a new DIR.
dir=${dir%"${dir##*[!/]}"}
[ -n "$dir" ] || { echo "gpu-bundle.sh: / cannot be the bundle's directory; name a new one" >&2; exit 2; }
if [ "$archive" = 1 ] && { [ -e "$dir.tar.gz" ] || [ -L "$dir.tar.gz" ]; }; then
  echo "gpu-bundle.sh: $dir.tar.gz exists; name a new one (nothing is written over)" >&2
  exit 2
elif [ "$archive" = 0 ] && { [ -e "$dir" ] || [ -L "$dir" ]; }; then
  echo "gpu-bundle.sh: $dir exists; name a new directory (nothing is written over)" >&2
  exit 2
fi
programs=(src/cli/genemask bench/train_bench bench/kernel_bench tests/model_tests)
for p in "${programs[@]}"; do
  [ -x "$build/$p" ] || { echo "gpu-bundle.sh: $build/$p is missing; build first (scripts/build.sh) or name the build: --build DIR" >&2; exit 1; }
done
torch_lib=$("$python" -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib"))') || {
  echo "gpu-bundle.sh: '$python' cannot import torch; name the Python whose PyTorch the build linked: --python PY" >&2
  exit 1
}
torch_root=$(dirname "$(dirname "$torch_lib")")  # site-packages: torch's and the nvidia-* wheels' libraries

stage="$dir.tmp.$$"
tmp=$stage  # the pack's root; with --archive a folder named as DIR inside the stage
[ "$archive" = 0 ] || tmp="$stage/$(basename "$dir")"
# Made here, never found: what the EXIT trap removes must be this run's own.
mkdir -p "$(dirname "$stage")"
if ! mkdir "$stage" 2>/dev/null; then
  echo "gpu-bundle.sh: cannot make the temporary $stage (it exists, or the folder is not writable); nothing was written" >&2
  exit 1
fi
trap 'rm -rf "$stage"' EXIT
trap 'exit 130' INT TERM  # the EXIT trap then removes the partial pack
mkdir -p "$tmp/build" "$tmp/deps"

# Packages whose libraries the node brings itself: the C and C++ runtimes, the driver, and
# CUDA's libraries whichever way they were installed (NVIDIA's cuda-* packages, or Debian's
# own, e.g. libcudart12, libcublaslt12), which the node's PyTorch brings as its wheels.
left_out() {
  case "$1" in
    libc6 | libstdc++6 | libgcc-s1 | cuda-* | libcuda1 | libnvidia-* | libcudnn* | libnccl* | libnvjitlink* | \
      libcudart[0-9]* | libcublas* | libcufft* | libcurand* | libcusparse* | libcusolver* | libnvrtc* | libcupti* | \
      libnvtoolsext* | libcufile*) return 0 ;;
  esac
  return 1
}
# owner FILE: the package that installed FILE (as dpkg recorded it: /lib or /usr/lib).
owner() {
  local f=$1 real alt pkg
  real=$(readlink -f "$f")
  for alt in "$f" "$real" "${f#/usr}" "/usr$f" "${real#/usr}" "/usr$real"; do
    if pkg=$(dpkg -S "$alt" 2>/dev/null | head -n1); then
      pkg=${pkg%%: *}
      echo "${pkg%%:*}"  # without the architecture
      return 0
    fi
  done
  return 1
}
# The libraries a file loads (ldd's resolved paths; "not found" ones are the plugins' own
# business and left out, as on this machine).
libs_of() { ldd "$1" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// { print $3 }'; }
is_elf() { [ -f "$1" ] && [ "$(head -c 4 "$1" | od -An -c | tr -d ' ')" = '177ELF' ]; }

declare -A packages=() seen=() own=()
add_file() {  # a file loaded: its package, or an error if it comes from outside any
  local f=$1 pkg
  [ -z "${seen[$f]:-}" ] || return 0
  seen[$f]=1
  # The CUDA toolkit's runtime may be reached through a link elsewhere (/usr/local/lib on
  # some machines): where the file really lies decides.
  case "$(readlink -f "$f")" in
    "$torch_root"/* | /usr/local/cuda*) return 0 ;;
  esac
  case "$f" in
    "$torch_root"/* | /usr/local/cuda*) return 0 ;;
    "$build_abs"/*) own[$f]=1; return 0 ;;  # genemask's own libraries
  esac
  if ! pkg=$(owner "$f"); then
    echo "gpu-bundle.sh: $f is loaded but belongs to no Debian package nor to PyTorch; it cannot be packed" >&2
    exit 1
  fi
  left_out "$pkg" || packages[$pkg]=1
}
# The programs, and the training library genemask loads when a command needs it (dlopen).
build_abs=$(cd "$build" && pwd)
[ ! -f "$build/src/cli/libgenemask_model.so" ] || own["$build_abs/src/cli/libgenemask_model.so"]=1
for f in "${programs[@]/#/$build_abs/}" "${!own[@]}"; do
  while read -r l; do add_file "$l"; done < <(libs_of "$f")
done
packages[openmpi-bin]=1
packages[openmpi-common]=1
# Until no new package: every ELF file of every package so far (Open MPI's plugins, PMIx's,
# hwloc's, mpirun and orted), and the libraries those load.
declare -A walked=()
while :; do
  new=0
  for pkg in "${!packages[@]}"; do
    [ -z "${walked[$pkg]:-}" ] || continue
    walked[$pkg]=1
    new=1
    while read -r f; do
      is_elf "$f" || continue
      while read -r l; do add_file "$l"; done < <(libs_of "$f")
    done < <(dpkg -L "$pkg")
  done
  [ "$new" = 1 ] || break
done

# The packages' files, as dpkg -x would unpack them (documentation left out).
for pkg in $(printf '%s\n' "${!packages[@]}" | sort); do
  while read -r f; do
    case "$f" in /usr/share/doc/* | /usr/share/man/* | /usr/share/lintian/*) continue ;; esac
    if [ -L "$f" ] || [ -f "$f" ]; then
      mkdir -p "$tmp/deps${f%/*}"
      cp -P --preserve=mode,timestamps "$f" "$tmp/deps$f"
    fi
  done < <(dpkg -L "$pkg")
done
# The launchers' plain names, which Debian links through update-alternatives.
for n in mpirun mpiexec; do
  [ ! -e "$tmp/deps/usr/bin/$n.openmpi" ] || ln -s "$n.openmpi" "$tmp/deps/usr/bin/$n"
done
for p in "${programs[@]}"; do
  mkdir -p "$tmp/build/$(dirname "$p")"
  objcopy --strip-debug "$build/$p" "$tmp/build/$p"
done
mkdir -p "$tmp/build/lib"
for f in "${!own[@]}"; do
  objcopy --strip-debug "$f" "$tmp/build/lib/$(basename "$f")"
done

"$python" - "$tmp/build/bundle.json" "${!packages[@]}" <<'PY'
import json, os, platform, subprocess, sys
import torch
out, pkgs = sys.argv[1], sorted(sys.argv[2:])
ver = lambda p: subprocess.run(["dpkg-query", "-W", "-f=${Version}", p], capture_output=True, text=True).stdout
json.dump({"torch": torch.__version__, "cuda": torch.version.cuda, "glibc": platform.libc_ver()[1],
           "packages": {p: ver(p) for p in pkgs}}, open(out, "w"), indent=2)
PY
if [ "$archive" = 1 ]; then
  # Owners and order fixed, so that the same pack gives the same archive's listing.
  tar -czf "$stage/pack.tar.gz" -C "$stage" --sort=name --owner=0 --group=0 --numeric-owner -- "$(basename -- "$dir")"
  # ln, not mv: an archive made meanwhile under the same name is not written over.
  if ! ln "$stage/pack.tar.gz" "$dir.tar.gz" 2>/dev/null; then
    echo "gpu-bundle.sh: $dir.tar.gz could not be made (it appeared meanwhile, or the folder is not writable)" >&2
    exit 1
  fi
  rm -rf "$stage"
  trap - EXIT
  parent=$(dirname -- "$dir")
  echo "gpu-bundle.sh: $dir.tar.gz ($(du -sh "$dir.tar.gz" | cut -f1), ${#packages[@]} packages); on the GPU node, in this source tree:"
  printf '  tar -xzf %q -C %q && scripts/gpu-check.sh --no-build --build %q --prefix %q\n' "$dir.tar.gz" "$parent" \
    "$dir/build" "$dir/deps"
else
  mv -T "$tmp" "$dir"  # -T: a DIR made meanwhile is not written into (a non-empty one fails)
  trap - EXIT
  echo "gpu-bundle.sh: $dir ($(du -sh "$dir" | cut -f1), ${#packages[@]} packages); on the GPU node, in this source tree:"
  echo "  scripts/gpu-check.sh --no-build --build $dir/build --prefix $dir/deps"
fi
