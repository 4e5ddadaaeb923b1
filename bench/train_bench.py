#!/usr/bin/env python3
"""The same BERT MLM training step in Python PyTorch (the project environment's PyTorch
2.11, the same LibTorch): an HF-style BertForMaskedLM written with torch.nn, AdamW, clipping.
Usage: train_bench.py CONFIG THREADS BATCH SEQ STEPS"""
import json
import math
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

CONFIGS = {"logo": dict(hidden=256, layers=2, heads=8, ffn=3072, dropout=0.0),
           "dnabert": dict(hidden=768, layers=12, heads=12, ffn=3072, dropout=0.1)}


class Layer(nn.Module):
    def __init__(self, c):
        super().__init__()
        H = c["hidden"]
        self.q, self.k, self.v, self.o = (nn.Linear(H, H) for _ in range(4))
        self.ln1, self.ln2 = nn.LayerNorm(H, eps=1e-12), nn.LayerNorm(H, eps=1e-12)
        self.ff1, self.ff2 = nn.Linear(H, c["ffn"]), nn.Linear(c["ffn"], H)
        self.heads, self.drop = c["heads"], nn.Dropout(c["dropout"])

    def forward(self, x, add):
        B, L, H = x.shape
        dh = H // self.heads
        sp = lambda t: t.view(B, L, self.heads, dh).transpose(1, 2)
        p = self.drop(torch.softmax(sp(self.q(x)) @ sp(self.k(x)).transpose(-1, -2) / math.sqrt(dh) + add, -1))
        a = self.ln1(self.drop(self.o((p @ sp(self.v(x))).transpose(1, 2).reshape(B, L, H))) + x)
        return self.ln2(self.drop(self.ff2(F.gelu(self.ff1(a)))) + a)


class Encoder(nn.Module):
    """HF BertModel without the pooler: embeddings (word, position, type), LayerNorm, layers."""

    def __init__(self, c, vocab=4101):
        super().__init__()
        H = c["hidden"]
        self.word, self.pos, self.typ = nn.Embedding(vocab, H), nn.Embedding(512, H), nn.Embedding(2, H)
        self.ln = nn.LayerNorm(H, eps=1e-12)
        self.drop = nn.Dropout(c["dropout"])
        self.layers = nn.ModuleList(Layer(c) for _ in range(c["layers"]))

    def encode(self, ids, mask):
        L = ids.shape[1]
        x = self.drop(self.ln(self.word(ids) + self.pos(torch.arange(L))[None] + self.typ(torch.zeros_like(ids))))
        add = (1.0 - mask[:, None, None, :].float()) * torch.finfo(torch.float32).min
        for layer in self.layers:
            x = layer(x, add)
        return x


class Bert(Encoder):
    """BertForMaskedLM as HF computes it: the decoder (tied to the word embeddings) on every position."""

    def __init__(self, c, vocab=4101):
        super().__init__(c, vocab)
        H = c["hidden"]
        self.tdense, self.tln = nn.Linear(H, H), nn.LayerNorm(H, eps=1e-12)
        self.bias = nn.Parameter(torch.zeros(vocab))

    def forward(self, ids, mask):
        return F.linear(self.tln(F.gelu(self.tdense(self.encode(ids, mask)))), self.word.weight, self.bias)


def main():
    name, threads, batch, seq, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    m = Bert(CONFIGS[name])
    m.train()
    opt = torch.optim.AdamW(m.parameters(), lr=4e-4, betas=(0.9, 0.98), eps=1e-6, weight_decay=0.01)
    ids = torch.randint(5, 4101, (batch, seq))
    mask = torch.ones(batch, seq, dtype=torch.long)
    labels = torch.where(torch.rand(batch, seq) < 0.15, ids, torch.full((batch, seq), -100))

    def step():
        opt.zero_grad()
        logits = m(ids, mask)
        F.cross_entropy(logits.view(-1, logits.shape[-1]), labels.view(-1), ignore_index=-100).backward()
        torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        opt.step()

    step()
    best = 1e9
    for _ in range(steps):
        t0 = time.perf_counter()
        step()
        best = min(best, time.perf_counter() - t0)
    print(json.dumps({"impl": "pytorch", "config": name, "threads": threads, "step_s": best,
                      "tokens_per_s": batch * seq / best}))


if __name__ == "__main__":
    main()
