#!/usr/bin/env python3
"""Independent BertForSequenceClassification in plain torch.nn.functional (the encoder of
bert_reference.py, then HF's pooler tanh(dense(h[:, 0])) and the linear classifier), read
from a saved HF directory without any HF library.

  classifier_reference.py forward MODEL_DIR IO.safetensors TOL
      IO: input_ids, attention_mask, logits (genemask's). Compares the logits.
  classifier_reference.py train INIT_DIR AFTER_DIR IO.safetensors LR WD WARMUP STEPS CLIP TOL
      IO: ids_K, mask_K, labels_K for K = 0..n-1 and loss (genemask's per step). Runs the
      same n steps with torch.optim.AdamW (betas 0.9/0.999, eps 1e-8; no decay on bias and
      LayerNorm), HF's linear warm-up/decay schedule (LambdaLR) and clip_grad_norm_, from
      INIT_DIR's weights; compares the losses and the weights with AFTER_DIR's.
Prints the max abs differences; exit status 0 when within TOL."""
import json
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bert_reference import encode, load_safetensors  # noqa: E402


def logits(cfg, w, ids, mask):
    x = encode(cfg, w, ids, mask)
    pooled = torch.tanh(F.linear(x[:, 0], w["bert.pooler.dense.weight"], w["bert.pooler.dense.bias"]))
    return F.linear(pooled, w["classifier.weight"], w["classifier.bias"])  # dropout: eval / p = 0


def load(d):
    with open(os.path.join(d, "config.json")) as f:
        cfg = json.load(f)
    return cfg, load_safetensors(os.path.join(d, "model.safetensors"))


def hf_linear_schedule(warmup, total):
    """transformers.get_linear_schedule_with_warmup's lambda."""
    def f(step):
        if step < warmup:
            return float(step) / float(max(1, warmup))
        return max(0.0, float(total - step) / float(max(1, total - warmup)))
    return f


def forward_mode(model_dir, io_path, tol):
    cfg, w = load(model_dir)
    io = load_safetensors(io_path)
    with torch.no_grad():
        out = logits(cfg, w, io["input_ids"], io["attention_mask"])
    diff = (out - io["logits"]).abs().max().item()
    print(f"logits: max abs difference {diff:.3g} over {out.numel()} values (tolerance {tol:g})")
    return diff <= tol


def train_mode(init_dir, after_dir, io_path, lr, wd, warmup, total, clip, tol):
    cfg, w0 = load(init_dir)
    assert cfg["hidden_dropout_prob"] == 0 and cfg["attention_probs_dropout_prob"] == 0
    _, w1 = load(after_dir)
    io = load_safetensors(io_path)
    w = {k: v.clone().requires_grad_(True) for k, v in w0.items()}
    decay = [v for k, v in w.items() if "bias" not in k and "LayerNorm" not in k]
    no_decay = [v for k, v in w.items() if "bias" in k or "LayerNorm" in k]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": wd}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=lr, betas=(0.9, 0.999), eps=1e-8)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, hf_linear_schedule(warmup, total))
    n = sum(1 for k in io if k.startswith("ids_"))
    loss_diff = 0.0
    for k in range(n):
        opt.zero_grad()
        loss = F.cross_entropy(logits(cfg, w, io[f"ids_{k}"], io[f"mask_{k}"]), io[f"labels_{k}"])
        loss.backward()
        if clip > 0:
            torch.nn.utils.clip_grad_norm_(list(w.values()), clip)
        opt.step()
        sched.step()
        loss_diff = max(loss_diff, abs(loss.item() - io["loss"][k].item()))
    wdiff, worst, moved = 0.0, "", 0.0
    for k, v in w.items():
        d = (v.detach() - w1[k]).abs().max().item()
        moved = max(moved, (w1[k] - w0[k]).abs().max().item())
        if d > wdiff:
            wdiff, worst = d, k
    print(f"{n} steps: loss max abs difference {loss_diff:.3g}; weights max abs difference {wdiff:.3g} ({worst}); "
          f"largest change of a weight {moved:.3g} (tolerance {tol:g})")
    return loss_diff <= tol and wdiff <= tol and moved > 100 * tol


def main():
    mode = sys.argv[1]
    if mode == "forward":
        ok = forward_mode(sys.argv[2], sys.argv[3], float(sys.argv[4]))
    else:
        a = sys.argv[2:]
        ok = train_mode(a[0], a[1], a[2], float(a[3]), float(a[4]), int(a[5]), int(a[6]), float(a[7]), float(a[8]))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
