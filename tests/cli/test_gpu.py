#!/usr/bin/env python3
"""The CUDA paths against the CPU path of the same binary: pretraining in fp32 and bf16,
checkpoint and resume (dropout on: the device's random state must come back), the NCCL
all-reduce at world size 1, MPI with 2 ranks, embed and finetune.

Every test runs its body once per device, as a subTest: `cpu` always, and `cuda` as well
where `genemask --version` reports a GPU visible (its last line, "GPUs visible: N"). The
file never skips as a whole, so CI runs every body on the CPU; only the assertions that
need a GPU change there:
- a cuda-vs-cpu comparison becomes cpu-vs-cpu, which must be exactly equal (the same
  binary, threads and seed), or within the stated tolerance where the two sides really
  compute differently (2 ranks against accumulation);
- bf16 runs on both (CPU autocast; emulated and slower on a CPU without AMX-BF16 or
  AVX512-BF16, which then says so once on stderr), with the same tolerances;
- `--allreduce nccl` is refused on the CPU ("--allreduce nccl needs --device cuda"): the
  refusal is asserted and `--allreduce auto` (one rank: no all-reduce) runs in its place;
  "NCCL chosen" is asserted only on cuda;
- `cuda-rng-rank00000.pt` is written only on cuda (asserted absent on the CPU).
On this 2-core CPU the whole file takes well under a minute and a half."""
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

# Dropout 0: CPU and GPU then compute the same function, up to float rounding.
TINY = {"model_type": "bert", "vocab_size": 4101, "hidden_size": 64, "num_hidden_layers": 2,
        "num_attention_heads": 4, "intermediate_size": 128, "max_position_embeddings": 512,
        "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}
NCCL_REFUSED = "--allreduce nccl needs --device cuda"


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
        cls.gpus = visible_gpus()
        cls.devices = ["cpu"] + (["cuda"] if cls.gpus > 0 else [])
        print(f"GPUs visible: {cls.gpus}; every test runs on: {', '.join(cls.devices)}", file=sys.stderr)
        cls.tmp = tempfile.mkdtemp(prefix="genemask-gpu-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, ignore_errors=True)  # also when setUpClass fails
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

    def assert_same_curve(self, a, b, rel):
        """Two runs' (step, loss) lists: steps 1..6 in both, losses within rel (relative)."""
        self.assertEqual([x for x, _ in a], list(range(1, 7)))
        self.assertEqual([x for x, _ in a], [x for x, _ in b])
        for (_, la), (_, lb) in zip(a, b):
            self.assertAlmostEqual(la, lb, delta=rel * abs(la))

    def each_device(self, body):
        """body(dev) once per device, each as a subTest with its own directory."""
        for dev in self.devices:
            with self.subTest(device=dev):
                d = os.path.join(self.tmp, self._testMethodName, dev)
                os.makedirs(d)
                body(dev, d)

    def pretrain_args(self, out, *extra, model=None, **opts):
        """pretrain on the tiny config (model: another config file); opts become --key value."""
        o = {"masking": "random", "steps": 6, "warmup": 2, "batch_per_rank": 4, "grad_accum": 2, "log_every": 1,
             "eval_every": 0, "checkpoint_every": 3, "threads": 2, "seed": 7}
        o.update(opts)
        args = ["pretrain", "--shards", self.shards, "--model", model or self.cfg, "--out", out]
        for k, v in o.items():
            args += ["--" + k.replace("_", "-"), str(v)]
        return args + list(extra)

    def pretrain(self, out, *extra, ranks=None, model=None, **opts):
        return summary(run(self.pretrain_args(out, *extra, model=model, **opts), ranks=ranks))

    def run_bf16(self, dev, args):
        """args with --precision bf16: (process, "bf16"). bf16 runs on every device; a CPU
        without bf16 instructions says so in one note, per `genemask --version`."""
        p = run(args + ["--precision", "bf16"])
        slow = "bf16 instructions: none" in run(["--version"]).stdout
        self.assertEqual(p.stderr.count("bf16 matrix products are emulated"), 1 if dev == "cpu" and slow else 0,
                         p.stderr)
        return p, "bf16"

    def test_fp32_on_device_matches_cpu(self):
        cpu = os.path.join(self.tmp, "fp32-cpu")
        self.pretrain(cpu)

        def body(dev, d):
            self.pretrain(os.path.join(d, "run"), "--no-tf32", device=dev)  # TF32 would round products to 10 bits
            # Same initial weights (made on the CPU), same batches and masks; only the kernels
            # differ. Six AdamW steps amplify float32 rounding a little: 1e-3 relative on
            # the GPU; on the CPU the same kernels: equal.
            self.assert_same_curve(losses(cpu), losses(os.path.join(d, "run")), 1e-3 if dev == "cuda" else 0.0)
        self.each_device(body)

    def test_bf16_loss_close_to_fp32(self):
        def body(dev, d):
            f32, b16 = os.path.join(d, "f32"), os.path.join(d, "b16")
            self.pretrain(f32, device=dev, steps=1)
            p, prec = self.run_bf16(dev, self.pretrain_args(b16, device=dev, steps=1))
            s = summary(p)
            self.assertTrue(np.isfinite(s["loss"]))
            self.assertEqual(s["steps_done"], 1)
            # Step 1 is before any update: the same weights and batch, bf16 matrix products
            # (8-bit mantissa, relative rounding 2^-9 per product, accumulated in fp32): 2%.
            (_, l32), = losses(f32)
            (_, l16), = losses(b16)
            self.assertAlmostEqual(s["loss"], l16, delta=1e-6 * abs(l16))
            self.assertAlmostEqual(l16, l32, delta=(0.02 if prec == "bf16" else 0.0) * l32)
        self.each_device(body)

    def test_checkpoint_and_resume(self):
        def body(dev, d):
            whole, cut = os.path.join(d, "whole"), os.path.join(d, "cut")
            kw = {"model": self.cfg_dropout, "device": dev}
            self.pretrain(whole, **kw)
            self.pretrain(cut, stop_after=5, **kw)  # dies after step 5; checkpoint at 3
            s = self.pretrain(cut, "--resume", **kw)
            self.assertEqual(s["start_step"], 3)
            self.assertEqual(s["steps_done"], 6)
            ck = os.path.join(cut, "checkpoints", "step-00000006")
            self.assertTrue(os.path.exists(os.path.join(ck, "rng-rank00000.pt")))
            self.assertEqual(os.path.exists(os.path.join(ck, "cuda-rng-rank00000.pt")), dev == "cuda")
            # How the step ran is a setting of the run: the device, TF32 where it rounds (a GPU
            # in fp32; null elsewhere) and the step's shapes (fixed where CUDA graphs run).
            with open(os.path.join(ck, "state.json")) as f:
                st = json.load(f)
            fp32_gpu = dev == "cuda" and st["precision"] == "fp32"
            self.assertEqual((st["device"], st["tf32"], st["step_shapes"]),
                             (dev, True if fp32_gpu else None, "fixed" if s["cuda_graphs"] == "on" else "per batch"))
            if dev == "cuda":  # --resume refuses a flipped --tf32 of an fp32 run on a GPU
                tf = os.path.join(d, "tf32")
                self.pretrain(tf, "--precision", "fp32", steps=3, **kw)
                p = run(self.pretrain_args(tf, "--precision", "fp32", "--resume", "--no-tf32", steps=4, **kw), check=False)
                self.assertNotEqual(p.returncode, 0)
                self.assertIn("--resume: --tf32/--no-tf32 (on a GPU in fp32; null where it does not apply) is false "
                              "now but true in the run", p.stderr)
            # Dropout draws from the device's generator, restored from the checkpoint; masks
            # from (seed, epoch, index): the same steps, up to the GPU's non-deterministic
            # reductions (a fresh stream instead of the restored one moves the loss by far
            # more); on the CPU exactly.
            self.assert_same_curve(losses(whole), losses(cut), 1e-5 if dev == "cuda" else 0.0)
        self.each_device(body)

    def test_cuda_graphs_give_the_eager_curve(self):
        # On a GPU, --cuda-graphs on (the step captured at step 1, replayed after) against
        # off, dropout 0, fp32 without TF32 (1e-3 relative over six steps: the fixed shapes
        # pad rows and masked rows, so reductions round differently) and bf16 (2e-2). On the
        # CPU the same fixed-shape step without capture (--static-step), and `on` refused.
        def body(dev, d):
            eager, graph = os.path.join(d, "eager"), os.path.join(d, "graph")
            self.pretrain(eager, "--no-tf32", "--cuda-graphs", "off", device=dev)
            if dev == "cuda":
                s = self.pretrain(graph, "--no-tf32", "--cuda-graphs", "on", device=dev)
                self.assertEqual(s["cuda_graphs"], "on")
                self.assertGreaterEqual(s["cuda_graphs_captured"], 2)  # the update's and a micro-batch shape's
            else:
                s = self.pretrain(graph, "--static-step", device=dev)
                self.assertEqual(s["cuda_graphs"], "static (testing)")
                p = run(self.pretrain_args(os.path.join(d, "on"), "--cuda-graphs", "on", device=dev), check=False)
                self.assertNotEqual(p.returncode, 0)
                self.assertIn("the device is a CPU", p.stderr)
            self.assertEqual(s["eager_micro_batches"], 0)
            self.assert_same_curve(losses(eager), losses(graph), 1e-3)
            if dev == "cuda":
                b_eager, b_graph = os.path.join(d, "b-eager"), os.path.join(d, "b-graph")
                self.run_bf16(dev, self.pretrain_args(b_eager, "--cuda-graphs", "off", device=dev))
                self.run_bf16(dev, self.pretrain_args(b_graph, "--cuda-graphs", "on", device=dev))
                self.assert_same_curve(losses(b_eager), losses(b_graph), 2e-2)
        self.each_device(body)

    def test_nccl_at_world_size_one_equals_no_allreduce(self):
        def body(dev, d):
            mpi, nccl = os.path.join(d, "ar-mpi"), os.path.join(d, "ar-nccl")
            self.assertEqual(self.pretrain(mpi, "--allreduce", "mpi", device=dev)["allreduce"], "none (one rank)")
            args = self.pretrain_args(nccl, "--allreduce", "nccl", device=dev)
            if dev == "cuda":
                self.assertEqual(summary(run(args))["allreduce"], "NCCL")
                rel = 1e-5  # an NCCL sum over one rank is a copy: up to the GPU's reductions
            else:
                p = run(args, check=False)
                self.assertNotEqual(p.returncode, 0)
                self.assertIn(NCCL_REFUSED, p.stderr)
                self.assertFalse(os.path.exists(nccl))
                # auto at one rank: no all-reduce either, and the same steps exactly.
                s = self.pretrain(nccl, "--allreduce", "auto", device=dev)
                self.assertEqual(s["allreduce"], "none (one rank)")
                rel = 0.0
            self.assert_same_curve(losses(mpi), losses(nccl), rel)
        self.each_device(body)

    def test_two_ranks_equal_one_rank_with_accumulation(self):
        def body(dev, d):
            one, two = os.path.join(d, "one"), os.path.join(d, "two")
            self.pretrain(one, "--no-tf32", device=dev, grad_accum=2, threads=1)
            s = self.pretrain(two, "--no-tf32", device=dev, grad_accum=1, threads=1, ranks=2)
            # On the CPU and with two ranks on one GPU, MPI (on the GPU through pinned
            # staging); on two GPUs, NCCL.
            self.assertEqual(s["ranks"], 2)
            self.assertEqual(s["allreduce"], "NCCL" if dev == "cuda" and self.gpus > 1 else "MPI")
            self.assertEqual(s["effective_batch"], 8)
            # A sum over ranks instead of over micro-batches: another order of additions.
            self.assert_same_curve(losses(one), losses(two), 1e-4)
        self.each_device(body)

    def embed(self, run_dir, out, dev, *extra):
        return run(["embed", "--model", run_dir, "--input", self.test, "--out", out, "--device", dev,
                    "--batch", "8", *extra])

    def test_embed_on_device_matches_cpu(self):
        import h5py
        run_dir = os.path.join(self.tmp, "emb-run")
        self.pretrain(run_dir, steps=2, checkpoint_every=2)
        cpu = os.path.join(self.tmp, "emb-cpu.h5")
        # fp32 named: `auto` is bf16 on a GPU with bf16 hardware (and on a CPU with AMX).
        self.assertEqual(summary(self.embed(run_dir, cpu, "cpu", "--precision", "fp32"))["precision"], "fp32")

        def body(dev, d):
            out = os.path.join(d, "emb.h5")
            s = summary(self.embed(run_dir, out, dev, "--precision", "fp32"))
            self.assertEqual((s["sequences"], s["precision"]), (30, "fp32"))
            with h5py.File(cpu) as c, h5py.File(out) as g:
                for key in ["cls", "mean"]:
                    self.assertEqual(c[key].shape, g[key].shape)
                    self.assertEqual(c[key].shape[0], 30)
                    # LayerNorm outputs of size O(1); TF32 is off for fp32 products. The CPU
                    # against itself: equal.
                    np.testing.assert_allclose(c[key][...], g[key][...], rtol=0, atol=1e-4 if dev == "cuda" else 0)
        self.each_device(body)

    def finetune(self, out, dev, epochs, *extra):
        return run(["finetune", "--model", "random", "--config", self.cfg, "--train", self.train, "--test",
                    self.test, "--out", out, "--epochs", str(epochs), "--batch", "5", "--dropout", "0", "--seed",
                    "3", "--device", dev, *extra])

    @staticmethod
    def probabilities(out):
        return np.loadtxt(os.path.join(out, "predictions.tsv"), skiprows=1, usecols=(2, 3))

    def test_bf16_embed_and_finetune_close_to_fp32(self):
        import h5py
        run_dir = os.path.join(self.tmp, "emb16-run")
        self.pretrain(run_dir, steps=2, checkpoint_every=2)

        def body(dev, d):
            f32, b16 = os.path.join(d, "emb-fp32.h5"), os.path.join(d, "emb-bf16.h5")
            self.embed(run_dir, f32, dev, "--precision", "fp32")
            p, prec = self.run_bf16(dev, ["embed", "--model", run_dir, "--input", self.test, "--out", b16,
                                          "--device", dev, "--batch", "8"])
            self.assertEqual(summary(p)["sequences"], 30)
            with h5py.File(f32) as a, h5py.File(b16) as b:
                for key in ["cls", "mean"]:
                    # LayerNorm outputs of size O(1) through two bf16 layers: 5e-2.
                    np.testing.assert_allclose(a[key][...], b[key][...], rtol=0, atol=5e-2 if prec == "bf16" else 0)
            o32, o16 = os.path.join(d, "ft-fp32"), os.path.join(d, "ft-bf16")
            self.finetune(o32, dev, 1, "--precision", "fp32")
            _, prec = self.run_bf16(dev, ["finetune", "--model", "random", "--config", self.cfg, "--train",
                                          self.train, "--test", self.test, "--out", o16, "--epochs", "1", "--batch",
                                          "5", "--dropout", "0", "--seed", "3", "--device", dev])
            a, b = self.probabilities(o32), self.probabilities(o16)
            self.assertEqual(a.shape, (30, 2))
            # 8 AdamW steps on bf16 forward passes: probabilities within 0.05.
            np.testing.assert_allclose(a, b, rtol=0, atol=5e-2 if prec == "bf16" else 0)
        self.each_device(body)

    def test_finetune_on_device_matches_cpu(self):
        cpu = os.path.join(self.tmp, "ft-cpu")
        self.finetune(cpu, "cpu", 2, "--precision", "fp32")

        def body(dev, d):
            out = os.path.join(d, "ft")
            self.finetune(out, dev, 2, "--precision", "fp32")
            a, b = self.probabilities(cpu), self.probabilities(out)
            self.assertEqual(a.shape, (30, 2))
            np.testing.assert_allclose(a.sum(axis=1), 1, atol=1e-5)
            # 16 AdamW steps from the same weights and batches: 1e-3 on probabilities; the
            # CPU against itself: equal.
            np.testing.assert_allclose(a, b, rtol=0, atol=1e-3 if dev == "cuda" else 0)
        self.each_device(body)


if __name__ == "__main__":
    unittest.main(verbosity=2)
