#!/usr/bin/env python3
"""Are a peer's k-mer counts equal to counts.h5's? Each DUMP is a text file of "KMER COUNT"
lines (`kmc_tools transform DB dump OUT`, or `jellyfish dump -c DB.jf`); its k is the
length of its k-mers, and it is held against /counts/k<k>. With --same, every /counts/k*
of COUNTS.h5 against OTHER.h5's (genemask at another rank count).
Prints one line per comparison, "identical" or how many k-mers differ, and exits 1 when
any differs (the benchmarks print no ratio then), 2 when a file cannot be read.
Usage: kmc-equal.py COUNTS.h5 DUMP...
       kmc-equal.py COUNTS.h5 --same OTHER.h5"""
import sys

import h5py
import numpy as np

def die(msg):
    """A file that cannot be read, or a usage error: exit 2 (1 is "the counts differ")."""
    print(f"kmc-equal.py: {msg}", file=sys.stderr)
    sys.exit(2)


# A base's 2-bit code by its byte (A C G T = 0 1 2 3, as counts.h5 orders k-mers); 255 for
# any other byte.
CODE = np.full(256, 255, np.uint8)
CODE[np.frombuffer(b"ACGT", np.uint8)] = np.arange(4, dtype=np.uint8)


def dump_counts(path, ours):
    """DUMP's counts, as an array like ours[k] (the k its k-mers have), and that k."""
    with open(path, "rb") as f:
        words = f.read().split()
    if not words:
        die(f"{path}: no k-mers (an empty dump)")
    if len(words) % 2:
        die(f"{path}: not 'KMER COUNT' lines (an odd number of words)")
    kmers, counts = words[0::2], words[1::2]
    k = len(kmers[0])
    if f"k{k}" not in ours:
        die(f"{path}: {k}-mers, but the counts hold k = {', '.join(sorted((n[1:] for n in ours), key=int))}")
    if any(len(w) != k for w in kmers):
        die(f"{path}: k-mers of more than one length (the first is a {k}-mer)")
    codes = CODE[np.frombuffer(b"".join(kmers), np.uint8)].reshape(len(kmers), k)
    if (codes == 255).any():
        die(f"{path}: a k-mer with a base other than A, C, G, T")
    index = codes.astype(np.int64) @ (4 ** np.arange(k - 1, -1, -1, dtype=np.int64))
    try:
        n = np.array(counts, dtype=np.uint64)
    except ValueError as e:
        die(f"{path}: a count that is not a number ({e})")
    theirs = np.zeros_like(ours[f"k{k}"])
    theirs[index] = n
    return theirs, k


def main():
    args = sys.argv[1:]
    if len(args) < 2 or (args[1] == "--same" and len(args) != 3):
        die("usage: kmc-equal.py COUNTS.h5 DUMP... | kmc-equal.py COUNTS.h5 --same OTHER.h5")
    try:
        with h5py.File(args[0], "r") as f:
            ours = {name: ds[...] for name, ds in f["counts"].items()}
        differ = 0
        if args[1] == "--same":
            with h5py.File(args[2], "r") as f:
                other = {name: ds[...] for name, ds in f["counts"].items()}
            if sorted(ours) != sorted(other):
                print(f"{args[2]}: DIFFERENT k: {sorted(other)} against {sorted(ours)}")
                sys.exit(1)
            bad = [f"k={name[1:]}: " + (f"{int((ours[name] != other[name]).sum())} {name[1:]}-mers"
                                       if ours[name].shape == other[name].shape else "other shapes")
                   for name in sorted(ours, key=lambda s: int(s[1:])) if not np.array_equal(ours[name], other[name])]
            differ = len(bad)
            print(f"{args[2]}: " + (f"identical for all {len(ours)} k" if not bad else "DIFFERENT in " + ", ".join(bad)))
        else:
            for path in args[1:]:
                theirs, k = dump_counts(path, ours)
                n = int((ours[f"k{k}"] != theirs).sum())
                differ += n != 0
                print(f"{path} k={k}: " + ("identical" if n == 0 else f"DIFFERENT in {n} {k}-mers"))
    except (OSError, KeyError) as e:  # not an HDF5 file, or one without /counts
        die(f"{type(e).__name__}: {e}")
    sys.exit(1 if differ else 0)


main()
