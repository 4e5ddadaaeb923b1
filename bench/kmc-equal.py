#!/usr/bin/env python3
"""Are KMC's 10-mer counts (a `kmc_tools transform ... dump` text file) equal to counts.h5's
/counts/k10? Prints "identical" or how many 10-mers differ (the benchmarks' check).
Usage: kmc-equal.py COUNTS.h5 KMC_DUMP.txt"""
import sys

import h5py
import numpy as np

ours = h5py.File(sys.argv[1], "r")["counts/k10"][...]
code = {"A": 0, "C": 1, "G": 2, "T": 3}
theirs = np.zeros_like(ours)
with open(sys.argv[2]) as f:
    for line in f:
        k, n = line.split()
        v = 0
        for c in k:
            v = v * 4 + code[c]
        theirs[v] = int(n)
print("identical" if np.array_equal(ours, theirs) else f"DIFFERENT in {int((ours != theirs).sum())} 10-mers")
