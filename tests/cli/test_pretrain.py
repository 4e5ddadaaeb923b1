#!/usr/bin/env python3
"""End-to-end tests of `genemask pretrain` and `export-hf` on a tiny model: exact loss
curve after a kill and resume, the same steps on 1 and 2 ranks, SIGTERM checkpoints."""
import json
import os
import sys
import random
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import unittest

from test_cli import BIN, ENV, run, summary

MODEL_TESTS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "model")
from test_corpus import write_genome

TINY = {"model_type": "bert", "vocab_size": 4101, "hidden_size": 32, "num_hidden_layers": 1,
        "num_attention_heads": 2, "intermediate_size": 64, "max_position_embeddings": 512,
        "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1}


def metrics(run_dir):
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        rows = [json.loads(l) for l in f if l.strip()]
    return [(r["step"], r["loss"], r["lr"], r["grad_norm"]) for r in rows if "loss" in r]


class Pretrain(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="genemask-pretrain-")
        fa = os.path.join(cls.tmp, "g.fa")
        write_genome(fa, random.Random(3), records=2, length=(30000, 40000))
        cls.shards = os.path.join(cls.tmp, "shards")
        run(["shards", "--genome", fa, "--out", cls.shards, "--max-tokens", "60", "--min-tokens", "20"])
        for name, drop in [("tiny.json", 0.1), ("tiny0.json", 0.0)]:
            cfg = dict(TINY, hidden_dropout_prob=drop, attention_probs_dropout_prob=drop)
            with open(os.path.join(cls.tmp, name), "w") as f:
                json.dump(cfg, f)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def pretrain(self, out, extra=(), ranks=None, model="tiny.json", check=True, env=None, **opts):
        """extra: flags; opts: option overrides, e.g. grad_accum=1 for --grad-accum 1."""
        o = {"masking": "random", "steps": 8, "warmup": 2, "batch_per_rank": 2, "grad_accum": 2, "log_every": 1,
             "eval_every": 4, "eval_batches": 2, "checkpoint_every": 4, "threads": 1}
        o.update(opts)
        args = ["pretrain", "--shards", self.shards, "--model", os.path.join(self.tmp, model), "--out", out]
        for k, v in o.items():
            args += ["--" + k.replace("_", "-"), str(v)]
        return run(args + list(extra), ranks=ranks, check=check, env=env)

    def test_resume_after_kill_gives_the_same_loss_curve(self):
        a = os.path.join(self.tmp, "a")
        s = summary(self.pretrain(a))
        self.assertEqual(s["steps_done"], 8)
        sa = s
        want = metrics(a)
        self.assertEqual([m[0] for m in want], list(range(1, 9)))
        b = os.path.join(self.tmp, "b")
        self.pretrain(b, stop_after=6)  # dies after step 6; the last checkpoint is step 4
        self.assertTrue(os.path.isdir(os.path.join(b, "checkpoints", "step-00000004")))
        with open(os.path.join(b, "metrics.jsonl"), "a") as f:
            f.write('{"step": 7, "lo')  # a line torn by the kill: dropped on resume, not fatal
        # A checkpoint the killed job had begun and never named (a whole model's space): removed.
        torn = os.path.join(b, "checkpoints", "step-00000006.tmp")
        os.makedirs(torn)
        with open(os.path.join(torn, "model.safetensors"), "wb") as f:
            f.write(b"\0" * 1000)
        s = summary(self.pretrain(b, ["--resume"]))
        self.assertEqual(s["start_step"], 4)
        self.assertFalse(os.path.exists(torn))
        self.assertEqual(metrics(b), want)  # exactly, not approximately
        # Each evaluation says what its loss is over: --eval-batches 2 x --batch-per-rank 2.
        with open(os.path.join(a, "metrics.jsonl")) as f:
            evals = [e for e in map(json.loads, f) if "eval_loss" in e]
        self.assertEqual([e["step"] for e in evals], [4, 8])
        for e in evals:
            self.assertEqual(e["eval_samples"], 4, e)
            self.assertGreater(e["eval_masked_tokens"], 0, e)
        # The summary's eval_loss is the last evaluation's, with what it is over.
        self.assertEqual((sa["eval_loss"], sa["eval_samples"], sa["eval_masked_tokens"]),
                         (evals[-1]["eval_loss"], evals[-1]["eval_samples"], evals[-1]["eval_masked_tokens"]))
        self.assertTrue(os.path.exists(os.path.join(b, "perplexity.svg")))
        # A log cut at a line end before the checkpoint's step: the lines lost stay lost, and
        # the resume says so instead of leaving a silent gap in metrics.jsonl and the plot.
        c = os.path.join(self.tmp, "c")
        self.pretrain(c, stop_after=6)
        with open(os.path.join(c, "metrics.jsonl")) as f:
            lines = f.readlines()
        with open(os.path.join(c, "metrics.jsonl"), "w") as f:
            f.writelines(lines[:2])  # steps 1 and 2
        p = self.pretrain(c, ["--resume"])
        self.assertIn(os.path.join(c, "metrics.jsonl") + ": the log of the run so far ends at step 2 but the "
                      "checkpoint resumed is step 4 (the log is written every 1 steps): the lines of steps 3..4 are "
                      "missing from it", p.stderr.replace("\n", " "))
        self.assertEqual([m[0] for m in metrics(c)], [1, 2, 5, 6, 7, 8])
        self.assertNotIn("are missing from it", self.pretrain(b, ["--resume"], steps=10).stderr)

    def test_a_checkpoint_of_format_2_resumes_where_it_stood(self):
        """Format 2 counted the cursor's position in one rank's samples of the epoch; format 3
        in the stream of all ranks' samples. A checkpoint of 2 ranks written as format 2 (its
        position halved) resumes exactly where the same checkpoint as format 3 does."""
        a = os.path.join(self.tmp, "v3")
        self.pretrain(a, ranks=2, stop_after=6)
        ck = os.path.join(a, "checkpoints", "step-00000004")
        with open(os.path.join(ck, "state.json")) as f:
            st = json.load(f)
        self.assertEqual((st["format_version"], st["world_size"]), (3, 2))
        self.assertEqual(st["cursor"], {"epoch": 0, "position": 4 * 2 * 2 * 2})  # 4 steps of 2 ranks x 2 x 2
        b = os.path.join(self.tmp, "v2")
        shutil.copytree(a, b)
        st.update(format_version=2, cursor={"epoch": 0, "position": 16})  # one rank's 16 of the 32
        with open(os.path.join(b, "checkpoints", "step-00000004", "state.json"), "w") as f:
            json.dump(st, f)
        self.pretrain(a, ["--resume"], ranks=2)
        self.pretrain(b, ["--resume"], ranks=2)
        self.assertEqual(metrics(b), metrics(a))
        self.assertEqual([m[0] for m in metrics(a)], list(range(1, 9)))

    def test_resume_on_the_cpu_from_a_checkpoint_written_on_a_gpu(self):
        # A GPU run's optimizer.pt records its tensors' device ("cuda:0"). Made here by
        # rewriting a CPU checkpoint's device records, as a GPU would have written them (the
        # moments' values are the same), with state.json's SHA-256 of the file updated. Resumed
        # with --device cpu, the moments must come onto the CPU: LibTorch's default puts them
        # back on the GPU that saved them, which fails where there is none and puts every rank
        # on one GPU where there are several. The curve equals the uninterrupted run's.
        import hashlib
        import zipfile
        whole, cut = os.path.join(self.tmp, "dev-whole"), os.path.join(self.tmp, "dev-cut")
        self.pretrain(whole, steps=6, checkpoint_every=3, eval_every=0)
        self.pretrain(cut, steps=6, checkpoint_every=3, eval_every=0, stop_after=4)
        ck = os.path.join(cut, "checkpoints", "step-00000003")
        opt = os.path.join(ck, "optimizer.pt")
        with zipfile.ZipFile(opt) as z:
            entries = [(i, z.read(i.filename)) for i in z.infolist()]
        cpu, gpu = b"X\x03\x00\x00\x00cpu", b"X\x06\x00\x00\x00cuda:0"
        moved = 0
        with zipfile.ZipFile(opt + ".new", "w", zipfile.ZIP_STORED) as z:
            for info, data in entries:
                if info.filename.endswith("data.pkl"):
                    moved += data.count(cpu)
                    data = data.replace(cpu, gpu)
                z.writestr(info.filename, data)
        self.assertGreater(moved, 0, "no device records found in optimizer.pt")
        os.replace(opt + ".new", opt)
        with open(os.path.join(ck, "state.json")) as f:
            state = json.load(f)
        with open(opt, "rb") as f:
            state["files"]["optimizer.pt"] = hashlib.sha256(f.read()).hexdigest()
        with open(os.path.join(ck, "state.json"), "w") as f:
            json.dump(state, f)
        s = summary(self.pretrain(cut, ["--resume", "--device", "cpu"], steps=6, checkpoint_every=3, eval_every=0))
        self.assertEqual(s["start_step"], 3)
        self.assertEqual(metrics(cut), metrics(whole))

    def test_tokens_per_second_leaves_out_checkpoint_time(self):
        # Each checkpoint takes 1.5 s more here (a slow file system); a training step of the
        # tiny model takes milliseconds. tokens/s of the steps after a checkpoint must stay
        # that of training: counting the checkpoint made it 100x lower.
        def rates(out, env):
            run(["pretrain", "--shards", self.shards, "--model", os.path.join(self.tmp, "tiny0.json"), "--out", out,
                 "--masking", "random", "--steps", "4", "--warmup", "1", "--batch-per-rank", "2", "--grad-accum",
                 "1", "--log-every", "1", "--eval-every", "0", "--checkpoint-every", "1", "--keep-checkpoints",
                 "1", "--threads", "1"], env=env)
            with open(os.path.join(out, "metrics.jsonl")) as f:
                return [json.loads(l)["tokens_per_s"] for l in f if '"tokens_per_s"' in l]
        fast = rates(os.path.join(self.tmp, "tps-fast"), {})
        slow = rates(os.path.join(self.tmp, "tps-slow"), {"GENEMASK_TEST_SLOW_CHECKPOINT_S": "1.5"})
        self.assertEqual(len(slow), 4)
        med = sorted(fast[1:])[1]
        for v in slow[1:]:  # steps 2-4 each follow a checkpoint
            self.assertGreater(v, med / 10, (fast, slow))

    def test_input_wait_and_loader_busy_see_a_slow_loader(self):
        # Each batch takes the loader 0.15 s more to read here (a slow file system); a step of
        # the tiny model takes milliseconds. Every metrics line and the summary say the share of
        # the window the loop waited for its batches (input_wait) and the loader's busier thread
        # worked (loader_busy), the summary the milliseconds a step of reading and masking and of
        # staging; a window that waited more than 5% says so once, from the second window on
        # (the first holds the loader's start). Timing changes no number: the same losses and
        # gradient norms.
        def train(name, env):
            out = os.path.join(self.tmp, f"input-{name}")
            p = self.pretrain(out, model="tiny0.json", steps=6, grad_accum=2, log_every=2, eval_every=0,
                              checkpoint_every=6, env=env)
            with open(os.path.join(out, "metrics.jsonl")) as f:
                rows = [json.loads(l) for l in f if l.strip()]
            return p, summary(p), rows
        p_fast, fast, fast_rows = train("fast", {})
        p_slow, slow, slow_rows = train("slow", {"GENEMASK_TEST_SLOW_LOADER_S": "0.15"})
        for s, rows in [(fast, fast_rows), (slow, slow_rows)]:
            self.assertEqual([r["step"] for r in rows], [2, 4, 6])
            for r in rows + [s]:
                self.assertTrue(0 <= r["input_wait"] <= 1.0, r)  # within the window's time
                # Batches read ahead, before the window, count in the window that uses them.
                self.assertGreaterEqual(r["loader_busy"], 0, r)
            self.assertEqual(sorted(s["loader_ms_per_step"]), ["read", "stage"])
            self.assertGreaterEqual(s["loader_ms_per_step"]["stage"], 0)
        # Two batches a step of at least 150 ms each, which the loop waits for.
        self.assertGreaterEqual(slow["loader_ms_per_step"]["read"], 300)
        self.assertLess(fast["loader_ms_per_step"]["read"], 150)
        for r in slow_rows:
            self.assertGreater(r["input_wait"], 0.5, r)
            self.assertGreater(r["loader_busy"], 0.5, r)
        said = [l for l in p_slow.stderr.splitlines() if "waited for their batches" in l]
        self.assertEqual(len(said), 1, p_slow.stderr)
        self.assertRegex(said[0], r"note: steps 3-4 waited for their batches \d+% of the time \(the loader: reading "
                                  r"and masking [0-9.]+ ms, staging [0-9.]+ ms a step, slowest rank\): the input, not "
                                  r"the model, bounds the rate \(the summary's input_wait\)$")
        strip = lambda rows: [(r["step"], r["loss"], r["grad_norm"]) for r in rows]
        self.assertEqual(strip(fast_rows), strip(slow_rows))
        self.assertEqual(fast["loss"], slow["loss"])

    def test_eval_samples_count_samples_not_packed_padding_at_every_rank_count(self):
        # Packed validation rows (the default) end in a run of padding, a segment of its own:
        # eval_samples counted those, 15 / 17 / 16 at 1 / 2 / 4 ranks for the same 15 samples,
        # and more than the split holds when it asked for all of them.
        with open(os.path.join(self.shards, "manifest.json")) as f:
            valid_total = sum(sh["samples"] for sh in json.load(f)["shards"] if sh["split"] == "valid")
        for ranks, batch, accum, want in [(1, 3, 4, 15), (2, 3, 2, 15), (4, 3, 1, 15),
                                          (1, valid_total, 1, valid_total)]:
            out = os.path.join(self.tmp, f"eval-samples-{ranks}-{batch}")
            p = self.pretrain(out, batch_per_rank=batch, grad_accum=accum, steps=2, warmup=1, eval_every=2,
                              eval_batches=5, checkpoint_every=2, model="tiny0.json", ranks=ranks if ranks > 1 else None)
            s = summary(p)
            self.assertEqual((s["eval_samples"], s["eval_split_samples"]), (want, valid_total), (ranks, batch))
            self.assertIn(f"over {want} of {valid_total} validation samples", p.stderr)

    def test_a_run_with_no_timed_step_reports_no_rates(self):
        # --resume of a finished run trains nothing: its rates are null, not 0.0, as the loss
        # is; metrics.jsonl's counts are integers.
        out = os.path.join(self.tmp, "untimed")
        s = summary(self.pretrain(out, steps=4))
        self.assertGreater(s["tokens_per_s"], 0)
        self.assertTrue(0 < s["fill"] <= 1, s)
        with open(os.path.join(out, "metrics.jsonl")) as f:
            lines = [json.loads(l) for l in f if l.strip()]
        for r in lines:
            for key in ("masked_tokens", "eval_masked_tokens", "eval_samples", "eval_split_samples", "rate_steps"):
                if key in r:
                    self.assertIs(type(r[key]), int, (key, r))
        s = summary(self.pretrain(out, ["--resume"], steps=4))
        self.assertEqual((s["start_step"], s["steps_done"]), (4, 4))
        for key in ("loss", "tokens_per_s", "model_tflops", "mfu_datasheet", "fill", "rows_per_micro_batch",
                    "input_wait", "loader_busy"):
            self.assertIsNone(s[key], key)
        self.assertEqual(s["loader_ms_per_step"], {"read": None, "stage": None})

    def test_samples_longer_than_the_model_are_refused_before_training(self):
        # 60-token samples (62 positions) and a model of 40 positions: one line naming
        # both and what to do, before any step (it used to be an index error and a LibTorch
        # stack trace on the CPU, a device-side assert on a GPU).
        with open(os.path.join(self.tmp, "tiny.json")) as f:
            cfg = json.load(f)
        cfg["max_position_embeddings"] = 40
        with open(os.path.join(self.tmp, "short.json"), "w") as f:
            json.dump(cfg, f)
        out = os.path.join(self.tmp, "short")
        p = self.pretrain(out, model="short.json", check=False)
        self.assertEqual(p.returncode, 1, p.stderr)
        lines = [l for l in p.stderr.splitlines() if l.startswith("genemask: error")]
        self.assertEqual(len(lines), 1, p.stderr)
        self.assertIn("manifest.json: the shards hold samples of up to 60 tokens (62 positions", lines[0])
        self.assertIn("max_position_embeddings is 40: make shards with --max-tokens 38 or less", lines[0])
        self.assertNotIn("Exception raised from", p.stderr)
        self.assertFalse(os.path.exists(os.path.join(out, "checkpoints")))

    def test_one_rank_with_accumulation_equals_two_and_four_ranks(self):
        # The same effective batch (8 sequences) as 1 x 4, 2 x 2 and 4 x 1 (ranks x
        # accumulation): gradients summed in flat buckets through MPI on 2 and 4 ranks.
        # The validation loss too: --eval-batches 3 x --batch-per-rank 2 is the validation
        # split's first 6 samples at every rank count (on 4 ranks 2, 2, 1 and 1), not 6 per rank.
        with open(os.path.join(self.shards, "manifest.json")) as f:
            valid_total = sum(sh["samples"] for sh in json.load(f)["shards"] if sh["split"] == "valid")
        self.assertGreater(valid_total, 6 * 4)
        runs, evals = {}, {}
        for ranks, accum in [(1, 4), (2, 2), (4, 1)]:
            out = os.path.join(self.tmp, f"layout-{ranks}")
            p = self.pretrain(out, grad_accum=accum, steps=5, model="tiny0.json", eval_batches=3,
                              ranks=ranks if ranks > 1 else None)
            s = summary(p)
            self.assertEqual(s["ranks"], ranks)
            self.assertEqual(s["effective_batch"], 8)
            self.assertEqual(s["allreduce"], "none (one rank)" if ranks == 1 else "MPI")
            runs[ranks] = metrics(out)
            with open(os.path.join(out, "metrics.jsonl")) as f:
                evals[ranks] = [e for e in map(json.loads, f) if "eval_loss" in e]
            self.assertEqual([e["step"] for e in evals[ranks]], [4, 5], ranks)
            for e in evals[ranks]:
                self.assertEqual((e["eval_samples"], e["eval_split_samples"]), (6, valid_total), e)
            self.assertEqual((s["eval_samples"], s["eval_split_samples"]), (6, valid_total))
            self.assertIn(f"over 6 of {valid_total} validation samples", p.stderr)
        for ranks in (2, 4):
            for e1, e2 in zip(evals[1], evals[ranks]):
                self.assertEqual(e1["eval_masked_tokens"], e2["eval_masked_tokens"], f"{ranks} ranks")
                # The same samples and masks, scored with weights trained as below (their
                # losses agree within 1e-4): the same tolerance (a CI machine's AMD EPYC came
                # to 1.2e-5 at 2 ranks). A rank counting its own 6 samples, or a mean over
                # ranks rather than over the masked tokens, is off by far more.
                self.assertAlmostEqual(e1["eval_loss"], e2["eval_loss"], delta=1e-4 * abs(e1["eval_loss"]),
                                       msg=f"{ranks} ranks")
        m1 = runs[1]
        self.assertEqual(len(m1), 5)
        for ranks in (2, 4):
            for (s1, l1, lr1, g1), (s2, l2, lr2, g2) in zip(m1, runs[ranks]):
                self.assertEqual(s1, s2)
                # Float sums in another order (per rank, then over ranks): 1e-4 relative on
                # the loss, 1e-3 on the gradient norm after five steps.
                self.assertAlmostEqual(l1, l2, delta=1e-4 * abs(l1), msg=f"{ranks} ranks")
                self.assertAlmostEqual(g1, g2, delta=1e-3 * abs(g1), msg=f"{ranks} ranks")
                self.assertEqual(lr1, lr2)

    def test_packing_gives_the_unpacked_losses_at_one_and_two_ranks(self):
        # --packing on (several samples per row, attention within each) against off (one per
        # row, padded) on the same samples, masks and order, dropout 0: the same loss and
        # gradient norm at every step up to float rounding, at 1 rank x 2 micro-batches and 2
        # ranks x 1; the validation loss too. A bad value is refused by the option parser, and
        # --resume with the other packing needs --allow-changes.
        runs = {}
        for packing in ("on", "off"):
            for ranks, accum in [(1, 2), (2, 1)]:
                out = os.path.join(self.tmp, f"packing-{packing}-{ranks}")
                s = summary(self.pretrain(out, ["--packing", packing], model="tiny0.json", grad_accum=accum, steps=4,
                                          checkpoint_every=0, eval_every=4, ranks=ranks if ranks > 1 else None))
                self.assertEqual(s["packing"], packing)
                # The packed attention's kernel the run ran (on a CPU the per-segment one); none
                # without packing.
                self.assertEqual(s["packed_attention"], ["cpu-segments"] if packing == "on" else [])
                runs[packing, ranks] = (metrics(out), s["eval_loss"])
        want = runs["off", 1][0]
        self.assertEqual(len(want), 4)
        for key, (got, got_eval) in runs.items():
            for (s1, l1, lr1, g1), (s2, l2, lr2, g2) in zip(want, got):
                self.assertEqual((s1, lr1), (s2, lr2))
                self.assertAlmostEqual(l2, l1, delta=1e-4 * abs(l1), msg=str(key))
                self.assertAlmostEqual(g2, g1, delta=1e-3 * abs(g1), msg=str(key))
            # Validation takes the same samples at every rank count and packing.
            want_eval = runs["off", 1][1]
            self.assertAlmostEqual(got_eval, want_eval, delta=1e-4 * abs(want_eval), msg=str(key))
        p = self.pretrain(os.path.join(self.tmp, "packing-bad"), ["--packing", "maybe"], check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("--packing", p.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "packing-bad")))
        out = os.path.join(self.tmp, "packing-resume")
        self.pretrain(out, ["--packing", "on"], model="tiny0.json", stop_after=5)  # checkpoint at 4
        p = self.pretrain(out, ["--resume", "--packing", "off"], model="tiny0.json", check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("--packing", p.stderr)
        s = summary(self.pretrain(out, ["--resume", "--packing", "off", "--allow-changes"], model="tiny0.json"))
        self.assertEqual(s["steps_done"], 8)

    def test_cuda_graphs_fixed_shape_step_gives_the_eager_losses(self):
        # The step the CUDA graphs capture (model/graph_step.hpp: samples in fixed rows of the
        # model's width, boundaries and masked rows padded to fixed sizes), run without capture
        # (--static-step, testing) on the CPU: the eager step's loss and gradient norm at every
        # step up to float rounding, packed and not, at 1 rank x 2 micro-batches and 2 ranks x
        # 1; with a masked-row buffer too small for some micro-batches (--static-capacity),
        # those run eagerly in the same step and are counted. On a CPU, --cuda-graphs auto
        # runs the eager step and says why; on is refused before anything is written.
        runs = {}
        for packing in ("on", "off"):
            for ranks, accum in [(1, 2), (2, 1)]:
                for mode, extra in [("eager", []), ("fixed", ["--static-step"]),
                                    ("mixed", ["--static-step", "--static-capacity", "8"])]:
                    if mode == "mixed" and (packing, ranks) != ("on", 1):
                        continue
                    out = os.path.join(self.tmp, f"graphs-{packing}-{ranks}-{mode}")
                    p = self.pretrain(out, ["--packing", packing] + extra, model="tiny0.json", grad_accum=accum,
                                      steps=4, checkpoint_every=0, eval_every=0, ranks=ranks if ranks > 1 else None)
                    s = summary(p)
                    if mode == "eager":
                        self.assertEqual(s["cuda_graphs"], "off (the device is a CPU)")
                        self.assertEqual((s["fixed_shapes"], s["shape_setup_steps"], s["shape_setup_s"]), (0, 0, 0))
                        self.assertIn("CUDA graphs off: the device is a CPU", p.stdout + p.stderr)
                        self.assertEqual(s["eager_micro_batches"], 0)
                    else:
                        self.assertEqual(s["cuda_graphs"], "static (testing)")
                        self.assertEqual(s["cuda_graphs_captured"], 0)
                        # Each shape first used in one step (a step may bring several).
                        self.assertGreaterEqual(s["fixed_shapes"], 1)
                        self.assertGreaterEqual(s["shape_setup_steps"], 1)
                        self.assertLessEqual(s["shape_setup_steps"], min(4, s["fixed_shapes"]))
                        self.assertGreaterEqual(s["shape_setup_s"], 0)
                        if mode == "fixed":
                            self.assertEqual(s["eager_micro_batches"], 0)
                        else:
                            self.assertGreater(s["eager_micro_batches"], 0)
                            self.assertLess(s["eager_micro_batches"], 8)  # some micro-batches fit 8 masked rows
                            self.assertRegex(p.stdout + p.stderr, r"masks \d+ positions, more than the graphs' buffer for its shape: "
                                                                 r"it runs eagerly")
                    runs[packing, ranks, mode] = metrics(out)
        for (packing, ranks, mode), got in runs.items():
            want = runs[packing, ranks, "eager"]
            self.assertEqual(len(got), 4)
            for (s1, l1, lr1, g1), (s2, l2, lr2, g2) in zip(want, got):
                self.assertEqual((s1, lr1), (s2, lr2))
                self.assertAlmostEqual(l2, l1, delta=1e-4 * abs(l1), msg=str((packing, ranks, mode)))
                self.assertAlmostEqual(g2, g1, delta=1e-3 * abs(g1), msg=str((packing, ranks, mode)))
        for value, words in [("on", ["--cuda-graphs on", "the device is a CPU", "--cuda-graphs auto"]),
                             ("maybe", ["--cuda-graphs"])]:
            out = os.path.join(self.tmp, f"graphs-{value}")
            p = self.pretrain(out, ["--cuda-graphs", value], check=False)
            self.assertNotEqual(p.returncode, 0)
            for w in words:
                self.assertIn(w, p.stderr)
            self.assertFalse(os.path.exists(out))

    def test_bf16_weight_copies_change_no_number(self):
        # Under bf16 the products read bf16 copies of the weights made once per optimizer step
        # (model/weight_copies.hpp) instead of autocast's casts in every micro-batch: the same
        # losses, gradient norms and evaluations to the bit as with GENEMASK_FUSED leaving
        # weight-bf16 out, eagerly and in the CUDA graphs' fixed-shape step (run here without
        # capture), with dropout and 2 micro-batches per step; the log says which ran.
        cast_only = "qkv,ln,ln-bf16,gelu,cpu-bias"  # the default list without weight-bf16
        for mode, extra in [("eager", []), ("fixed", ["--static-step"])]:
            got = {}
            for name, env in [("kept", None), ("cast", {"GENEMASK_FUSED": cast_only})]:
                out = os.path.join(self.tmp, f"copies-{mode}-{name}")
                p = self.pretrain(out, ["--precision", "bf16"] + extra, steps=6, eval_every=3, checkpoint_every=0,
                                  env=env)
                said = [l for l in (p.stdout + p.stderr).splitlines() if "bf16 autocast" in l]
                self.assertEqual(len(said), 1, p.stdout + p.stderr)
                self.assertEqual("the weights' bf16 copies" in said[0], name == "kept", said[0])
                with open(os.path.join(out, "metrics.jsonl")) as f:
                    rows = [json.loads(l) for l in f if l.strip()]
                got[name] = [(r["step"], r.get("loss"), r.get("grad_norm"), r.get("eval_loss")) for r in rows]
            self.assertEqual(len([r for r in got["kept"] if r[1] is not None]), 6)
            self.assertTrue(any(r[3] is not None for r in got["kept"]), got["kept"])
            self.assertEqual(got["kept"], got["cast"], mode)

    def test_profile_steps_change_no_number(self):
        # --profile-steps N: rank 0's N steps before the last under LibTorch's profiler, its
        # classes in the log and the summary's "profile" (as train_bench's); the same losses,
        # gradient norms and evaluations to the bit as without it, at 1 rank; at 2 ranks
        # rank 0's profile.
        got = {}
        for name, extra, ranks in [("plain", [], None), ("profiled", ["--profile-steps", "3"], None),
                                   ("profiled2", ["--profile-steps", "3"], 2)]:
            out = os.path.join(self.tmp, f"profile-{name}")
            p = self.pretrain(out, extra, ranks=ranks, steps=6, eval_every=3, checkpoint_every=3)
            s = summary(p)
            with open(os.path.join(out, "metrics.jsonl")) as f:
                got[name] = [(r["step"], r.get("loss"), r.get("grad_norm"), r.get("eval_loss"))
                             for r in map(json.loads, filter(str.strip, f))]
            if name == "plain":
                self.assertIsNone(s["profile"])
                self.assertNotIn("profile of steps", p.stderr)
                continue
            prof = s["profile"]
            self.assertEqual(prof["steps"], 3, prof)
            self.assertEqual(prof["source"], "CPU operators' own time (Kineto)")
            self.assertEqual(sorted(prof["seconds_per_step"]),
                             sorted(["matmul", "attention", "elementwise_norm", "optimizer", "copies_casts", "idle"]))
            self.assertGreater(prof["seconds_per_step"]["matmul"], 0)
            self.assertGreater(prof["step_s"], 0)
            self.assertTrue(prof["top"], prof)
            said = [l for l in p.stderr.splitlines() if "profile of steps" in l]
            self.assertEqual(len(said), 1, p.stderr)
            self.assertRegex(said[0], r"profile of steps 3-5 \(rank 0, the CPU's operators\), ms per step: step "
                                      r"[0-9.]+, matmul [0-9.]+, attention [0-9.]+, elementwise_norm [0-9.]+")
            # The host's waits for a GPU are counted on a GPU only.
            self.assertIsNone(prof["host_syncs_per_step"])
            self.assertNotIn("the host waited", said[0])
        self.assertEqual(len([r for r in got["plain"] if r[1] is not None]), 6)
        self.assertEqual(got["plain"], got["profiled"])
        # A continuation that starts at the last step has no step before it to profile: said.
        p = self.pretrain(os.path.join(self.tmp, "profile-plain"), ["--resume", "--profile-steps", "3"], steps=7,
                          eval_every=3, checkpoint_every=3)
        self.assertIsNone(summary(p)["profile"])
        self.assertIn("--profile-steps 3: no step to profile (the run resumes at step 6 of 7)", p.stderr)
        # N must leave the last step out.
        p = self.pretrain(os.path.join(self.tmp, "profile-bad"), ["--profile-steps", "6"], steps=6, check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("--profile-steps 6 must be in 0..5 (--steps 6 less one", p.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "profile-bad")))
        for value, said in [("-1", "--profile-steps: -1 is negative"), ("abc", "--profile-steps: 'abc' is not a number")]:
            p = self.pretrain(os.path.join(self.tmp, "profile-bad"), ["--profile-steps", value], check=False)
            self.assertNotEqual(p.returncode, 0)
            self.assertIn(said, p.stderr)
            self.assertEqual(len(p.stderr.strip().splitlines()), 1, p.stderr)
            self.assertFalse(os.path.exists(os.path.join(self.tmp, "profile-bad")))

    def test_profiled_steps_are_kept_out_of_the_rate(self):
        # The profiled steps run slower (the profiler records every operator, and reads its
        # events at the end: made 3 s slower here): they and the step after them are kept out
        # of the window's tokens/s, model TFLOP/s and input shares, as evaluations and
        # checkpoints are, so a profiled run reports the rate of its other steps. A window of
        # profiled steps alone keeps them (the rate of something measured, never of nothing).
        def train(name, extra, env, ranks=None, log_every=8):
            out = os.path.join(self.tmp, f"kept-out-{name}")
            p = self.pretrain(out, extra, ranks=ranks, model="tiny0.json", steps=8, log_every=log_every,
                              eval_every=0, checkpoint_every=8, env=env)
            with open(os.path.join(out, "metrics.jsonl")) as f:
                rows = [json.loads(l) for l in f if l.strip()]
            return p, summary(p), rows
        _, plain, _ = train("plain", [], {})
        slow_env = {"GENEMASK_TEST_SLOW_PROFILE_S": "3"}
        p, profiled, rows = train("profiled", ["--profile-steps", "2"], slow_env)
        self.assertGreaterEqual(rows[-1]["seconds"], 3)  # the 3 s were spent in the window
        # Steps 1-5 of tiny0 take well under a second: with the 3 s counted the rate would be a
        # small fraction of the plain run's.
        self.assertGreater(profiled["tokens_per_s"], 0.4 * plain["tokens_per_s"], (profiled, plain))
        self.assertGreater(profiled["model_tflops"], 0.4 * plain["model_tflops"])
        def profile_line(proc):
            return [l for l in proc.stderr.splitlines() if "profile of steps" in l][0]
        self.assertIn("(these steps and the next are kept out of tokens/s)", profile_line(p))
        # At 2 ranks every rank keeps the same steps out (the collectives match: the run ends).
        _, two, rows2 = train("profiled2", ["--profile-steps", "2"], slow_env, ranks=2)
        self.assertEqual([r["step"] for r in rows2], [8])
        self.assertGreater(two["tokens_per_s"], 0)
        # Windows of one step: the profiled ones are all their window has, and keep their time.
        p1, _, rows1 = train("profiled1", ["--profile-steps", "2"], slow_env, log_every=1)
        self.assertEqual([r["step"] for r in rows1], list(range(1, 9)))
        by_step = {r["step"]: r["tokens_per_s"] for r in rows1}
        self.assertLess(by_step[8], 0.4 * max(by_step[s] for s in range(1, 6)), by_step)  # the 3 s read at step 8's start
        self.assertIn("(these steps and the next are kept in tokens/s at steps 6-8, whose log windows hold no other "
                      "step (--log-every 1))", profile_line(p1))
        # The fill and rows are of the same steps as the rates: with steps 2-8 kept out (6
        # profiled and the one after), the window's are step 1's alone, as a run logging every
        # step has them, not step 1's real tokens over all 8 steps' positions.
        _, prof6, rows6 = train("profiled6", ["--profile-steps", "6"], {})
        _, _, each = train("each", [], {}, log_every=1)
        self.assertAlmostEqual(prof6["fill"], each[0]["fill"], places=9)
        self.assertEqual(rows6[-1]["rate_steps"], 1)
        self.assertEqual({r["rate_steps"] for r in each}, {1})
        # Windows of two steps: 5-6 keeps step 5's rate alone, 7-8 holds profiled steps only.
        p2, _, rows2 = train("profiled2s", ["--profile-steps", "2"], slow_env, log_every=2)
        by_step = {r["step"]: r["tokens_per_s"] for r in rows2}
        self.assertLess(by_step[8], 0.4 * by_step[6], by_step)
        self.assertIn("(these steps and the next are kept out of tokens/s except at steps 7-8, whose log windows hold "
                      "no other step (--log-every 2))", profile_line(p2))

    def test_steps_that_set_up_a_shape_are_kept_out_of_the_rate(self):
        # A fixed shape's first use captures its graph on a GPU (warm-up runs and all: far
        # slower than a replay), once per shape. Such steps are kept out of the window's
        # tokens/s on every rank, as profiled steps are, and counted in the summary with their
        # seconds. Here the fixed-shape step runs without capture (--static-step) and a test
        # hook makes each set-up 2 s slower.
        def train(name, env, ranks=None, log_every=8):
            out = os.path.join(self.tmp, f"setup-{name}")
            p = self.pretrain(out, ["--static-step"], ranks=ranks, model="tiny0.json", steps=8, log_every=log_every,
                              eval_every=0, checkpoint_every=8, env=env)
            with open(os.path.join(out, "metrics.jsonl")) as f:
                rows = [json.loads(l) for l in f if l.strip()]
            return summary(p), rows
        plain, _ = train("plain", {})
        slow_env = {"GENEMASK_TEST_SLOW_SHAPE_SETUP_S": "2"}
        slow, rows = train("slow", slow_env)
        self.assertGreaterEqual(slow["shape_setup_steps"], 1)
        self.assertLess(slow["shape_setup_steps"], 8)  # else nothing would be left to measure
        self.assertEqual(slow["shape_setup_steps"], plain["shape_setup_steps"])  # the same data, the same shapes
        self.assertGreaterEqual(slow["shape_setup_s"], 2 * slow["shape_setup_steps"])
        self.assertGreaterEqual(rows[-1]["seconds"], 2)  # spent in the window
        self.assertEqual(rows[-1]["rate_steps"], 8 - slow["shape_setup_steps"])  # the steps the rates are of
        # 8 steps of tiny0 take well under 2 s: with the set-ups counted the rate would be a
        # small fraction of the plain run's.
        self.assertGreater(slow["tokens_per_s"], 0.4 * plain["tokens_per_s"], (slow, plain))
        self.assertGreater(slow["model_tflops"], 0.4 * plain["model_tflops"])
        # At 2 ranks each rank's shapes are its own; every rank keeps out a step where any rank
        # set one up (the collectives match: the run ends).
        two, rows2 = train("two", slow_env, ranks=2)
        self.assertEqual([r["step"] for r in rows2], [8])
        self.assertGreaterEqual(two["shape_setup_steps"], 1)
        self.assertGreater(two["tokens_per_s"], 0)
        # Windows of one step: a set-up step is all its window has, and keeps its time.
        one, rows1 = train("one", slow_env, log_every=1)
        self.assertLess(rows1[0]["tokens_per_s"], 0.4 * max(r["tokens_per_s"] for r in rows1), rows1)

    def test_init_continues_from_a_transformers_model(self):
        # A BertForMaskedLM saved by transformers (save_pretrained), dropout set to 0 so that
        # the training-mode loss is the model's loss.
        hf = os.path.join(self.tmp, "hf-saved")
        subprocess.run([sys.executable, os.path.join(MODEL_TESTS, "hf_transformers_check.py"), "save", hf],
                       check=True, capture_output=True)
        init = os.path.join(hf, "mlm-st")
        with open(os.path.join(init, "config.json")) as f:
            cfg = json.load(f)
        cfg.update(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
        with open(os.path.join(init, "config.json"), "w") as f:
            json.dump(cfg, f)
        out, dump = os.path.join(self.tmp, "init-run"), os.path.join(self.tmp, "first-batch.safetensors")
        args = ["pretrain", "--shards", self.shards, "--init", init, "--out", out, "--masking", "random",
                "--steps", "2", "--warmup", "1", "--batch-per-rank", "3", "--grad-accum", "1", "--log-every", "1",
                "--eval-every", "0", "--precision", "fp32", "--threads", "1", "--dump-first-batch", dump]
        s = summary(run(args))
        self.assertEqual(s["init"], init)
        first_loss = metrics(out)[0][1]
        # The loaded model's loss on the same batch, computed by transformers.
        import torch
        from safetensors.torch import load_file
        from transformers import AutoModelForMaskedLM
        b = load_file(dump)
        m = AutoModelForMaskedLM.from_pretrained(init).eval()
        with torch.no_grad():
            logits = m(input_ids=b["input_ids"], attention_mask=b["attention_mask"]).logits
        want = torch.nn.functional.cross_entropy(logits.view(-1, logits.shape[-1]), b["labels"].view(-1),
                                                 ignore_index=-100).item()
        self.assertGreater(int((b["labels"] != -100).sum()), 0)
        self.assertAlmostEqual(first_loss, want, delta=1e-5 * want)
        with open(os.path.join(out, "checkpoints", "step-00000002", "config.json")) as f:
            self.assertEqual(json.load(f)["hidden_size"], 32)
        # --resume with --init spelt another way: the same directory, no change to refuse.
        again_args = list(args[:-2])
        again_args[4] = os.path.join(self.tmp, "hf-saved", "..", "hf-saved", "mlm-st")
        again_args[again_args.index("--steps") + 1] = "3"
        self.assertEqual(summary(run(again_args + ["--resume"]))["steps_done"], 3)
        # A genemask run as --init, and --init with --model refused.
        again = os.path.join(self.tmp, "init-from-run")
        s = summary(run(args[:4] + [out] + args[5:6] + [again] + args[7:-2]))
        self.assertEqual(s["steps_done"], 2)
        p = run(args[:6] + [os.path.join(self.tmp, "x"), "--model", "logo"] + args[7:-2], check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("excludes", p.stderr)
        # A BertForPreTraining (its next-sentence head left out, said) continues as the same MLM:
        # its first loss is transformers' BertForMaskedLM's on the same batch. A bare BertModel's
        # encoder is taken (its MLM head starts anew, said); a sequence classifier is refused.
        from transformers import BertConfig, BertForPreTraining, BertModel
        hcfg = BertConfig(**{k: v for k, v in cfg.items() if k not in ("architectures", "transformers_version")})
        torch.manual_seed(3)
        kinds = {"pt": BertForPreTraining(hcfg), "bare": BertModel(hcfg, add_pooling_layer=False)}
        for kind, model in kinds.items():
            with torch.no_grad():
                for prm in model.parameters():
                    prm.add_(0.02 * torch.randn_like(prm))
            model.save_pretrained(os.path.join(self.tmp, "init-" + kind))
        pt_out, pt_dump = os.path.join(self.tmp, "init-pt-run"), os.path.join(self.tmp, "pt-batch.safetensors")
        p = run(args[:4] + [os.path.join(self.tmp, "init-pt"), "--out", pt_out] + args[7:-1] + [pt_dump])
        self.assertIn("next-sentence head (cls.seq_relationship, of a BertForPreTraining) is left out", p.stderr)
        b = load_file(pt_dump)
        m = AutoModelForMaskedLM.from_pretrained(os.path.join(self.tmp, "init-pt")).eval()
        with torch.no_grad():
            logits = m(input_ids=b["input_ids"], attention_mask=b["attention_mask"]).logits
        want = torch.nn.functional.cross_entropy(logits.view(-1, logits.shape[-1]), b["labels"].view(-1),
                                                 ignore_index=-100).item()
        self.assertAlmostEqual(metrics(pt_out)[0][1], want, delta=1e-5 * want)
        bare_out, bare_hf = os.path.join(self.tmp, "init-bare-run"), os.path.join(self.tmp, "init-bare-hf")
        p = run(args[:4] + [os.path.join(self.tmp, "init-bare"), "--out", bare_out, "--lr", "1e-12"] + args[7:-2])
        self.assertIn("no MLM head (a bare BertModel)", p.stderr)
        run(["export-hf", "--run", bare_out, "--out", bare_hf])
        got, ref = load_file(os.path.join(bare_hf, "model.safetensors")), kinds["bare"].state_dict()
        for name in ["embeddings.word_embeddings.weight", "encoder.layer.1.output.dense.weight"]:
            torch.testing.assert_close(got["bert." + name], ref[name], rtol=0, atol=1e-6)
        p = run(args[:4] + [os.path.join(hf, "cls-st"), "--out", os.path.join(self.tmp, "init-cls")] + args[7:-2],
                check=False)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("holds a sequence classifier (tensor 'classifier.", p.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "init-cls")))

    def test_model_flops_of_the_real_tokens(self):
        # metrics.jsonl's model_tflops over its tokens_per_s is the model FLOPs per real token
        # of the window (src/model/flops.hpp): with one step per line, one micro-batch per step
        # and one rank, that is the dumped first batch's FLOPs over its real tokens, computed
        # here from its attention mask and labels.
        out, dump = os.path.join(self.tmp, "flops"), os.path.join(self.tmp, "flops-batch.safetensors")
        s = summary(self.pretrain(out, ["--dump-first-batch", dump, "--precision", "fp32"], steps=2, grad_accum=1,
                                  eval_every=0, checkpoint_every=0, batch_per_rank=3))
        from safetensors.numpy import load_file
        b = load_file(dump)
        lengths = b["attention_mask"].sum(axis=1).astype(float)
        self.assertGreater(len(set(lengths)), 1)  # padded: unequal samples, only real tokens count
        masked = float((b["labels"] != -100).sum())
        H, F, V, L = 32, 64, 4101, 1
        want = 6 * L * (4 * H * H + 2 * H * F) * lengths.sum() + 12 * L * H * (lengths ** 2).sum() \
            + 6 * (H * H + H * V) * masked
        with open(os.path.join(out, "metrics.jsonl")) as f:
            first = [json.loads(l) for l in f if '"tokens_per_s"' in l][0]
        self.assertEqual(first["step"], 1)
        got = first["model_tflops"] * 1e12 / first["tokens_per_s"]
        self.assertAlmostEqual(got, want / lengths.sum(), delta=1e-3 * want / lengths.sum())
        self.assertGreater(s["model_tflops"], 0)
        self.assertIsNone(s["mfu_datasheet"])  # fp32 on a CPU: no datasheet peak

    def test_fill_and_rows_of_the_positions_computed(self):
        # fill (metrics.jsonl and the summary) is the window's real tokens over the positions
        # the model computed, and rows_per_micro_batch a micro-batch's rows, from the dumped
        # first batch (one step, one micro-batch, one rank): padded (--packing off), its
        # samples' tokens over samples x the longest; packed, three short samples share one
        # row of their summed length, every position real; in the CUDA graphs' fixed shapes
        # (--static-step, run here without capture), that row is the model's 512 positions.
        from safetensors.numpy import load_file
        for mode, extra in [("off", ["--packing", "off"]), ("on", ["--packing", "on"]), ("fixed", ["--static-step"])]:
            out, dump = os.path.join(self.tmp, f"fill-{mode}"), os.path.join(self.tmp, f"fill-{mode}.safetensors")
            s = summary(self.pretrain(out, ["--dump-first-batch", dump] + extra, steps=1, grad_accum=1,
                                      eval_every=0, checkpoint_every=0, batch_per_rank=3))
            lengths = load_file(dump)["attention_mask"].sum(axis=1).astype(float)
            self.assertEqual(len(lengths), 3)
            self.assertGreater(len(set(lengths)), 1)  # unequal samples: padding when padded
            want = {"off": (lengths.sum() / (3 * lengths.max()), 3), "on": (1.0, 1),
                    "fixed": (lengths.sum() / 512, 1)}[mode]
            with open(os.path.join(out, "metrics.jsonl")) as f:
                line = [json.loads(l) for l in f if '"fill"' in l][0]
            self.assertAlmostEqual(line["fill"], want[0], places=12)
            self.assertAlmostEqual(s["fill"], want[0], places=12)
            self.assertEqual(s["rows_per_micro_batch"], want[1])

    def test_bad_genemask_fused_is_one_line_and_leaves_nothing(self):
        # GENEMASK_FUSED (model/fusions.hpp) that is not a list of qkv, ln, ln-bf16, gelu and bgrad,
        # or none: one line naming the variable and the value, no run directory; a good value
        # trains (gelu on the CPU: the eager layer, recorded with the run).
        for value in ["foo", "qkv,gelu2", "qkv,,ln", ""]:
            out = os.path.join(self.tmp, "fused-bad")
            p = self.pretrain(out, steps=1, check=False, env={"GENEMASK_FUSED": value})
            self.assertNotEqual(p.returncode, 0)
            lines = [l for l in p.stderr.splitlines() if "GENEMASK_FUSED" in l]
            self.assertEqual(len(lines), 1, p.stderr)
            self.assertIn("error", lines[0])
            if value:
                self.assertIn(f"GENEMASK_FUSED='{value}'", lines[0])
            self.assertNotIn("terminate called", p.stderr)
            self.assertFalse(os.path.exists(out))
        s = summary(self.pretrain(os.path.join(self.tmp, "fused-none"), steps=1, eval_every=0, checkpoint_every=0,
                                  env={"GENEMASK_FUSED": "none"}))
        self.assertEqual(s["steps_done"], 1)
        out = os.path.join(self.tmp, "fused-gelu")
        s = summary(self.pretrain(out, steps=1, eval_every=0, checkpoint_every=1, env={"GENEMASK_FUSED": "gelu,qkv"}))
        self.assertEqual(s["steps_done"], 1)
        with open(os.path.join(out, "checkpoints", "step-00000001", "state.json")) as f:
            self.assertEqual(json.load(f)["fused"], "qkv,gelu")

    def test_resume_keeps_the_runs_fused_paths(self):
        # A run trained with other fused paths than this version's defaults (the default before
        # gelu, "qkv,ln"; "qkv,ln,gelu" before ln-smem, bias-sum and ce) resumes without GENEMASK_FUSED with its own, said in one line, and
        # its next checkpoints record them again; GENEMASK_FUSED set otherwise is a change
        # (refused: test_resume_refuses_changed_settings). A run of the defaults says nothing.
        for ranks in (None, 2):  # every rank reads the checkpoint; rank 0 says it
            out = os.path.join(self.tmp, f"older-fusions-{ranks}")
            self.pretrain(out, stop_after=5, ranks=ranks, env={"GENEMASK_FUSED": "qkv,ln"})  # checkpoint at 4
            p = self.pretrain(out, ["--resume"], ranks=ranks)
            said = [l for l in (p.stdout + p.stderr).splitlines() if "fused paths" in l]
            self.assertEqual(len(said), 1, p.stdout + p.stderr)
            self.assertIn('--resume: the fused paths that change the numbers are "qkv,ln", as the run recorded them (a '
                          'new run takes "qkv,ln,gelu,ln-smem,bias-sum,ce"; GENEMASK_FUSED chooses others)', said[0])
            with open(os.path.join(out, "checkpoints", "step-00000008", "state.json")) as f:
                self.assertEqual(json.load(f)["fused"], "qkv,ln")
        out = os.path.join(self.tmp, "default-fusions")
        self.pretrain(out, stop_after=5)
        p = self.pretrain(out, ["--resume"])
        self.assertNotIn("fused paths", p.stdout + p.stderr)
        with open(os.path.join(out, "checkpoints", "step-00000008", "state.json")) as f:
            self.assertEqual(json.load(f)["fused"], "qkv,ln,gelu,ln-smem,bias-sum,ce")

    def test_resume_refuses_a_newer_checkpoint_without_its_state(self):
        # step-8 lost its state.json (and holds a file of the user's): --resume took step 4 with
        # no word, and replaced step-8, the user's file with it, when it got there.
        out = os.path.join(self.tmp, "no-state")
        self.pretrain(out)  # checkpoints at 4 and 8
        newest = os.path.join(out, "checkpoints", "step-00000008")
        os.remove(os.path.join(newest, "state.json"))
        with open(os.path.join(newest, "notes.txt"), "w") as f:
            f.write("mine\n")
        before = sorted(os.listdir(newest))
        p = self.pretrain(out, ["--resume"], check=False)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn(f"{newest}: --resume: has no state.json, so it is not a complete checkpoint, and it is newer than "
                      "the newest one (step 4); the run would replace it at step 8: put its state.json back, or move "
                      "the directory away, to resume", p.stderr)
        self.assertEqual(sorted(os.listdir(newest)), before)

    def test_resume_refuses_changed_settings(self):
        out = os.path.join(self.tmp, "changed")
        cfg = os.path.join(self.tmp, "mutable.json")
        with open(cfg, "w") as f:
            json.dump(TINY, f)
        self.pretrain(out, model="mutable.json", stop_after=5)  # checkpoint at 4
        p = self.pretrain(out, ["--resume"], model="mutable.json", batch_per_rank=3, check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("state.json: --resume: --batch-per-rank is 3 now but 2 in the run", p.stderr)
        p = self.pretrain(out, ["--resume"], model="mutable.json", masking="genemask", check=False)
        self.assertIn('--resume: --masking is "genemask" now but "random" in the run', p.stderr)
        # --steps may grow or shrink, but not below the checkpoint's step (it exited 0 having
        # trained nothing, its schedule "decaying to 0" at a step behind it).
        p = self.pretrain(out, ["--resume"], model="mutable.json", steps=3, check=False)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("state.json: --resume: --steps 3 is below the checkpoint's step 4; give --steps 4 or more (the "
                      "run's own end: 8)", p.stderr)
        self.assertEqual(p.stdout, "")  # no summary
        # The fused paths that change the numbers (model/fusions.hpp) are a setting too; the
        # bf16 copy of the LayerNorm is not (the same numbers).
        p = self.pretrain(out, ["--resume"], model="mutable.json", check=False, env={"GENEMASK_FUSED": "qkv"})
        self.assertNotEqual(p.returncode, 0)
        self.assertIn('state.json: --resume: GENEMASK_FUSED (the environment variable; its qkv, ln, gelu, bgrad, ln-smem, bias-sum, ce, '
                      'ce-pad, cudnn-varlen and gemm-gelu) is "qkv" now but "qkv,ln,gelu,ln-smem,bias-sum,ce" in the run', p.stderr)
        # So is how the step runs: its fixed shapes (the CUDA graphs' step, here run without
        # capture) pad rows and round otherwise.
        p = self.pretrain(out, ["--resume", "--static-step"], model="mutable.json", check=False)
        self.assertIn('state.json: --resume: the step\'s shapes (fixed for --cuda-graphs) is "fixed" now but '
                      '"per batch" in the run', p.stderr)
        with open(cfg, "w") as f:
            json.dump(dict(TINY, intermediate_size=48), f)
        p = self.pretrain(out, ["--resume"], model="mutable.json", check=False)
        self.assertIn("config.json: --resume: the model's intermediate_size is 64 in the run but 48", p.stderr)
        with open(cfg, "w") as f:
            json.dump(TINY, f)
        # state.json names its format; another one, or a field of another type, is one clear line.
        state = os.path.join(out, "checkpoints", "step-00000004", "state.json")
        with open(state) as f:
            good = json.load(f)
        self.assertEqual((good["format"], good["format_version"]), ("genemask-checkpoint", 3))
        for bad, want in [(dict(good, format_version=4), 'state.json: is format "genemask-checkpoint" version 4; '
                                                          "this genemask reads genemask-checkpoint versions 1 to 3"),
                          (dict(good, step="four"), 'state.json: step is "four", expected an integer in 0..'),
                          # the device, TF32 (null on a CPU) and the sum over ranks are settings
                          (dict(good, device="cuda"), '--resume: --device is "cpu" now but "cuda" in the run'),
                          (dict(good, tf32=True), "--resume: --tf32/--no-tf32 (on a GPU in fp32; null where it does "
                                                  "not apply) is null now but true in the run"),
                          (dict(good, allreduce="NCCL"), '--resume: --allreduce (the sum over ranks it chose) is '
                                                         '"none (one rank)" now but "NCCL" in the run'),
                          ({k: v for k, v in good.items() if k != "cursor"}, "state.json: has no cursor.epoch: the "
                                                                             "checkpoint is damaged")]:
            with open(state, "w") as f:
                json.dump(bad, f)
            p = self.pretrain(out, ["--resume"], model="mutable.json", check=False)
            self.assertEqual(p.returncode, 1, p.stderr)
            self.assertIn(want, p.stderr)
            self.assertEqual(len([l for l in p.stderr.splitlines() if "error:" in l]), 1, p.stderr)
        with open(state, "w") as f:
            json.dump(good, f)
        s = summary(self.pretrain(out, ["--resume", "--allow-changes"], model="mutable.json", seed=9))
        self.assertEqual(s["start_step"], 4)

    def endless_run(self, out):
        """A pretrain command line that runs until it is stopped, logging every step."""
        return [os.path.abspath(BIN), "pretrain", "--shards", self.shards, "--masking", "random", "--model",
                os.path.join(self.tmp, "tiny.json"), "--out", out, "--steps", "100000", "--warmup", "10",
                "--batch-per-rank", "2", "--grad-accum", "1", "--log-every", "1", "--eval-every", "0",
                "--checkpoint-every", "1000000", "--threads", "1"]

    def test_second_run_on_the_same_out_is_refused(self):
        out = os.path.join(self.tmp, "locked")
        cmd = self.endless_run(out)
        first = subprocess.Popen(cmd, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.time() + 60
            while time.time() < deadline and not (os.path.exists(os.path.join(out, "metrics.jsonl"))
                                                  and metrics(out)):
                time.sleep(0.1)
            p = self.pretrain(out, ["--resume"], check=False)
            self.assertEqual(p.returncode, 1, p.stderr)
            self.assertIn(f"is in use by another genemask run (host {socket.gethostname()}, pid {first.pid})", p.stderr)
            # The shard set it reads cannot be replaced under it (its validation split was
            # opened again at each evaluation: the new set's, silently).
            with open(os.path.join(self.shards, "manifest.json"), "rb") as f:
                manifest = f.read()
            fa = os.path.join(self.tmp, "g.fa")
            p = run(["shards", "--genome", fa, "--out", self.shards, "--max-tokens", "60", "--min-tokens", "20",
                     "--seed", "7", "--force"], check=False)
            self.assertEqual(p.returncode, 1, p.stderr)
            self.assertIn(f"--out {self.shards} is being read by another genemask command", p.stderr)
            with open(os.path.join(self.shards, "manifest.json"), "rb") as f:
                self.assertEqual(f.read(), manifest)
        finally:
            first.send_signal(signal.SIGTERM)
            first.communicate(timeout=60)
        # The lock went with the process: the run resumes.
        s = summary(self.pretrain(out, ["--resume"], steps=max(m[0] for m in metrics(out)) + 1, warmup=10,
                                  batch_per_rank=2, grad_accum=1, eval_every=0, checkpoint_every=1000000))
        self.assertFalse(s["interrupted"])

    def test_a_continued_run_killed_before_its_next_checkpoint_is_not_final(self):
        """A finished run continued with --resume and more --steps, killed before its next
        checkpoint: its newest checkpoint's state.json still records the old --steps, and
        export-hf took it as the run's final model."""
        out = os.path.join(self.tmp, "ext")
        opts = dict(checkpoint_every=1000000, eval_every=0, grad_accum=1)
        self.pretrain(out, steps=4, **opts)
        self.pretrain(out, ["--resume"], steps=100, stop_after=7, check=False, **opts)  # dies after step 7
        self.assertEqual(max(m[0] for m in metrics(out)), 7)
        self.assertEqual([int(d.split("-")[1]) for d in os.listdir(os.path.join(out, "checkpoints"))
                          if d.startswith("step-")], [4])
        hf = os.path.join(self.tmp, "hf-ext")
        p = run(["export-hf", "--run", out, "--out", hf], check=False)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn(f'the run "{out}" has not finished: its metrics.jsonl logs step 7, past its newest checkpoint '
                      "(step 4): it was continued", p.stderr)
        self.assertFalse(os.path.exists(hf))
        # Finished with --resume, it is final again (the lines past step 4 were dropped).
        self.pretrain(out, ["--resume"], steps=8, **opts)
        self.assertEqual(int(summary(run(["export-hf", "--run", out, "--out", hf]))["checkpoint"].split("-")[-1]), 8)
        # Continued again and stopped before its first log line: metrics.jsonl is the finished
        # run's, but the run's marker records the --steps of its latest start.
        self.pretrain(out, ["--resume"], steps=20, stop_after=9, check=False, **dict(opts, log_every=1000))
        self.assertEqual(max(m[0] for m in metrics(out)), 8)
        p = run(["export-hf", "--run", out, "--out", hf + "-2"], check=False)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn(f'the run "{out}" has not finished: it was last started for 20 steps (pretrain --resume --steps '
                      "20) and stopped before its next checkpoint (its newest is step 8)", p.stderr)
        self.pretrain(out, ["--resume"], steps=8, **opts)  # back to 8: finished as it was
        self.assertEqual(int(summary(run(["export-hf", "--run", out, "--out", hf + "-3"]))["checkpoint"].split("-")[-1]), 8)
        # A `cp -al` snapshot of the run, continued: the original's metrics.jsonl (the same
        # file under two names) was rewritten, and the original taken as unfinished.
        snap = os.path.join(self.tmp, "ext-snap")
        shutil.copytree(out, snap, copy_function=os.link)
        with open(os.path.join(out, "metrics.jsonl"), "rb") as f:
            before = f.read()
        self.pretrain(snap, ["--resume"], steps=10, **opts)
        with open(os.path.join(out, "metrics.jsonl"), "rb") as f:
            self.assertEqual(f.read(), before)
        self.assertEqual(max(m[0] for m in metrics(snap)), 10)
        # A user's folder with a file named metrics.jsonl (and no checkpoint) is not a run.
        for name, files in [("ud", {"metrics.jsonl": '{"epoch": 1}\n', "notes.txt": "x"}),
                            ("ud-log", {"metrics.jsonl": '{"epoch": 1}\n'})]:
            d = os.path.join(self.tmp, name)
            os.makedirs(d)
            for f, text in files.items():
                with open(os.path.join(d, f), "w") as fh:
                    fh.write(text)
            p = self.pretrain(d, steps=2, check=False, **opts)
            self.assertEqual(p.returncode, 1, p.stderr)
            self.assertIn("is not a `genemask pretrain` directory", p.stderr)
            with open(os.path.join(d, "metrics.jsonl")) as fh:
                self.assertEqual(fh.read(), '{"epoch": 1}\n')
        # The schedule's warm-up against --steps: a warm-up longer than the run is said.
        p = self.pretrain(os.path.join(self.tmp, "warm"), steps=3, warmup=500, **opts)
        lr = metrics(os.path.join(self.tmp, "warm"))[-1][2]
        m = re.search(r"--warmup 500 is longer than --steps 3: the learning rate rises to (\S+) only", p.stderr)
        self.assertIsNotNone(m, p.stderr)
        self.assertAlmostEqual(float(m.group(1)), lr, delta=1e-5 * lr)

    def test_slurms_warning_while_the_model_library_loads_is_kept(self):
        # SIGUSR1 before the model library was loaded (seconds under load) ended the process
        # ("stopped by SIGUSR1", nothing saved; a CI run of jobs_pipeline_slurm's requeue test
        # got it 22 s into a loaded machine's start). Now kept: training stops after its first
        # step with a checkpoint, as for a signal during the rest of the set-up.
        out = os.path.join(self.tmp, "early-usr1")
        cmd = self.endless_run(out)
        p = subprocess.Popen(cmd, env=dict(ENV, GENEMASK_TEST_HOLD_START="3000"), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        first = p.stderr.readline()
        self.assertIn("holding before the model library loads", first)
        p.send_signal(signal.SIGUSR1)
        stdout, stderr = p.communicate(timeout=120)
        self.assertEqual(p.returncode, 3, first + stderr)
        self.assertNotIn("stopped by SIGUSR1", stderr)
        s = json.loads(stdout.strip().splitlines()[-1])
        self.assertTrue(s["interrupted"])
        self.assertEqual(s["steps_done"], 1, s)
        self.assertTrue(os.path.isdir(s["checkpoint"]), s)
        self.assertEqual([m[0] for m in metrics(out)], [1])

    def test_sigterm_checkpoints_and_export(self):
        out = os.path.join(self.tmp, "sig")
        cmd = self.endless_run(out)
        p = subprocess.Popen(cmd, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.time() + 60
        while time.time() < deadline:
            if os.path.exists(os.path.join(out, "metrics.jsonl")) and len(metrics(out)) >= 3:
                break
            time.sleep(0.1)
        p.send_signal(signal.SIGTERM)
        stdout, stderr = p.communicate(timeout=60)
        self.assertEqual(p.returncode, 3, stderr)  # stopped: not to be taken for a finished run
        self.assertIn("continue with --resume", stderr)
        s = json.loads(stdout.strip().splitlines()[-1])
        self.assertTrue(s["interrupted"])
        self.assertTrue(os.path.isdir(s["checkpoint"]), s)
        hf = os.path.join(self.tmp, "hf")
        # The run stopped before its steps: its newest checkpoint is not its model, and an
        # export would pass for it downstream (a sweep refuses the run, not the export).
        p = run(["export-hf", "--run", out, "--out", hf], check=False)
        self.assertEqual(p.returncode, 1, p.stderr)
        step = int(os.path.basename(s["checkpoint"]).split("-")[1])
        self.assertIn(f'the run "{out}" has not finished: its newest checkpoint is step {step} of the ', p.stderr)
        self.assertIn(f'or name a checkpoint directory ("{s["checkpoint"]}") to export that step', p.stderr)
        self.assertFalse(os.path.exists(hf))
        # That step, named deliberately, is exported.
        out = s["checkpoint"]
        e = summary(run(["export-hf", "--run", out, "--out", hf]))
        self.assertEqual(e["checkpoint"], s["checkpoint"])
        for f in ["config.json", "vocab.txt", "model.safetensors"]:
            self.assertTrue(os.path.exists(os.path.join(hf, f)), f)
        with open(os.path.join(hf, "config.json")) as f:
            self.assertEqual(json.load(f)["hidden_size"], 32)
        # Again onto the existing directory: refused without --force, then replaced whole with it,
        # nothing temporary left beside it.
        p = run(["export-hf", "--run", out, "--out", hf], check=False)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("pass --force to replace it", p.stderr)
        run(["export-hf", "--run", out, "--out", hf, "--force"])
        self.assertEqual(sorted(os.listdir(hf)), [".genemask.json", "config.json", "model.safetensors",
                                                  "special_tokens_map.json",
                                                  "tokenizer_config.json", "vocab.txt"])
        self.assertEqual([n for n in os.listdir(self.tmp) if n.startswith("hf.")], [])

    def test_embed_matches_reference_and_rank_count(self):
        import h5py
        import numpy as np
        import torch
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "model"))
        import bert_reference as ref
        out = os.path.join(self.tmp, "emb-run")
        self.pretrain(out, steps=2, eval_every=0, checkpoint_every=2)
        hf = os.path.join(self.tmp, "emb-hf")
        run(["export-hf", "--run", out, "--out", hf])
        rng = random.Random(4)
        seqs = ["".join(rng.choice("ACGT") for _ in range(rng.randint(6, 700))) for _ in range(9)]
        fa = os.path.join(self.tmp, "q.fa")
        with open(fa, "w") as f:
            for i, s_ in enumerate(seqs):
                f.write(f">q{i}\n{s_}\n")
        res = {}
        for ranks in [None, 2]:
            e = os.path.join(self.tmp, f"emb{ranks}.h5")
            s = summary(run(["embed", "--model", hf, "--input", fa, "--out", e, "--batch", "4", "--threads", "1",
                             "--precision", "fp32"], ranks=ranks))
            self.assertEqual(s["sequences"], 9)
            self.assertEqual(s["long_sequences"], sum(len(x) - 5 > 510 for x in seqs))
            with h5py.File(e, "r") as h:
                res[ranks] = (h["cls"][...], h["mean"][...], [i.decode() if isinstance(i, bytes) else i for i in h["ids"][...]])
        bad = os.path.join(self.tmp, "short.csv")
        with open(bad, "w") as f:
            f.write("sequence,label\nACGTACGT,0\nACG,1\n")
        p = run(["embed", "--model", hf, "--input", bad, "--out", os.path.join(self.tmp, "bad.h5")], check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn(f"{bad}:3: sequence 'line3' has 3 bases", p.stderr)
        self.assertFalse(any(n.startswith("bad.h5") for n in os.listdir(self.tmp)))
        norun = os.path.join(self.tmp, "norun")
        os.makedirs(norun)
        p = run(["export-hf", "--run", norun, "--out", os.path.join(self.tmp, "nohf")], check=False)
        self.assertIn("no complete checkpoint", p.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "nohf")))
        # Which sequences share a batch, and so the padded shape of each matrix product,
        # depends on the rank count; BLAS may then sum in another order (and differs across
        # CPUs), so equal up to float rounding, not bit for bit. The hidden states are
        # LayerNorm outputs of size O(1), where a float32 ulp is about 1.2e-7 (one 1.19e-7
        # difference was seen on an AMD EPYC); 1e-5 is about 80 ulps, while any real fault
        # (a row swapped, a mask lost) moves them by O(0.1).
        np.testing.assert_allclose(res[None][0], res[2][0], rtol=0, atol=1e-5)
        np.testing.assert_allclose(res[None][1], res[2][1], rtol=0, atol=1e-5)
        self.assertEqual(res[None][2], [f"q{i}" for i in range(9)])  # the row order is exact
        self.assertEqual(res[2][2], res[None][2])
        with open(os.path.join(hf, "config.json")) as f:
            cfg = json.load(f)
        w = ref.load_safetensors(os.path.join(hf, "model.safetensors"))
        with open(os.path.join(hf, "vocab.txt")) as f:
            vocab = {t: i for i, t in enumerate(f.read().split())}
        for i, s_ in enumerate(seqs):
            cls, tok = self.windowed_reference(lambda ids: ref.encode(cfg, w, ids, torch.ones_like(ids))[0],
                                               [vocab[s_[j:j + 6]] for j in range(len(s_) - 5)])
            np.testing.assert_allclose(res[None][0][i], cls, atol=1e-4)
            np.testing.assert_allclose(res[None][1][i], tok.mean(0), atol=1e-4)

    @staticmethod
    def windowed_reference(encode, toks, width=510, stride=255):
        """[CLS] and per-token vectors of a sequence as `embed --help` documents long ones:
        windows of `width` tokens every `stride`, the last ending at the end; [CLS] the mean
        over windows, a token the mean over the windows that hold it."""
        import numpy as np
        import torch
        starts = [0]
        while starts[-1] + width < len(toks):
            starts.append(min(starts[-1] + stride, len(toks) - width))
        cls, acc, cnt = 0, np.zeros((len(toks), 0)), np.zeros(len(toks))
        for a in starts:
            part = toks[a:a + width]
            with torch.no_grad():
                h = encode(torch.tensor([[2] + part + [3]])).numpy()
            if acc.shape[1] == 0:
                acc = np.zeros((len(toks), h.shape[1]))
            cls = cls + h[0]
            acc[a:a + len(part)] += h[1:-1]
            cnt[a:a + len(part)] += 1
        return cls / len(starts), acc / cnt[:, None]

    def test_embed_layers_pooling_per_token_match_transformers(self):
        import h5py
        import numpy as np
        import torch
        from transformers import AutoModel
        out = os.path.join(self.tmp, "layers-run")
        self.pretrain(out, steps=2, eval_every=0, checkpoint_every=2, model="tiny0.json")
        hf = os.path.join(self.tmp, "layers-hf")
        run(["export-hf", "--run", out, "--out", hf])
        rng = random.Random(8)
        seqs = ["".join(rng.choice("ACGT") for _ in range(n)) for n in (40, 300, 700, 1300)]
        tsv = os.path.join(self.tmp, "layers.tsv")
        with open(tsv, "w") as f:
            f.write("sequence\n" + "".join(x + "\n" for x in seqs))  # no label column
        with open(os.path.join(hf, "vocab.txt")) as f:
            vocab = {t: i for i, t in enumerate(f.read().split())}
        m = AutoModel.from_pretrained(hf).eval()
        for layer, pooling in [(0, "cls"), (1, "mean"), (-1, "both")]:
            e = os.path.join(self.tmp, f"layer{layer}.h5")
            s = summary(run(["embed", "--model", hf, "--input", tsv, "--out", e, "--layer", str(layer), "--pooling",
                             pooling, "--per-token", "--stride", "200", "--batch", "3", "--threads", "1",
                             "--precision", "fp32"]))
            self.assertEqual(s["layer"], layer % 2)  # tiny0: 1 layer, so -1 is 1
            self.assertEqual(s["long_sequences"], 2)
            with h5py.File(e, "r") as h:
                self.assertEqual("cls" in h, pooling != "mean")
                self.assertEqual("mean" in h, pooling != "cls")
                offsets, tokens = h["offsets"][...], h["tokens"][...]
                self.assertEqual(list(h["windows"][...]), [1, 1, 2, 5])
                self.assertEqual([i.decode() if isinstance(i, bytes) else i for i in h["ids"][...]],
                                 [f"line{i + 2}" for i in range(4)])
                for i, x in enumerate(seqs):
                    toks = [vocab[x[j:j + 6]] for j in range(len(x) - 5)]
                    cls, tok = self.windowed_reference(
                        lambda ids: m(input_ids=ids, output_hidden_states=True).hidden_states[layer][0], toks,
                        stride=200)
                    self.assertEqual(offsets[i + 1] - offsets[i], len(toks))
                    np.testing.assert_allclose(tokens[offsets[i]:offsets[i + 1]], tok, atol=1e-5)
                    if pooling != "mean":
                        np.testing.assert_allclose(h["cls"][i], cls, atol=1e-5)
                    if pooling != "cls":
                        np.testing.assert_allclose(h["mean"][i], tok.mean(0), atol=1e-5)
        p = run(["embed", "--model", hf, "--input", tsv, "--out", os.path.join(self.tmp, "l9.h5"), "--layer", "9"],
                check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("--layer 9: the model has layers 0 (embeddings) to 1", p.stderr)

    def test_slurm_world_size_mismatch_is_an_error(self):
        # What `srun -n 4` without MPI wiring looks like: each process sees a world of 1.
        srun = {"SLURM_JOB_ID": "77", "SLURM_STEP_ID": "0", "SLURM_PROCID": "0", "SLURM_LOCALID": "0",
                "SLURM_NODEID": "0", "SLURM_NNODES": "1", "SLURM_STEP_NUM_NODES": "1"}
        env = dict(ENV, SLURM_NTASKS="4", SLURM_NPROCS="4", SLURM_STEP_NUM_TASKS="4", **srun)
        args = [os.path.abspath(BIN), "pretrain", "--shards", self.shards, "--masking", "random", "--model",
                os.path.join(self.tmp, "tiny.json"), "--out", os.path.join(self.tmp, "slurm"), "--steps", "1"]
        p = subprocess.run(args, env=env, capture_output=True, text=True)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("the Slurm step has 4 tasks (SLURM_STEP_NUM_TASKS) but MPI sees 1 rank", p.stderr)
        # A nested launch: `mpiexec -n 2` inside a one-task step (`srun --gpus=1 script`)
        # makes a world of 2 that is the launcher's, not the step's: it runs.
        nested = dict(srun, SLURM_NTASKS="1", SLURM_NPROCS="1", SLURM_STEP_NUM_TASKS="1", PMI_SIZE="1", PMI_RANK="0")
        s = summary(self.pretrain(os.path.join(self.tmp, "slurm-nested"), ranks=2, steps=2, checkpoint_every=2,
                                  eval_every=0, env=nested))
        self.assertEqual(s["ranks"], 2)

    def test_bad_options(self):
        p = self.pretrain(os.path.join(self.tmp, "bad"), masking="genemask", check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("needs --npmi", p.stderr)
        p = self.pretrain(os.path.join(self.tmp, "bad2"), ["--resume"], check=False)
        self.assertIn("no complete checkpoint", p.stderr)
        p = self.pretrain(os.path.join(self.tmp, "bf16"), precision="fp16", check=False)
        self.assertIn("--precision", p.stderr)
        self.assertIn("fp16", p.stderr)
        for opts, text in [({"keep_checkpoints": 0}, "--keep-checkpoints must be at least 1"),
                           ({"lr": "nan"}, "--lr: nan is not a finite number"),
                           ({"lr": "-1"}, "--lr must be a positive number, got -1"),
                           ({"weight_decay": -1}, "--weight-decay must be a number >= 0"),
                           # Past the bounds the step arithmetic holds: the run looped before
                           # its first step (and did not stop on SIGTERM).
                           ({"steps": 2**63 - 1}, "--steps must be in 1..1000000000000, got 9223372036854775807"),
                           ({"steps": 0}, "--steps must be in 1..1000000000000, got 0"),
                           ({"grad_accum": 0}, "--grad-accum must be in 1..1048576, got 0"),
                           ({"log_every": 0}, "--log-every must be in 1..1000000000000, got 0"),
                           ({"eval_batches": -1}, "--eval-batches must be in 0..1000000000000, got -1")]:
            p = self.pretrain(os.path.join(self.tmp, "badopt"), check=False, **opts)
            self.assertNotEqual(p.returncode, 0)
            self.assertIn(text, p.stderr)
            self.assertFalse(os.path.exists(os.path.join(self.tmp, "badopt")))
        p = self.pretrain(os.path.join(self.tmp, "nccl"), ["--allreduce", "nccl"], check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("--allreduce nccl needs --device cuda", p.stderr)
        self.assertEqual(len(p.stderr.strip().splitlines()), 1, p.stderr)
        done = os.path.join(self.tmp, "done")
        self.pretrain(done, steps=2, checkpoint_every=2, eval_every=0)
        p = self.pretrain(done, steps=2, checkpoint_every=2, eval_every=0, check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("already holds checkpoints", p.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
