#!/usr/bin/env python3
"""Benchmark genome from the default chr22: N runs longer than 100 are shortened to 100
(GRCh38 is ~5% N, the default chr22 is 58% N), and the chromosome is repeated COPIES times
under different names. Usage: make-bench-genome.py chr22.fa out.fa [COPIES]"""
import re
import sys

src, dst = sys.argv[1], sys.argv[2]
copies = int(sys.argv[3]) if len(sys.argv) > 3 else 4
with open(src) as f:
    f.readline()
    seq = re.sub(r"[Nn]{101,}", "N" * 100, f.read().replace("\n", ""))
with open(dst + ".tmp", "w") as out:
    for c in range(copies):
        out.write(f">chr22_copy{c + 1}\n")
        for i in range(0, len(seq), 60):
            out.write(seq[i:i + 60] + "\n")
import os
os.replace(dst + ".tmp", dst)
print(f"{dst}: {copies} x {len(seq)} bases", file=sys.stderr)
