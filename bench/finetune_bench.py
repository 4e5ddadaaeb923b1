#!/usr/bin/env python3
"""The fine-tuning loop of `genemask finetune` in Python PyTorch (the project environment's PyTorch 2.11,
the same LibTorch version): BertForSequenceClassification written with torch.nn (the
encoder layers of train_bench.py, HF's pooler and classifier), dropout 0.1, AdamW (betas
0.9/0.999, eps 1e-8, decay 0.01 except biases/LayerNorm), HF's linear warm-up schedule,
clipping 1.0, batches shuffled per epoch and padded per batch from token lists.
  finetune_bench.py make GENOME.fa OUT.csv N LENGTH   windows of a genome as a 2-class table
  finetune_bench.py run TABLE.csv CONFIG THREADS BATCH EPOCHS [PRECISION fp32|bf16]  -> one JSON line
  finetune_bench.py summary RESULTS.jsonl [ROWS]   the table of bench/finetune_bench.sh, with MFU
    (refused unless RESULTS.jsonl has ROWS rows, when given)
bf16 is CPU autocast (bf16 matrix products, fp32 weights, optimizer and loss), as genemask
finetune --precision bf16 runs it."""
import collections
import itertools
import json
import os
import random
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
from train_bench import CONFIGS, Encoder  # noqa: E402
from whole_file import refuse_input, whole_file  # noqa: E402

VOCAB = {"".join(p): 5 + i for i, p in enumerate(itertools.product("ATCG", repeat=6))}


class Classifier(Encoder):
    def __init__(self, c, classes=2, vocab=4101):
        super().__init__(c, vocab)
        H = c["hidden"]
        self.pooler = nn.Linear(H, H)
        self.classifier = nn.Linear(H, classes)

    def forward(self, ids, mask):
        x = self.encode(ids, mask)
        return self.classifier(self.drop(torch.tanh(self.pooler(x[:, 0]))))


def make(genome, out, n, length):
    """Written to a temporary beside out and renamed once whole; an out that is the genome is refused."""
    refuse_input(out, genome, "finetune_bench.py make")
    with open(genome) as f:
        seq = "".join(l.strip() for l in itertools.islice(f, 1, 200000) if not l.startswith(">")).upper()
    rng = random.Random(1)
    with whole_file(out, src=genome, who="finetune_bench.py make") as f:
        f.write("sequence,label\n")
        rows = 0
        while rows < n:
            i = rng.randrange(len(seq) - length)
            w = seq[i:i + length]
            if set(w) <= set("ACGT"):
                f.write(f"{w},{rows % 2}\n")
                rows += 1


def run(table, name, threads, batch, epochs, precision="fp32"):
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    rows = [l.strip().split(",") for l in open(table).readlines()[1:]]
    toks = [[2] + [VOCAB[s[i:i + 6]] for i in range(len(s) - 5)][:510] + [3] for s, _ in rows]
    labels = [int(y) for _, y in rows]
    m = Classifier(dict(CONFIGS[name], dropout=0.1))
    decay = [p for p in m.parameters() if p.ndim > 1]  # biases and LayerNorm weights are 1-D
    no_decay = [p for p in m.parameters() if p.ndim == 1]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=4e-4, betas=(0.9, 0.999), eps=1e-8)
    steps = epochs * ((len(toks) + batch - 1) // batch)
    warm = int(0.1 * steps)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: s / max(1, warm) if s < warm else max(0.0, (steps - s) / max(1, steps - warm)))
    m.train()
    rng = random.Random(0)
    t0 = time.perf_counter()
    for _ in range(epochs):
        order = list(range(len(toks)))
        rng.shuffle(order)
        for b in range(0, len(order), batch):
            rs = order[b:b + batch]
            L = max(len(toks[r]) for r in rs)
            ids = torch.tensor([toks[r] + [0] * (L - len(toks[r])) for r in rs])
            mask = torch.tensor([[1] * len(toks[r]) + [0] * (L - len(toks[r])) for r in rs])
            y = torch.tensor([labels[r] for r in rs])
            opt.zero_grad()
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
                logits = m(ids, mask)
            F.cross_entropy(logits.float(), y).backward()
            torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
            opt.step()
            sched.step()
    secs = time.perf_counter() - t0
    print(json.dumps({"impl": "pytorch", "threads": threads, "batch": batch, "precision": precision,
                      "train_examples_per_s": len(toks) * epochs / secs}))


def flops_per_example(bp, c=CONFIGS["logo"]):
    """Model FLOPs one training example needs (3 x forward), counting the matrix products at 2
    FLOPs per multiply-add: a window of bp bases is S = bp - 5 + 2 tokens; every layer but the
    last takes S x (8H^2 + 4HF + 4SH); the last layer is needed for [CLS] only (genemask
    computes just that; PyTorch computes all of it, so its MFU counts only the part needed):
    keys and values of all S tokens (4SH^2), the query, output and feed-forward of one token
    (4H^2 + 4HF) and its attention (4SH); then the pooler and the 2-class head."""
    H, F, L = c["hidden"], c["ffn"], c["layers"]
    S = bp - 5 + 2
    full = S * (L - 1) * (8 * H * H + 4 * H * F + 4 * S * H)
    last = 4 * S * H * H + 4 * H * H + 4 * H * F + 4 * S * H
    return 3 * (full + last + 2 * (H * H + 2 * H))


def summary(path, expected=None):
    lines = open(path).readlines()
    if expected is not None and len(lines) != expected:  # a figure only from a whole run
        sys.exit(f"finetune_bench.py summary: {path} has {len(lines)} rows, expected {expected}: no summary")
    v, peaks = collections.defaultdict(list), {}
    for line in lines:
        r = json.loads(line)
        if "peak_fp32_gflops" in r:
            peaks[r["threads"]] = r
            continue
        v[(r["len"], r["batch"], r["threads"], r.get("precision", "fp32"), r["impl"])].append(r["train_examples_per_s"])

    def mfu(ex_s, bp, t, p):
        peak = peaks[t]["peak_bf16_gflops"] if p == "bf16" else peaks[t]["peak_fp32_gflops"]
        return ex_s * flops_per_example(bp) / 1e9 / peak if peak else float("nan")

    print(f"{'length':>6} {'batch':>5} {'threads':>7} {'prec':>4} {'genemask ex/s':>14} {'MFU':>5} "
          f"{'PyTorch ex/s':>13} {'MFU':>5} {'vs PyTorch':>10} {'vs fp32':>7}")
    for (n, b, t, p, impl) in sorted(v):
        if impl != "genemask":
            continue
        g, q = statistics.median(v[(n, b, t, p, "genemask")]), statistics.median(v[(n, b, t, p, "pytorch")])
        vs32 = g / statistics.median(v[(n, b, t, "fp32", "genemask")])
        print(f"{n:>4}bp {b:>5} {t:>7} {p:>4} {g:>14.1f} {mfu(g, n, t, p):>5.0%} {q:>13.1f} {mfu(q, n, t, p):>5.0%} "
              f"{g / q:>9.2f}x {vs32:>6.2f}x")
    for t, r in sorted(peaks.items()):
        bf = r["peak_bf16_gflops"]
        print(f"peaks measured in the run, {t} thread(s): fp32 {r['peak_fp32_gflops']:.0f} GFLOP/s, bf16 "
              f"{'-' if bf is None else f'{bf:.0f}'} GFLOP/s; CPU: {r['cpu']} (bf16: {r['cpu_bf16']})")


if __name__ == "__main__":
    if sys.argv[1] == "summary":
        summary(sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else None)
    elif sys.argv[1] == "make":
        make(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
    else:
        run(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]),
            sys.argv[7] if len(sys.argv) > 7 else "fp32")
