#!/usr/bin/env python3
"""`genemask --version` against the project environment's PyTorch (the same LibTorch), and
`--device cuda` with no GPU visible: one line that says so and how to check, non-zero exit.
Runs on every machine: CUDA_VISIBLE_DEVICES="" hides the GPUs of a GPU machine too."""
import json
import os
import random
import re
import shutil
import tempfile
import unittest

from test_cli import run, summary
from test_corpus import write_genome

# What CMake found (tests/CMakeLists.txt passes it): the LibTorch genemask is built against.
TORCH_VERSION = os.environ["GENEMASK_TORCH_VERSION"]
TORCH_CUDA = os.environ["GENEMASK_TORCH_CUDA"] in ("ON", "1", "TRUE")
PROJECT_VERSION = os.environ["GENEMASK_PROJECT_VERSION"]
NO_GPU = {"CUDA_VISIBLE_DEVICES": ""}
TINY = {"model_type": "bert", "vocab_size": 4101, "hidden_size": 16, "num_hidden_layers": 1,
        "num_attention_heads": 2, "intermediate_size": 32, "max_position_embeddings": 128}


class Version(unittest.TestCase):
    def test_version_names_genemask_libtorch_cuda_and_gpus(self):
        p = run(["--version"])
        lines = p.stdout.strip().splitlines()
        self.assertEqual(len(lines), 5, p.stdout)
        self.assertEqual(lines[0], f"genemask {PROJECT_VERSION}")
        self.assertEqual(lines[1], f"LibTorch {TORCH_VERSION.split('+')[0]}")
        # The CPU's bf16 instructions, against /proc/cpuinfo read here.
        with open("/proc/cpuinfo") as f:
            info = f.read()
        flags = set(re.search(r"^flags\s*:(.*)$", info, re.M).group(1).split())
        want = ", ".join(n for f, n in [("amx_bf16", "AMX-BF16"), ("avx512_bf16", "AVX512-BF16")] if f in flags)
        model = re.search(r"^model name\s*:\s*(.*)$", info, re.M).group(1)
        self.assertTrue(lines[3].startswith(f"CPU: {model}; bf16 instructions: {want or 'none'}"), lines[3])
        m = re.fullmatch(r"GPUs visible: (\d+)( \(.+\))?", lines[4])
        self.assertIsNotNone(m, lines[4])
        gpus = int(m.group(1))
        if not TORCH_CUDA:
            self.assertEqual(lines[2], "CUDA: not built (CPU-only LibTorch)")
            self.assertEqual(gpus, 0)
            return
        self.assertRegex(lines[2], r"^CUDA: built with CUDA \d+\.\d+")
        # Independent reference: the project environment's PyTorch, when it is this LibTorch.
        import torch
        if torch.__version__.split("+")[0] != TORCH_VERSION.split("+")[0]:
            self.skipTest(f"Python's torch {torch.__version__} is not the LibTorch built against")
        cudnn = torch.backends.cudnn.version()
        want = f"CUDA: built with CUDA {torch.version.cuda}"
        if cudnn:
            want += f", cuDNN {cudnn // 10000}.{cudnn % 10000 // 100}.{cudnn % 100}"
        self.assertEqual(lines[2], want)
        self.assertEqual(gpus, torch.cuda.device_count())
        if gpus == 0:
            self.assertTrue(m.group(2), "no GPU: the line says why")

    def test_no_gpu_visible_is_reported(self):
        p = run(["--version"], env=NO_GPU)
        last = p.stdout.strip().splitlines()[-1]
        self.assertTrue(last.startswith("GPUs visible: 0"), last)
        if TORCH_CUDA:
            self.assertIn("CUDA_VISIBLE_DEVICES=''", last)


class CudaWithoutGpu(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="genemask-runtime-")
        fa = os.path.join(cls.tmp, "g.fa")
        write_genome(fa, random.Random(5), records=1, length=(8000, 9000))
        cls.shards = os.path.join(cls.tmp, "shards")
        run(["shards", "--genome", fa, "--out", cls.shards, "--max-tokens", "40", "--min-tokens", "20"])
        cls.cfg = os.path.join(cls.tmp, "tiny.json")
        with open(cls.cfg, "w") as f:
            json.dump(TINY, f)
        cls.table = os.path.join(cls.tmp, "t.csv")
        rng = random.Random(6)
        with open(cls.table, "w") as f:
            f.write("sequence,label\n")
            for i in range(8):
                f.write("".join(rng.choice("ACGT") for _ in range(40)) + f",{i % 2}\n")
        cls.hf = os.path.join(cls.tmp, "hf")
        run_dir = os.path.join(cls.tmp, "run")
        run(["pretrain", "--shards", cls.shards, "--masking", "random", "--model", cls.cfg, "--out", run_dir,
             "--steps", "1", "--warmup", "1", "--batch-per-rank", "2", "--grad-accum", "1", "--eval-every", "0",
             "--threads", "1"])
        run(["export-hf", "--run", run_dir, "--out", cls.hf])

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def check_one_line_error(self, args, ranks=None):
        p = run(args + ["--device", "cuda"], ranks=ranks, check=False, env=NO_GPU)
        self.assertNotEqual(p.returncode, 0, p.stdout)
        # One message per rank, each on one line. Ranks write stderr concurrently, so one
        # rank's "genemask[rank 1]: error: " can land on the line before another's message:
        # count the prefixes, and the lines that hold a whole message.
        self.assertEqual(len(re.findall(r"genemask(?:\[rank \d+\])?: error: ", p.stderr)), ranks or 1, p.stderr)
        key = "no GPU is visible" if TORCH_CUDA else "was built against LibTorch"
        errors = [l for l in p.stderr.splitlines() if key in l]
        self.assertEqual(len(errors), ranks or 1, p.stderr)
        line = errors[0]
        if TORCH_CUDA:
            self.assertIn("--device cuda: no GPU is visible", line)
            self.assertIn("CUDA_VISIBLE_DEVICES=''", line)
            self.assertIn("nvidia-smi", line)
        else:
            self.assertIn("--device cuda: this genemask was built against LibTorch", line)
            self.assertIn("without CUDA", line)
        self.assertNotIn("Traceback", p.stderr)
        self.assertNotIn("Warning", p.stderr)  # LibTorch's CUDA warnings are part of the line, not extra lines
        return line

    def test_pretrain(self):
        out = os.path.join(self.tmp, "cuda-run")
        self.check_one_line_error(["pretrain", "--shards", self.shards, "--masking", "random", "--model", self.cfg,
                                   "--out", out, "--steps", "1"])
        self.check_one_line_error(["pretrain", "--shards", self.shards, "--masking", "random", "--model", self.cfg,
                                   "--out", out + "2", "--steps", "1", "--precision", "bf16"], ranks=2)

    def test_embed(self):
        self.check_one_line_error(["embed", "--model", self.hf, "--input", self.table, "--out",
                                   os.path.join(self.tmp, "e.h5")])
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "e.h5")))

    def test_finetune(self):
        out = os.path.join(self.tmp, "ft")
        self.check_one_line_error(["finetune", "--model", "random", "--config", self.cfg, "--train", self.table,
                                   "--test", self.table, "--out", out])
        self.assertFalse(os.path.exists(os.path.join(out, "metrics.json")))

    def test_bf16_on_cpu_runs_and_says_when_it_is_emulated(self):
        # Every command that runs a model takes --precision bf16 on the CPU. --version names
        # the CPU's bf16 instructions; without AMX-BF16 or AVX512-BF16 each command says once
        # that bf16 is emulated there (slower than fp32), and still runs.
        version = run(["--version"]).stdout
        self.assertRegex(version, r"CPU: .*; bf16 instructions: (AMX-BF16|AVX512-BF16|none)")
        slow = "bf16 instructions: none" in version
        cases = [["embed", "--model", self.hf, "--input", self.table, "--out", os.path.join(self.tmp, "b.h5")],
                 ["finetune", "--model", "random", "--config", self.cfg, "--train", self.table, "--test",
                  self.table, "--out", os.path.join(self.tmp, "ft-bf16")],
                 ["pretrain", "--shards", self.shards, "--masking", "random", "--model", self.cfg, "--out",
                  os.path.join(self.tmp, "pt-bf16"), "--steps", "1"]]
        for args in cases:
            p = run(args + ["--precision", "bf16", "--threads", "1"])
            self.assertEqual(p.stderr.count("bf16 matrix products are emulated"), 1 if slow else 0, p.stderr)
        self.assertTrue(os.path.exists(os.path.join(self.tmp, "b.h5")))

    def test_precision_auto_follows_the_cpu_and_is_named(self):
        # --precision auto on the CPU is bf16 exactly where --version names bf16 instructions
        # (never the emulated kind, so never the note), and the pretrain summary, each
        # metrics.jsonl line, finetune's summary and metrics.json and embed's summary name the
        # precision used; auto is the default, fp32 when asked.
        version = run(["--version"]).stdout
        want = "fp32" if "bf16 instructions: none" in version else "bf16"
        out = os.path.join(self.tmp, "pt-auto")
        p = run(["pretrain", "--shards", self.shards, "--masking", "random", "--model", self.cfg, "--out", out,
                 "--steps", "2", "--log-every", "1", "--precision", "auto", "--threads", "1"])
        self.assertNotIn("emulated", p.stderr)
        self.assertEqual(summary(p)["precision"], want)
        with open(os.path.join(out, "metrics.jsonl")) as f:
            lines = [json.loads(l) for l in f if '"grad_norm"' in l]  # training lines, not evaluation
        self.assertEqual([l["precision"] for l in lines], [want, want])
        dflt = summary(run(["pretrain", "--shards", self.shards, "--masking", "random", "--model", self.cfg,
                            "--out", out + "-default", "--steps", "1", "--threads", "1"]))
        self.assertEqual(dflt["precision"], want)  # auto is the default
        fp32 = summary(run(["pretrain", "--shards", self.shards, "--masking", "random", "--model", self.cfg,
                            "--out", out + "-fp32", "--steps", "1", "--threads", "1", "--precision", "fp32"]))
        self.assertEqual(fp32["precision"], "fp32")
        ft = os.path.join(self.tmp, "ft-auto")
        fs = summary(run(["finetune", "--model", "random", "--config", self.cfg, "--train", self.table, "--test",
                          self.table, "--out", ft, "--threads", "1"]))  # the default: auto
        self.assertEqual(fs["precision"], want)
        with open(os.path.join(ft, "metrics.json")) as f:
            self.assertEqual(json.load(f)["precision"], want)
        for cmd in (["embed", "--model", self.hf, "--input", self.table, "--out", os.path.join(self.tmp, "auto.h5")],):
            self.assertEqual(summary(run(cmd + ["--threads", "1"]))["precision"], want, cmd[0])
        bad = run(["finetune", "--model", "random", "--config", self.cfg, "--train", self.table, "--test",
                   self.table, "--out", ft + "-bad", "--precision", "fp16"], check=False)
        self.assertNotEqual(bad.returncode, 0)
        self.assertIn("--precision", bad.stderr)

    def test_cpu_still_works_with_no_gpu(self):
        s = summary(run(["embed", "--model", self.hf, "--input", self.table, "--out",
                         os.path.join(self.tmp, "cpu.h5"), "--threads", "1"], env=NO_GPU))
        self.assertEqual(s["sequences"], 8)


if __name__ == "__main__":
    unittest.main(verbosity=2)
