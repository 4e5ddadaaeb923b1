#!/usr/bin/env python3
"""The CUDA paths on a real GPU, against the CPU path of the same binary: pretraining in
fp32 and bf16, checkpoint and resume on the GPU (dropout on: the GPU's random state must
come back), the NCCL all-reduce at world size 1, MPI with 2 ranks sharing one GPU, embed
and finetune. Exits 77 (reported by ctest as skipped, never as passed) where `genemask
--version` sees no GPU."""
import json
import os
import random
import re
import shutil
import sys
import tempfile
import unittest

import numpy as np

from test_cli import run, summary
from test_corpus import write_genome

SKIP = 77
# Dropout 0: CPU and GPU then compute the same function, up to float rounding.
TINY = {"model_type": "bert", "vocab_size": 4101, "hidden_size": 64, "num_hidden_layers": 2,
        "num_attention_heads": 4, "intermediate_size": 128, "max_position_embeddings": 512,
        "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}


def visible_gpus():
    last = run(["--version"]).stdout.strip().splitlines()[-1]
    m = re.match(r"GPUs visible: (\d+)", last)
    return int(m.group(1)) if m else 0


def losses(run_dir):
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        rows = [json.loads(l) for l in f if l.strip()]
    return [(r["step"], r["loss"]) for r in rows if "loss" in r]


class Gpu(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="genemask-gpu-")
        fa = os.path.join(cls.tmp, "g.fa")
        write_genome(fa, random.Random(11), records=2, length=(30000, 40000))
        cls.shards = os.path.join(cls.tmp, "shards")
        run(["shards", "--genome", fa, "--out", cls.shards, "--max-tokens", "120", "--min-tokens", "40"])
        cls.cfg = os.path.join(cls.tmp, "tiny.json")
        with open(cls.cfg, "w") as f:
            json.dump(TINY, f)
        cls.cfg_dropout = os.path.join(cls.tmp, "tiny-dropout.json")
        with open(cls.cfg_dropout, "w") as f:
            json.dump(dict(TINY, hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1), f)
        rng = random.Random(12)
        cls.train, cls.test = os.path.join(cls.tmp, "train.csv"), os.path.join(cls.tmp, "test.csv")
        for path, n in [(cls.train, 40), (cls.test, 30)]:
            with open(path, "w") as f:
                f.write("sequence,label\n")
                for i in range(n):
                    s = "".join(rng.choice("ACGT") for _ in range(rng.randint(60, 300)))
                    f.write(s + f",{i % 2}\n")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def pretrain(self, out, *extra, ranks=None, **opts):
        o = {"masking": "random", "steps": 6, "warmup": 2, "batch_per_rank": 4, "grad_accum": 2, "log_every": 1,
             "eval_every": 0, "checkpoint_every": 3, "threads": 2, "seed": 7}
        o.update(opts)
        args = ["pretrain", "--shards", self.shards, "--model", self.cfg, "--out", out]
        for k, v in o.items():
            args += ["--" + k.replace("_", "-"), str(v)]
        return summary(run(args + list(extra), ranks=ranks))

    def test_fp32_on_gpu_matches_cpu(self):
        cpu, gpu = os.path.join(self.tmp, "cpu"), os.path.join(self.tmp, "gpu")
        self.pretrain(cpu)
        self.pretrain(gpu, "--device", "cuda", "--no-tf32")  # TF32 would round products to 10 bits
        a, b = losses(cpu), losses(gpu)
        self.assertEqual([s for s, _ in a], [s for s, _ in b])
        # Same initial weights (made on the CPU), same batches and masks; only the kernels
        # differ. Six AdamW steps amplify float32 rounding a little: 1e-3 relative.
        for (_, la), (_, lb) in zip(a, b):
            self.assertAlmostEqual(la, lb, delta=1e-3 * abs(la))

    def test_bf16_loss_close_to_fp32(self):
        f32, b16 = os.path.join(self.tmp, "f32"), os.path.join(self.tmp, "b16")
        self.pretrain(f32, "--device", "cuda", steps=1)
        s = self.pretrain(b16, "--device", "cuda", "--precision", "bf16", steps=1)
        self.assertTrue(np.isfinite(s["last_loss"]))
        # Step 1 is before any update: the same weights and batch, bf16 matrix products
        # (8-bit mantissa, relative rounding 2^-9 per product, accumulated in fp32): 2%.
        (_, l32), = losses(f32)
        (_, l16), = losses(b16)
        self.assertAlmostEqual(l16, l32, delta=0.02 * l32)

    def test_checkpoint_and_resume_on_gpu(self):
        whole, cut = os.path.join(self.tmp, "whole"), os.path.join(self.tmp, "cut")
        drop = ("--device", "cuda", "--model", self.cfg_dropout)
        self.pretrain(whole, *drop)
        self.pretrain(cut, *drop, stop_after=5)  # dies after step 5; checkpoint at 3
        s = self.pretrain(cut, *drop, "--resume")
        self.assertEqual(s["start_step"], 3)
        self.assertTrue(os.path.exists(os.path.join(cut, "checkpoints", "step-00000006", "cuda-rng-rank00000.pt")))
        a, b = losses(whole), losses(cut)
        self.assertEqual([x for x, _ in a], [x for x, _ in b])
        # Dropout draws from the GPU's generator, restored from the checkpoint; masks from
        # (seed, epoch, index): the same steps, up to the GPU's non-deterministic reductions.
        # (A fresh GPU stream instead of the restored one moves the loss by far more.)
        for (_, la), (_, lb) in zip(a, b):
            self.assertAlmostEqual(la, lb, delta=1e-5 * abs(la))

    def test_nccl_at_world_size_one_equals_no_allreduce(self):
        mpi, nccl = os.path.join(self.tmp, "ar-none"), os.path.join(self.tmp, "ar-nccl")
        self.assertEqual(self.pretrain(mpi, "--device", "cuda", "--allreduce", "mpi")["allreduce"], "none (one rank)")
        self.assertEqual(self.pretrain(nccl, "--device", "cuda", "--allreduce", "nccl")["allreduce"], "NCCL")
        # An NCCL sum over one rank is a copy: the same steps up to the GPU's reductions.
        for (_, la), (_, lb) in zip(losses(mpi), losses(nccl)):
            self.assertAlmostEqual(la, lb, delta=1e-5 * abs(la))

    def test_two_ranks_on_the_gpus_equal_one_rank_with_accumulation(self):
        one, two = os.path.join(self.tmp, "one"), os.path.join(self.tmp, "two")
        self.pretrain(one, "--device", "cuda", "--no-tf32", grad_accum=2)
        s = self.pretrain(two, "--device", "cuda", "--no-tf32", grad_accum=1, ranks=2)
        # Two ranks on one GPU share it through MPI (pinned staging); on two GPUs, NCCL.
        self.assertEqual(s["allreduce"], "MPI" if visible_gpus() == 1 else "NCCL")
        self.assertEqual(s["effective_batch"], 8)
        for (_, la), (_, lb) in zip(losses(one), losses(two)):
            self.assertAlmostEqual(la, lb, delta=1e-4 * abs(la))

    def test_embed_on_gpu_matches_cpu(self):
        import h5py
        run_dir = os.path.join(self.tmp, "emb-run")
        self.pretrain(run_dir, steps=2, checkpoint_every=2)
        out = {}
        for dev in ["cpu", "cuda"]:
            out[dev] = os.path.join(self.tmp, f"emb-{dev}.h5")
            s = summary(run(["embed", "--model", run_dir, "--input", self.test, "--out", out[dev], "--device", dev,
                             "--batch", "8"]))
            self.assertEqual(s["sequences"], 30)
        with h5py.File(out["cpu"]) as c, h5py.File(out["cuda"]) as g:
            for key in ["cls", "mean"]:
                # LayerNorm outputs of size O(1); TF32 is off for fp32 products.
                np.testing.assert_allclose(c[key][...], g[key][...], rtol=0, atol=1e-4)

    def test_bf16_embed_and_finetune_close_to_fp32(self):
        import h5py
        run_dir = os.path.join(self.tmp, "emb16-run")
        self.pretrain(run_dir, steps=2, checkpoint_every=2)
        out = {}
        for prec in ["fp32", "bf16"]:
            out[prec] = os.path.join(self.tmp, f"emb-{prec}.h5")
            run(["embed", "--model", run_dir, "--input", self.test, "--out", out[prec], "--device", "cuda",
                 "--precision", prec, "--batch", "8"])
        with h5py.File(out["fp32"]) as a, h5py.File(out["bf16"]) as b:
            for key in ["cls", "mean"]:
                # LayerNorm outputs of size O(1) through two bf16 layers: 5e-2.
                np.testing.assert_allclose(a[key][...], b[key][...], rtol=0, atol=5e-2)
        probs = {}
        for prec in ["fp32", "bf16"]:
            o = os.path.join(self.tmp, f"ft16-{prec}")
            run(["finetune", "--model", "random", "--config", self.cfg, "--train", self.train, "--test", self.test,
                 "--out", o, "--epochs", "1", "--batch", "5", "--dropout", "0", "--seed", "3", "--device", "cuda",
                 "--precision", prec])
            probs[prec] = np.loadtxt(os.path.join(o, "predictions.tsv"), skiprows=1, usecols=(2, 3))
        # 8 AdamW steps on bf16 forward passes: probabilities within 0.05.
        np.testing.assert_allclose(probs["fp32"], probs["bf16"], rtol=0, atol=5e-2)

    def test_finetune_on_gpu_matches_cpu(self):
        probs = {}
        for dev in ["cpu", "cuda"]:
            out = os.path.join(self.tmp, f"ft-{dev}")
            run(["finetune", "--model", "random", "--config", self.cfg, "--train", self.train, "--test", self.test,
                 "--out", out, "--epochs", "2", "--batch", "5", "--dropout", "0", "--seed", "3", "--device", dev])
            probs[dev] = np.loadtxt(os.path.join(out, "predictions.tsv"), skiprows=1, usecols=(2, 3))
        # 16 AdamW steps from the same weights and batches: 1e-3 on probabilities.
        np.testing.assert_allclose(probs["cpu"], probs["cuda"], rtol=0, atol=1e-3)


if __name__ == "__main__":
    if visible_gpus() == 0:
        print("no GPU visible (genemask --version): the GPU tests are skipped")
        sys.exit(SKIP)
    unittest.main(verbosity=2)
