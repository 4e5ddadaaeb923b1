#!/usr/bin/env python3
"""The many-genomes benchmark's corpus: N genomes of uneven sizes (a log-uniform spread over
MIN..MAX Mbp, scaled to TOTAL Mbp in all), each 1-8 records with runs of N and soft-masked
stretches, written as plain FASTA (60 bases a line), plus genomes.tsv. The first genome is
the real chr22 (the default genome) when given. Deterministic (numpy seed 32): every genome
is drawn, and one already there with exactly those bytes is kept rather than written again.
Each file is written to a temporary beside it and renamed once whole.
Usage: make-bench-genomes.py OUTDIR N TOTAL_MBP [REAL.fa]"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
from whole_file import whole_file  # noqa: E402

out, n, total_mbp = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
real = sys.argv[4] if len(sys.argv) > 4 else None
os.makedirs(out, exist_ok=True)


def publish(path, chunks):
    """The byte strings of chunks to path, through a temporary beside it renamed once whole."""
    with whole_file(path, "wb", src=real, who="make-bench-genomes") as f:
        for c in chunks:
            f.write(c)


def same(path, chunks):
    """Whether the file at path holds exactly the bytes of chunks."""
    with open(path, "rb") as f:
        return all(f.read(len(c)) == c for c in chunks) and f.read(1) == b""


def genome(rng, size):
    """One generated genome's FASTA, a record at a time."""
    records = int(rng.integers(1, 9))
    cuts = np.sort(rng.integers(0, size, records - 1))
    lengths = np.diff(np.concatenate([[0], cuts, [size]]))
    gc = rng.uniform(0.35, 0.6)
    for r, length in enumerate(lengths):
        if length < 100:
            continue
        p = np.array([(1 - gc) / 2, gc / 2, gc / 2, (1 - gc) / 2])
        seq = rng.choice(4, size=int(length), p=p).astype(np.uint8)
        soft = rng.random(int(length) // 10000 + 1) < 0.3  # 10 kb blocks soft-masked
        seq = seq + 4 * np.repeat(soft, 10000)[: int(length)].astype(np.uint8)
        text = lut[seq]
        for _ in range(int(length) // 2_000_000 + 1):  # runs of N
            a = int(rng.integers(0, int(length)))
            text[a:a + int(rng.integers(100, 50000))] = ord("N")
        body = text.tobytes()
        yield f">chr{r + 1}\n".encode() + b"\n".join(body[j:j + 60] for j in range(0, len(body), 60)) + b"\n"


rng = np.random.default_rng(32)
sizes = np.exp(rng.uniform(np.log(2e6), np.log(4e8), n))
names, paths = [], []
if real:
    names.append("hs_chr22")
    paths.append(os.path.abspath(real))
    total_mbp -= os.path.getsize(real) / 1e6
    sizes = sizes[1:]
sizes = (sizes / sizes.sum() * total_mbp * 1e6).astype(np.int64)
lut = np.frombuffer(b"ACGTacgt", dtype=np.uint8)
for i, size in enumerate(sizes):
    name = f"sp{i + 1:02d}"
    path = os.path.join(out, f"{name}.fa")
    # The same draws whether or not the file is there, so the corpus never depends on which
    # files exist: one that differs (part of another N or TOTAL, a change here) is drawn again
    # from the same state and written.
    state = rng.bit_generator.state
    if not (os.path.isfile(path) and same(path, genome(rng, size))):
        rng.bit_generator.state = state
        publish(path, genome(rng, size))
    names.append(name)
    paths.append(os.path.abspath(path))
publish(os.path.join(out, "genomes.tsv"),
        [b"name\tpath\n"] + [f"{name}\t{path}\n".encode() for name, path in zip(names, paths)])
print(f"{len(names)} genomes, {sum(os.path.getsize(p) for p in paths) / 1e9:.2f} GB of FASTA in {out}")
