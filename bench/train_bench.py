#!/usr/bin/env python3
"""The same BERT MLM training step in Python PyTorch (the project environment's PyTorch
2.11, the same LibTorch): an HF-style BertForMaskedLM written with torch.nn, attention through
F.scaled_dot_product_attention (as transformers' "sdpa" attention), the decoder on every
position (as HF computes it), AdamW (fused on a GPU, as HF's Trainer picks), clipping; bf16
under torch.autocast on a GPU.
Usage: train_bench.py CONFIG THREADS BATCH SEQ STEPS [DEVICE cpu|cuda] [PRECISION fp32|bf16]"""
import json
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
        ctx = F.scaled_dot_product_attention(sp(self.q(x)), sp(self.k(x)), sp(self.v(x)), attn_mask=add,
                                             dropout_p=self.drop.p if self.training else 0.0)
        a = self.ln1(self.drop(self.o(ctx.transpose(1, 2).reshape(B, L, H))) + x)
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
        x = self.drop(self.ln(self.word(ids) + self.pos(torch.arange(L, device=ids.device))[None]
                              + self.typ(torch.zeros_like(ids))))
        add = None if mask is None else mask[:, None, None, :].bool()
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
    device = sys.argv[6] if len(sys.argv) > 6 else "cpu"
    precision = sys.argv[7] if len(sys.argv) > 7 else "fp32"
    if precision not in ("fp32", "bf16"):  # another name would run fp32 under it
        print(f"train_bench.py: PRECISION must be fp32 or bf16, got '{precision}'", file=sys.stderr)
        sys.exit(2)
    bf16 = precision == "bf16"
    torch.set_num_threads(threads)
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.manual_seed(0)
    m = Bert(CONFIGS[name]).to(device)
    m.train()
    opt = torch.optim.AdamW(m.parameters(), lr=4e-4, betas=(0.9, 0.98), eps=1e-6, weight_decay=0.01,
                            fused=device == "cuda")
    ids = torch.randint(5, 4101, (batch, seq))
    labels = torch.where(torch.rand(batch, seq) < 0.15, ids, torch.full((batch, seq), -100)).to(device)
    ids = ids.to(device)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)

    def step():
        opt.zero_grad()
        with torch.autocast(device_type=device, dtype=torch.bfloat16, enabled=bf16):
            logits = m(ids, None)  # no padding, as the genemask side
        F.cross_entropy(logits.float().view(-1, logits.shape[-1]), labels.view(-1), ignore_index=-100).backward()
        torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        opt.step()

    step()
    step()
    sync()
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        step()
        sync()
        times.append(time.perf_counter() - t0)
    best, med = min(times), sorted(times)[len(times) // 2]
    peak = torch.cuda.max_memory_allocated() / 2**30 if device == "cuda" else None  # none measured on a CPU
    print(json.dumps({"impl": "pytorch", "config": name, "threads": threads, "device": device,
                      "precision": "bf16" if bf16 else "fp32", "batch": batch, "seq": seq, "step_s": best,
                      "median_step_s": med, "tokens_per_s": batch * seq / best,
                      "median_tokens_per_s": batch * seq / med, "peak_memory_gib": peak}))


if __name__ == "__main__":
    main()
