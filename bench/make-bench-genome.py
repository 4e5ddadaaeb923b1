#!/usr/bin/env python3
"""Benchmark genome from the default chr22: N runs longer than 100 are shortened to 100
(GRCh38 is ~5% N, the default chr22 is 58% N), and the chromosome is repeated COPIES times
under different names. Usage: make-bench-genome.py chr22.fa out.fa [COPIES]
out.fa is written to a temporary beside it and renamed once whole (concurrent runs and
readers never see part of it); an out.fa that is the input is refused."""
import os
import re
import sys
import tempfile

src, dst = sys.argv[1], sys.argv[2]
copies = int(sys.argv[3]) if len(sys.argv) > 3 else 4
if os.path.exists(dst) and os.path.samefile(src, dst):
    sys.exit(f"make-bench-genome: {dst} is the input {src}: refused")
with open(src) as f:
    f.readline()
    seq = re.sub(r"[Nn]{101,}", "N" * 100, f.read().replace("\n", ""))
fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(dst)), prefix=os.path.basename(dst) + ".")
try:
    with os.fdopen(fd, "w") as out:
        for c in range(copies):
            out.write(f">chr22_copy{c + 1}\n")
            for i in range(0, len(seq), 60):
                out.write(seq[i:i + 60] + "\n")
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600
    os.replace(tmp, dst)
except BaseException:
    os.unlink(tmp)
    raise
print(f"{dst}: {copies} x {len(seq)} bases", file=sys.stderr)
