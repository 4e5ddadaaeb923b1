#!/usr/bin/env python3
"""The DNABERT / GeneMask MLM collator written plainly in NumPy, as the reference Python
code does it (probability matrix, Bernoulli centres, span expansion per centre, 80/10/10),
timed on the sequences mask_bench wrote. Usage: mask_bench_numpy.py TOKENS_FILE"""
import json
import sys
import time

import numpy as np

MASK, CLS, SEP, PAD = 4, 2, 3, 0


def collate(seqs):
    L = max(len(s) for s in seqs) + 2
    ids = np.zeros((len(seqs), L), dtype=np.int64)
    for i, s in enumerate(seqs):
        ids[i, 0] = CLS
        ids[i, 1:len(s) + 1] = s
        ids[i, len(s) + 1] = SEP
    return ids


def replace(inputs, labels, masked, rng):
    labels[~masked] = -100
    repl = (rng.random(labels.shape) < 0.8) & masked
    inputs[repl] = MASK
    rand = (rng.random(labels.shape) < 0.5) & masked & ~repl
    inputs[rand] = rng.integers(5, 4101, size=labels.shape)[rand]
    return inputs, labels


def centres(seqs, rng, p):
    """Collate, then draw the mask centres as DNABERT does (probability matrix, no specials)."""
    inputs = collate(seqs)
    special = (inputs == CLS) | (inputs == SEP) | (inputs == PAD)
    prob = np.full(inputs.shape, p)
    prob[special] = 0
    return inputs, inputs.copy(), special, rng.random(inputs.shape) < prob


def dnabert_random(seqs, rng, p=0.025):
    inputs, labels, special, centres_ = centres(seqs, rng, p)
    masked = np.zeros_like(centres_)
    for r, c in zip(*np.nonzero(centres_)):
        masked[r, max(c - 2, 1):c + 4] = True
    masked &= ~special
    return replace(inputs, labels, masked, rng)


def genemask(seqs, rng, rank_of_id, p=0.0176):
    inputs, labels, special, centres_ = centres(seqs, rng, p)
    masked = np.zeros_like(centres_)
    for r in range(inputs.shape[0]):
        cs = np.nonzero(centres_[r])[0]
        picks = []
        for c in cs:
            lo, hi = max(c - 2, 1), c + 4
            window = inputs[r, lo:hi]
            tau = lo + int(np.argmin(rank_of_id[window]))
            picks.append((rank_of_id[inputs[r, tau]], c, tau))
        picks.sort()
        high = len(picks) if len(picks) <= 8 else (len(picks) + 1) // 2
        for i, (_, c, tau) in enumerate(picks):
            if i < high:
                masked[r, max(tau - 5, 1):tau + 6] = True
            else:
                masked[r, max(c - 2, 1):c + 4] = True
    masked &= ~special
    return replace(inputs, labels, masked, rng)


def main():
    tok = np.fromfile(sys.argv[1], dtype=np.uint16).astype(np.int64)
    seqs = tok.reshape(-1, 510)
    rng = np.random.default_rng(0)
    rank_of_id = np.full(4101, 10_000)
    rank_of_id[5:] = rng.permutation(4096) + 1
    for name, fn in [("random", lambda b: dnabert_random(b, rng)), ("genemask", lambda b: genemask(b, rng, rank_of_id))]:
        n = min(len(seqs), 5000)
        t0 = time.perf_counter()
        for i in range(0, n, 10):
            fn(seqs[i:i + 10])
        dt = time.perf_counter() - t0
        print(json.dumps({"impl": "numpy", "strategy": name, "sequences": n, "seconds": dt, "seq_per_s": n / dt}))


if __name__ == "__main__":
    main()
