#!/usr/bin/env python3
"""Benchmark genome from the default chr22: N runs longer than 100 are shortened to 100
(GRCh38 is ~5% N, the default chr22 is 58% N), and the chromosome is repeated COPIES times
under different names. Usage: make-bench-genome.py chr22.fa out.fa [COPIES]
out.fa is written to a temporary beside it and renamed once whole (concurrent runs and
readers never see part of it); an out.fa that is the input is refused."""
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
from whole_file import whole_file  # noqa: E402

src, dst = sys.argv[1], sys.argv[2]
copies = int(sys.argv[3]) if len(sys.argv) > 3 else 4
with open(src) as f:
    f.readline()
    seq = re.sub(r"[Nn]{101,}", "N" * 100, f.read().replace("\n", ""))
with whole_file(dst, src=src, who="make-bench-genome") as out:
    for c in range(copies):
        out.write(f">chr22_copy{c + 1}\n")
        for i in range(0, len(seq), 60):
            out.write(seq[i:i + 60] + "\n")
print(f"{dst}: {copies} x {len(seq)} bases", file=sys.stderr)
