#!/usr/bin/env python3
"""Data collator throughput, in one run on the same batches: genemask.hf.DataCollatorForGeneMask
(GeneMask and random masking, genemask's C++ core; from lists of ids as datasets give them)
against transformers' DataCollatorForLanguageModeling (random token masking, mlm_probability 0.15, with a
BertTokenizer of the DNABERT-6 vocabulary) and against the NumPy GeneMask reference of
bench/mask_bench_numpy.py (which masks arrays: compared with genemask.Masker on the same
arrays). Prints one JSON line per collator and the ratios.

Usage: bench/collator_bench.py [--batches 200] [--batch-size 32] [--tokens 510]
(the project's .venv python, with the genemask package installed by scripts/build.sh)."""
import argparse
import json
import os
import platform
import random
import statistics
import sys
import tempfile
import time

import numpy as np
import torch

import genemask
from genemask.hf import DataCollatorForGeneMask

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mask_bench_numpy  # noqa: E402


def timed(fn, batches, repeats=3):
    """Median seconds per batch over `repeats` passes (after one warm-up batch)."""
    fn(batches[0])
    per = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for b in batches:
            fn(b)
        per.append((time.perf_counter() - t0) / len(batches))
    return statistics.median(per)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batches", type=int, default=200)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--tokens", type=int, default=510, help="6-mers per sequence (510: DNABERT's longest)")
    a = ap.parse_args()
    torch.set_num_threads(1)

    rng = random.Random(0)
    bases = a.tokens + 5
    seqs = ["".join(rng.choices("ACGT", weights=[3, 2, 2, 3], k=bases)) for _ in range(a.batches * a.batch_size)]
    tok = genemask.Tokenizer()
    examples = [{"input_ids": tok.encode(s).tolist()} for s in seqs]
    batches = [examples[i:i + a.batch_size] for i in range(0, len(examples), a.batch_size)]

    with tempfile.TemporaryDirectory() as tmp:
        fa = os.path.join(tmp, "g.fa")
        with open(fa, "w") as f:
            for i, s in enumerate(seqs[:2000]):
                f.write(f">s{i}\n{s}\n")
        table = genemask.npmi(genemask.count_kmers(fa, 6), k=6, min_count=2)
        vocab = os.path.join(tmp, "vocab.txt")
        with open(vocab, "w") as f:
            f.write("\n".join(tok.vocab()) + "\n")
        from transformers import BertTokenizerFast, DataCollatorForLanguageModeling
        hf_tok = BertTokenizerFast(vocab_file=vocab, do_lower_case=False)

    hf = DataCollatorForLanguageModeling(hf_tok, mlm=True, mlm_probability=0.15, return_tensors="pt")
    ours = DataCollatorForGeneMask(npmi=table, seed=0)
    ours_random = DataCollatorForGeneMask(strategy="random", seed=0)
    # The NumPy reference masks raw 6-mer arrays (it frames them itself), by GRANK rank per id.
    rank_of_id = np.full(4101, 10_000)
    grank = table.grank()
    for code in range(4096):
        rank_of_id[genemask._core.kmer_to_token(code)] = grank[code]
    np_rng = np.random.default_rng(0)
    np_batches = [np.array([e["input_ids"][1:-1] for e in b], dtype=np.int64) for b in batches]
    n_np = max(1, len(np_batches) // 10)  # the reference is slow: a tenth of the batches

    # The masking step alone, on batches already padded into arrays (what the NumPy
    # reference times): genemask.Masker against the reference.
    padded = [tok.batch([s for s in seqs[i:i + a.batch_size]]) for i in range(0, len(seqs), a.batch_size)]
    masker = genemask.Masker("genemask", npmi=table, seed=0)
    results = {
        "masker_genemask_arrays": timed(lambda b: masker.mask(b[0], b[1]), padded),
        "hf_random": timed(hf, batches),
        "genemask_genemask": timed(ours, batches),
        "genemask_random": timed(ours_random, batches),
        "numpy_genemask": timed(lambda b: mask_bench_numpy.genemask(b, np_rng, rank_of_id), np_batches[:n_np], 1),
    }
    seq = a.batch_size
    for name, s in results.items():
        print(json.dumps({"collator": name, "batch_size": a.batch_size, "tokens": a.tokens, "ms_per_batch": s * 1e3,
                          "sequences_per_s": seq / s}))
    print(json.dumps({
        "cpu": platform.processor() or platform.machine(), "torch_threads": torch.get_num_threads(),
        "genemask_vs_hf_random_speed": results["hf_random"] / results["genemask_genemask"],
        "genemask_random_vs_hf_random_speed": results["hf_random"] / results["genemask_random"],
        "genemask_vs_numpy_reference_speed": results["numpy_genemask"] / results["genemask_genemask"],
        "masker_vs_numpy_reference_speed": results["numpy_genemask"] / results["masker_genemask_arrays"],
    }))


if __name__ == "__main__":
    main()
