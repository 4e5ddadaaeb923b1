#!/usr/bin/env python3
"""The Hugging Face round trip with the real `transformers` library (the pinned one in .venv).

  hf_transformers_check.py export MODEL_DIR IO.safetensors [TOL]
      MODEL_DIR was written by genemask (export-hf, or finetune --save-model); IO holds
      input_ids, attention_mask and genemask's outputs for them: `logits` and `hidden` (last
      hidden states) of an MLM export, or `cls_logits` of a classifier. Checks that
      AutoTokenizer turns 6-mer text into the same ids, that the Auto classes load the
      directory with no missing weights (and no unexpected ones but the MLM head, which
      AutoModel drops for every BERT MLM checkpoint), and that their outputs equal
      genemask's within TOL (default 1e-5) on the real positions.
  hf_transformers_check.py save OUT_DIR
      Makes a small random BertForMaskedLM and BertForSequenceClassification with
      transformers, writes each as save_pretrained does (model.safetensors) and as
      pytorch_model.bin (torch.save of the state_dict, what save_pretrained wrote before
      transformers 5), and OUT_DIR/io.safetensors: a padded batch and transformers' MLM
      logits, last hidden states and classifier logits for it."""
import json
import os
import sys

import torch
from safetensors.torch import load_file, save_file
from transformers import (AutoModel, AutoModelForMaskedLM, AutoModelForSequenceClassification, AutoTokenizer,
                          BertConfig, BertForMaskedLM, BertForSequenceClassification)
from transformers.utils import logging

logging.set_verbosity_error()


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def max_diff(a, b, mask):
    return (a - b)[mask.bool()].abs().max().item()


def check_export(model_dir, io_path, tol):
    io = load_file(io_path)
    ids, mask = io["input_ids"], io["attention_mask"]
    with open(os.path.join(model_dir, "vocab.txt")) as f:
        vocab = [l.rstrip("\n") for l in f]
    tok = AutoTokenizer.from_pretrained(model_dir)
    for row, m in zip(ids.tolist(), mask.tolist()):
        n = sum(m)
        text = " ".join(vocab[i] for i in row[1:n - 1])  # the 6-mers between [CLS] and [SEP]
        got = tok(text)["input_ids"]
        if got != row[:n]:
            fail(f"AutoTokenizer: {text[:40]}... -> {got[:8]}..., genemask {row[:8]}...")
    print(f"AutoTokenizer ({type(tok).__name__}): {ids.shape[0]} rows of 6-mer text give genemask's ids")
    with open(os.path.join(model_dir, "config.json")) as f:
        arch = json.load(f).get("architectures", ["BertForMaskedLM"])[0]
    if arch == "BertForSequenceClassification":
        m, info = AutoModelForSequenceClassification.from_pretrained(model_dir, output_loading_info=True)
        if info["missing_keys"] or info["unexpected_keys"]:
            fail(f"AutoModelForSequenceClassification: {info}")
        with torch.no_grad():
            out = m.eval()(input_ids=ids, attention_mask=mask).logits
        d = (out - io["cls_logits"]).abs().max().item()
        print(f"AutoModelForSequenceClassification: logits max abs difference {d:.3g} (tolerance {tol:g})")
        if d > tol:
            fail("classifier logits differ")
        return
    m, info = AutoModelForMaskedLM.from_pretrained(model_dir, output_loading_info=True)
    if info["missing_keys"] or info["unexpected_keys"] or info["mismatched_keys"]:
        fail(f"AutoModelForMaskedLM: {info}")
    with torch.no_grad():
        out = m.eval()(input_ids=ids, attention_mask=mask, output_hidden_states=True)
    d = max_diff(out.logits, io["logits"], mask)
    print(f"AutoModelForMaskedLM: no missing or unexpected weights; logits max abs difference {d:.3g}")
    if d > tol:
        fail("MLM logits differ")
    # AutoModel (BertModel) drops the MLM head and, without a pooler in the directory (an
    # MLM-only model, as transformers' own BertForMaskedLM saves), initialises one.
    base, info = AutoModel.from_pretrained(model_dir, output_loading_info=True)
    extra = {k for k in info["unexpected_keys"] if not k.startswith("cls.")}
    stored = set(load_file(os.path.join(model_dir, "model.safetensors")))
    allowed_missing = set() if "bert.pooler.dense.weight" in stored else {"pooler.dense.weight", "pooler.dense.bias"}
    if set(info["missing_keys"]) - allowed_missing or extra or info["mismatched_keys"]:
        fail(f"AutoModel: {info}")
    with torch.no_grad():
        h = base.eval()(input_ids=ids, attention_mask=mask).last_hidden_state
    d = max_diff(h, io["hidden"], mask)
    print(f"AutoModel: loads as transformers' own BertForMaskedLM checkpoints do; hidden states max abs difference {d:.3g}")
    if d > tol:
        fail("hidden states differ")


def save_models(out):
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=4101, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=64, max_position_embeddings=64)
    mlm = BertForMaskedLM(cfg).eval()
    clf = BertForSequenceClassification(cfg).eval()  # 2 labels: transformers' default
    with torch.no_grad():  # HF initialises biases to 0: make every tensor matter
        for p in list(mlm.parameters()) + list(clf.parameters()):
            p.add_(0.02 * torch.randn_like(p))
    for name, model in [("mlm", mlm), ("cls", clf)]:
        model.save_pretrained(os.path.join(out, name + "-st"))
        d = os.path.join(out, name + "-bin")
        os.makedirs(d, exist_ok=True)
        model.config.to_json_file(os.path.join(d, "config.json"))
        torch.save(model.state_dict(), os.path.join(d, "pytorch_model.bin"))
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(5, 4101, (3, 20), generator=g)
    mask = torch.ones(3, 20, dtype=torch.long)
    ids[:, 0], ids[0, 19], ids[1, 13], ids[2, 7] = 2, 3, 3, 3
    mask[1, 14:], mask[2, 8:] = 0, 0
    ids[mask == 0] = 0
    with torch.no_grad():
        o = mlm(input_ids=ids, attention_mask=mask, output_hidden_states=True)
        c = clf(input_ids=ids, attention_mask=mask).logits
    save_file({"input_ids": ids, "attention_mask": mask, "logits": o.logits.contiguous(),
               "hidden": o.hidden_states[-1].contiguous(), "cls_logits": c.contiguous()},
              os.path.join(out, "io.safetensors"))
    print(f"saved transformers models and io.safetensors under {out}")


if __name__ == "__main__":
    if sys.argv[1] == "export":
        check_export(sys.argv[2], sys.argv[3], float(sys.argv[4]) if len(sys.argv) > 4 else 1e-5)
    elif sys.argv[1] == "save":
        save_models(sys.argv[2])
    else:
        fail(f"unknown mode {sys.argv[1]}")
