#!/usr/bin/env python3
"""Independent forward pass of BertForMaskedLM in plain torch.nn.functional, from an
exported HF directory (config.json + model.safetensors, read without any HF library).
Compares with the logits genemask computed; prints the max abs difference.
Usage: bert_reference.py MODEL_DIR IO.safetensors [TOLERANCE]"""
import json
import math
import struct
import sys

import numpy as np
import torch
import torch.nn.functional as F

DT = {"F32": np.float32, "I64": np.int64}


def load_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, h in header.items():
        if name == "__metadata__":
            continue
        a, b = h["data_offsets"]
        arr = np.frombuffer(data[a:b], dtype=DT[h["dtype"]]).reshape(h["shape"])
        out[name] = torch.from_numpy(arr.copy())
    return out


def encode(cfg, w, ids, mask):
    """Last hidden states [B, L, H] of the encoder."""
    H, nh = cfg["hidden_size"], cfg["num_attention_heads"]
    dh, eps = H // nh, cfg["layer_norm_eps"]
    B, L = ids.shape
    p = "bert.embeddings."
    x = w[p + "word_embeddings.weight"][ids] + w[p + "position_embeddings.weight"][torch.arange(L)][None] \
        + w[p + "token_type_embeddings.weight"][torch.zeros_like(ids)]
    x = F.layer_norm(x, (H,), w[p + "LayerNorm.weight"], w[p + "LayerNorm.bias"], eps)
    add = (1.0 - mask[:, None, None, :].float()) * torch.finfo(torch.float32).min
    for i in range(cfg["num_hidden_layers"]):
        q = f"bert.encoder.layer.{i}."
        lin = lambda t, n: F.linear(t, w[q + n + ".weight"], w[q + n + ".bias"])
        heads = lambda t: t.view(B, L, nh, dh).transpose(1, 2)
        qq, kk, vv = (heads(lin(x, "attention.self." + n)) for n in ("query", "key", "value"))
        probs = torch.softmax(qq @ kk.transpose(-1, -2) / math.sqrt(dh) + add, dim=-1)
        ctx = (probs @ vv).transpose(1, 2).reshape(B, L, H)
        a = F.layer_norm(lin(ctx, "attention.output.dense") + x, (H,),
                         w[q + "attention.output.LayerNorm.weight"], w[q + "attention.output.LayerNorm.bias"], eps)
        h = F.gelu(lin(a, "intermediate.dense"))
        x = F.layer_norm(lin(h, "output.dense") + a, (H,), w[q + "output.LayerNorm.weight"],
                         w[q + "output.LayerNorm.bias"], eps)
    return x


def forward(cfg, w, ids, mask):
    H, eps = cfg["hidden_size"], cfg["layer_norm_eps"]
    x = encode(cfg, w, ids, mask)
    c = "cls.predictions."
    t = F.gelu(F.linear(x, w[c + "transform.dense.weight"], w[c + "transform.dense.bias"]))
    t = F.layer_norm(t, (H,), w[c + "transform.LayerNorm.weight"], w[c + "transform.LayerNorm.bias"], eps)
    return F.linear(t, w["bert.embeddings.word_embeddings.weight"], w[c + "bias"])


def main():
    model_dir, io_path = sys.argv[1], sys.argv[2]
    tol = float(sys.argv[3]) if len(sys.argv) > 3 else 1e-5
    with open(model_dir + "/config.json") as f:
        cfg = json.load(f)
    w = load_safetensors(model_dir + "/model.safetensors")
    io = load_safetensors(io_path)
    with torch.no_grad():
        logits = forward(cfg, w, io["input_ids"], io["attention_mask"])
    real = io["attention_mask"].bool()
    diff = (logits - io["logits"])[real].abs().max().item()
    print(f"max abs difference {diff:.3g} over {int(real.sum())} positions (tolerance {tol:g})")
    sys.exit(0 if diff <= tol else 1)


if __name__ == "__main__":
    main()
