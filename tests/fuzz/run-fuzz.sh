#!/usr/bin/env bash
# Builds the fuzz targets (FASTA parser and counter; safetensors reader; pytorch_model.bin
# reader, against the project's LibTorch) with clang + libFuzzer (ASan, UBSan) and runs
# each for SECONDS. GENEMASK_PYTHON names the Python whose torch to use (default .venv).
# Usage: tests/fuzz/run-fuzz.sh [SECONDS] [BUILD_DIR]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
secs=${1:-30}
out=${2:-"$root/build/fuzz"}
mkdir -p "$out"
gen="$root/build/generated"
[ -f "$gen/genemask/version.hpp" ] || { mkdir -p "$gen/genemask"; echo 'namespace genemask { inline constexpr const char* kVersion = "fuzz"; }' > "$gen/genemask/version.hpp"; }
launcher=""
command -v ccache >/dev/null && launcher=ccache
$launcher clang++ -std=c++17 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
  -I"$root" -I"$root/include" -I"$gen" \
  "$here/fasta_fuzz.cpp" "$root/io/error.cpp" "$root/io/text_source.cpp" "$root/io/fasta.cpp" \
  "$root/src/core/kmer/kmer.cpp" "$root/src/core/kmer/kmer_count.cpp" \
  -lisal -lz -lfmt -o "$out/fasta_fuzz"
$launcher clang++ -std=c++17 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
  -I"$root" -I"$root/include" -I"$gen" \
  "$here/safetensors_fuzz.cpp" "$root/io/error.cpp" "$root/io/json.cpp" "$root/io/safetensors.cpp" "$root/io/atomic_file.cpp" \
  "$root/io/output_guard.cpp" "$root/io/dir_lock.cpp" "$root/io/sha256.cpp" \
  -lfmt -lcrypto -o "$out/safetensors_fuzz"
# The .bin reader links LibTorch, which is not instrumented: only the reader and the
# target are; LibTorch's own allocations still go through ASan's malloc. LibTorch's headers
# carry their own fmt, used header-only here.
python=${GENEMASK_PYTHON:-"$root/.venv/bin/python3"}
torch_dir=$("$python" -c 'import os, torch; print(os.path.dirname(torch.__file__))')
$launcher clang++ -std=c++17 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
  -D_GLIBCXX_USE_CXX11_ABI=1 -DFMT_HEADER_ONLY -I"$root" -I"$root/include" -I"$root/src" -I"$gen" \
  -isystem "$torch_dir/include" -isystem "$torch_dir/include/torch/csrc/api/include" \
  "$here/torch_bin_fuzz.cpp" "$root/src/model/torch_bin.cpp" "$root/io/error.cpp" \
  -L"$torch_dir/lib" -Wl,-rpath,"$torch_dir/lib" -Wl,--no-as-needed -ltorch_cpu -lc10 -Wl,--as-needed \
  -o "$out/torch_bin_fuzz"
corpus="$out/corpus"
mkdir -p "$corpus"
cp -n "$here"/corpus/* "$corpus"/ 2>/dev/null || true
"$out/fasta_fuzz" -max_total_time="$secs" -max_len=4096 -timeout=10 -rss_limit_mb=4096 -artifact_prefix="$out/" "$corpus" 2>&1 | tail -n 5
corpus_st="$out/corpus-safetensors"
mkdir -p "$corpus_st"
cp -n "$here"/corpus-safetensors/* "$corpus_st"/ 2>/dev/null || true
"$out/safetensors_fuzz" -max_total_time="$secs" -max_len=4096 -timeout=10 -rss_limit_mb=4096 \
  -artifact_prefix="$out/" "$corpus_st" 2>&1 | tail -n 5
corpus_bin="$out/corpus-torch-bin"
mkdir -p "$corpus_bin"
cp -n "$here"/corpus-torch-bin/* "$corpus_bin"/ 2>/dev/null || true
# LibTorch keeps its operator registries to the end of the process: no leak checks.
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0} "$out/torch_bin_fuzz" -max_total_time="$secs" -max_len=8192 -timeout=10 \
  -rss_limit_mb=6144 -artifact_prefix="$out/" "$corpus_bin" 2>&1 | tail -n 5
echo "fuzz: ${secs}s per target without a finding"
