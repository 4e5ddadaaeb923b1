#!/usr/bin/env python3
"""Turns an exported model directory into the layout of DNABERT's release: a torch.save'd
state_dict in pytorch_model.bin with the tied decoder copies and the position_ids buffer
that HF checkpoints of that era carry; removes model.safetensors.
Usage: to_pytorch_bin.py MODEL_DIR [--cut-record N]
With --cut-record N, the zip entry of the first tensor's data is cut to N bytes (a damaged
or crafted file: the pickle then declares more bytes than the record holds)."""
import collections
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bert_reference import load_safetensors  # noqa: E402

d = sys.argv[1]
w = load_safetensors(os.path.join(d, "model.safetensors"))
sd = collections.OrderedDict()
sd["bert.embeddings.position_ids"] = torch.arange(w["bert.embeddings.position_embeddings.weight"].shape[0])[None]
for k in sorted(w):
    sd[k] = w[k]
sd["cls.predictions.decoder.weight"] = w["bert.embeddings.word_embeddings.weight"]
sd["cls.predictions.decoder.bias"] = w["cls.predictions.bias"]
torch.save(sd, os.path.join(d, "pytorch_model.bin"))
os.remove(os.path.join(d, "model.safetensors"))
if "--cut-record" in sys.argv:
    import zipfile
    n = int(sys.argv[sys.argv.index("--cut-record") + 1])
    path = os.path.join(d, "pytorch_model.bin")
    with zipfile.ZipFile(path) as z:
        items = [(i, z.read(i.filename)) for i in z.infolist()]
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        for i, data in items:
            z.writestr(i, data[:n] if i.filename.endswith("/data/0") else data)
