#!/usr/bin/env python3
"""Hostile input to the model commands (issue 21): stray checkpoint names, memory that
cannot suffice, huge --threads, a diverging run, a checkpoint whose files do not belong
together, weights of the wrong dtype or format, a config.json that is no object, a
malicious pickle, and a sweep over a run that is still training. The error rows reuse
test_bad_input's machinery (one "genemask: error:" line naming the file, exit 1, nothing
half-written); the rest check what must work, against independent references."""
import fcntl
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unittest
import zipfile

import h5py
import numpy as np

import test_bad_input as tb
from test_cli import BIN, ENV, run, summary
from test_corpus import write_genome

FAST = tb.FAST
Row = tb.Row
NO_BACKTRACE = re.compile(r"^(?!.*(Exception raised from|frame #[0-9]))")


seq = tb.seq


def finite_checkpoints(run_dir):
    """{step: whether every tensor of its model.safetensors is finite}."""
    from safetensors.numpy import load_file
    out = {}
    for name in sorted(os.listdir(os.path.join(run_dir, "checkpoints"))):
        f = os.path.join(run_dir, "checkpoints", name, "model.safetensors")
        if os.path.exists(f):
            out[name] = all(np.isfinite(t).all() for t in load_file(f).values())
    return out


class BadModelInput(unittest.TestCase):
    check_row = tb.BadInput.check_row
    check_table = tb.BadInput.check_table
    leftovers = tb.BadInput.leftovers

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="genemask-bad-model-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, ignore_errors=True)
        t = cls.t
        rng = random.Random(21)
        write_genome(t("g.fa"), rng, records=2, length=(9000, 11000))
        run(["shards", "--genome", t("g.fa"), "--out", t("shards"), "--max-tokens", "60", "--min-tokens", "20"])
        with open(t("tiny.json"), "w") as f:
            json.dump(tb.TINY, f)
        run(cls.pretrain(t("run")))
        run(cls.pretrain(t("run2"), "--seed", "7"))
        run(["export-hf", "--run", t("run"), "--out", t("hf")])
        tb.make_classifier(t, rng)
        cls.make_model_dirs()

    @classmethod
    def pretrain(cls, out, *extra, steps=4, every=2, model=None):
        """argv of a tiny pretraining run: `steps` steps, a checkpoint every `every`."""
        return ["pretrain", "--model", model or cls.t("tiny.json"), "--out", out, "--shards", cls.t("shards"),
                "--masking", "random", "--steps", str(steps), "--warmup", "1", "--batch-per-rank", "2",
                "--grad-accum", "1", "--eval-every", "0", "--checkpoint-every", str(every), *FAST, *extra]

    @classmethod
    def t(cls, *names):
        return os.path.join(cls.tmp, *names)

    @classmethod
    def copy(cls, src, name):
        shutil.copytree(cls.t(src), cls.t(name))
        # A model directory's copy goes without its marker: the damaged copies stand for models
        # from elsewhere (save_pretrained), whose files genemask checks field by field; an edited
        # export is refused by its marker's SHA-256 first (test_bad_input_silent.py).
        marker = os.path.join(cls.t(name), ".genemask.json")
        if os.path.exists(marker) and "files" in json.load(open(marker)):
            os.remove(marker)
        return cls.t(name)

    @classmethod
    def make_model_dirs(cls):
        import torch
        from safetensors.numpy import load_file, save_file
        t = cls.t
        weights = t("hf", "model.safetensors")
        for dtype in ("int64", "int32"):
            d = cls.copy("hf", f"hf-{dtype}")
            w = load_file(weights)
            w["bert.embeddings.LayerNorm.weight"] = w["bert.embeddings.LayerNorm.weight"].astype(dtype)
            save_file(w, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
        d = cls.copy("hf", "hf-nan")
        w = load_file(weights)
        w["bert.encoder.layer.1.output.dense.weight"][3, 5] = np.nan
        save_file(w, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
        # pytorch_model.bin as PyTorch before 1.6 wrote it (transformers reads it).
        sd = {k: torch.from_numpy(v) for k, v in load_file(weights).items()}
        d = cls.copy("hf", "hf-legacy")
        os.remove(os.path.join(d, "model.safetensors"))
        torch.save(sd, os.path.join(d, "pytorch_model.bin"), _use_new_zipfile_serialization=False)
        d = cls.copy("hf", "hf-bin-long")
        os.remove(os.path.join(d, "model.safetensors"))
        torch.save(dict(sd, **{"bert.embeddings.LayerNorm.bias": sd["bert.embeddings.LayerNorm.bias"].long()}),
                   os.path.join(d, "pytorch_model.bin"))
        # A pickle that would run os.system in Python: GLOBAL posix.system, then REDUCE.
        d = cls.copy("hf", "hf-pickle")
        os.remove(os.path.join(d, "model.safetensors"))
        with zipfile.ZipFile(os.path.join(d, "pytorch_model.bin"), "w", zipfile.ZIP_STORED) as z:
            z.writestr("archive/data.pkl", b"\x80\x02cposix\nsystem\nq\x00X\x04\x00\x00\x00trueq\x01\x85q\x02Rq\x03.")
            z.writestr("archive/version", b"3\n")
        for name, text in [("hf-cfg-list", "[]"), ("hf-cfg-number", "42")]:
            d = cls.copy("hf", name)
            with open(os.path.join(d, "config.json"), "w") as f:
                f.write(text)

    def line_of(self, p):
        lines = [l for l in p.stderr.splitlines() if l.strip() and not l.startswith("[")]
        self.assertEqual(len(lines), 1, p.stderr)
        return lines[0]

    # ---- item 10: checkpoints/step-latest, step-99999999999999999999 ------------------

    def test_stray_checkpoint_names_are_ignored(self):
        t = self.t
        d = self.copy("run", "run-stray")
        newest = os.path.join(d, "checkpoints", "step-00000004")
        for stray in ("step-latest", "step-99999999999999999999"):
            shutil.copytree(newest, os.path.join(d, "checkpoints", stray))  # complete-looking, state.json and all
        s = summary(run(["export-hf", "--run", d, "--out", t("stray-hf")]))
        self.assertEqual(s["checkpoint"], newest)
        run(["embed", "--model", d, "--input", t("test.csv"), "--out", t("stray.h5"), *FAST])
        run(["finetune", "--model", d, "--train", t("train.csv"), "--test", t("test.csv"), "--out", t("stray-ft"),
             "--epochs", "1", *FAST])
        with open(t("stray-ft", "metrics.json")) as f:
            self.assertEqual(json.load(f)["model"], newest)
        s = summary(run(self.pretrain(d, "--keep-checkpoints", "1", "--resume", steps=6)))
        self.assertEqual((s["start_step"], s["steps_done"]), (4, 6))
        # Rotation removes old checkpoints, never what is not one.
        self.assertEqual(sorted(n for n in os.listdir(os.path.join(d, "checkpoints")) if not n.startswith(".")),
                         ["step-00000006", "step-99999999999999999999", "step-latest"])
        only = os.path.join(t("only-stray"), "checkpoints")
        shutil.copytree(t("run", "checkpoints", "step-00000004"), os.path.join(only, "step-latest"))
        self.check_table([
            Row("a run with only step-latest", ["export-hf", "--run", t("only-stray"), "--out", t("os-hf")],
                [t("only-stray") + ": no complete checkpoint"], t("os-hf")),
        ])

    # ---- item 12: memory bounded by the window batch; refused when it cannot suffice ---

    def wait4_rss(self, argv):
        """Runs genemask, returns (exit status, peak RSS in MiB) of that process alone."""
        with open(self.t("rss.out"), "w") as out, open(self.t("rss.err"), "w") as err:
            p = subprocess.Popen([os.path.abspath(BIN)] + argv, env=ENV, stdout=out, stderr=err)
            _, status, usage = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        with open(self.t("rss.err")) as f:
            self.assertEqual(p.returncode, 0, f.read())
        return usage.ru_maxrss / 1024.0

    def test_embed_mean_memory_does_not_grow_with_the_sequence(self):
        t = self.t
        wide = dict(tb.TINY, hidden_size=256, num_hidden_layers=1, num_attention_heads=4, intermediate_size=32)
        with open(t("wide.json"), "w") as f:
            json.dump(wide, f)
        run(self.pretrain(t("wide-run"), steps=1, model=t("wide.json")))
        run(["export-hf", "--run", t("wide-run"), "--out", t("wide-hf")])
        rng = random.Random(12)
        long_bases = 300_000
        for name, n in [("short.fa", 2_000), ("long.fa", long_bases)]:
            with open(t(name), "w") as f:
                s = seq(rng, n)
                f.write(">s\n" + "".join(s[i:i + 80] + "\n" for i in range(0, n, 80)))
        rss = {}
        for name in ("short", "long"):
            rss[name] = self.wait4_rss(["embed", "--model", t("wide-hf"), "--input", t(f"{name}.fa"), "--out",
                                        t(f"{name}.h5"), "--pooling", "mean", "--layer", "0", *FAST])
        # Before: a double per token and hidden unit, 300k x 256 x 8 bytes = 586 MiB more.
        grew = rss["long"] - rss["short"]
        self.assertLess(grew, 120, f"peak RSS {rss}: grew {grew:.0f} MiB with the sequence (the old accumulator: 586)")
        with h5py.File(t("long.h5"), "r") as h:
            self.assertEqual(h["mean"].shape, (1, 256))
            self.assertGreater(int(h["windows"][0]), 1000)

    def test_embed_mean_equals_the_mean_of_its_token_vectors(self):
        # Streaming mean (no --per-token) against the per-token vectors (their own sums).
        t = self.t
        rng = random.Random(5)
        with open(t("windows.fa"), "w") as f:
            for i, n in enumerate((50, 1400, 2600, 700)):
                f.write(f">s{i}\n{seq(rng, n)}\n")
        run(["embed", "--model", t("hf"), "--input", t("windows.fa"), "--out", t("w-mean.h5"), "--pooling", "both",
             "--stride", "100", *FAST])
        run(["embed", "--model", t("hf"), "--input", t("windows.fa"), "--out", t("w-tok.h5"), "--pooling", "cls",
             "--stride", "100", "--per-token", *FAST])
        with h5py.File(t("w-mean.h5"), "r") as a, h5py.File(t("w-tok.h5"), "r") as b:
            off, tok = b["offsets"][...], b["tokens"][...].astype(np.float64)
            self.assertEqual(list(a["windows"][...]), [1, 10, 22, 3])  # 1 + ceil((tokens - 510) / 100)
            for i in range(4):
                np.testing.assert_allclose(a["mean"][i], tok[off[i]:off[i + 1]].mean(0), rtol=1e-5, atol=1e-6)
            np.testing.assert_array_equal(a["cls"][...], b["cls"][...])

    def test_input_larger_than_memory_is_refused_before_reading(self):
        t = self.t
        with open("/proc/meminfo") as f:
            total = next(int(l.split()[1]) * 1024 for l in f if l.startswith("MemTotal:"))
        big = t("larger-than-memory.fa")
        with open(big, "wb") as f:  # sparse: no disk space, but more bytes than the machine has memory
            f.write(b">chr1\n")
            f.truncate(total + (1 << 30))
        start = time.time()
        self.check_table([
            Row("predict: one record larger than memory",
                ["predict", "--model", t("clf"), "--input", big, "--out", t("big.tsv"), *FAST],
                [big + ": reading its", "needs about", "GiB of memory", "available"], t("big.tsv")),
            Row("embed: one record larger than memory",
                ["embed", "--model", t("hf"), "--input", big, "--out", t("big.h5"), *FAST],
                [big + ": reading its", "needs about", "GiB of memory"], t("big.h5")),
        ])
        self.assertLess(time.time() - start, 60, "the refusal must come before reading the file")

    # ---- item 14: --threads beyond the cores --------------------------------------------

    def test_threads_are_capped_at_the_cores_available(self):
        t = self.t
        cores = len(os.sched_getaffinity(0))
        p = subprocess.run([os.path.abspath(BIN), "finetune", "--model", t("hf"), "--train", t("train.csv"),
                            "--test", t("test.csv"), "--out", t("thr-ft"), "--epochs", "1", "--threads", "1000"],
                           env=ENV, capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(t("thr-ft", "metrics.json")) as f:
            used = json.load(f)["threads"]
        self.assertTrue(1 <= used <= cores, (used, cores))
        self.assertIn(f"--threads 1000 is more than the {used} core(s) this process may use", p.stderr)
        self.assertIn(f"using {used}", p.stderr)
        # Affinity-aware: bound to one CPU (taskset), 1 thread whatever the machine has.
        first = min(os.sched_getaffinity(0))
        p = subprocess.run([os.path.abspath(BIN), "finetune", "--model", t("hf"), "--train", t("train.csv"),
                            "--test", t("test.csv"), "--out", t("thr-ft1"), "--epochs", "1", "--threads", "1000"],
                           env=ENV, capture_output=True, text=True, timeout=120,
                           preexec_fn=lambda: os.sched_setaffinity(0, {first}))
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(t("thr-ft1", "metrics.json")) as f:
            self.assertEqual(json.load(f)["threads"], 1)
        p = subprocess.run([os.path.abspath(BIN), "predict", "--model", t("clf"), "--input", t("test.csv"),
                            "--out", t("thr.tsv"), "--threads", "1000000"],
                           env=ENV, capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertTrue(os.path.exists(t("thr.tsv")))
        self.check_table([
            Row("--threads -3", ["predict", "--model", t("clf"), "--input", t("test.csv"), "--out", t("thr2.tsv"),
                                 "--threads", "-3"], ["--threads", "-3"], t("thr2.tsv")),
        ])

    # ---- item 15: a diverging run ----------------------------------------------------------

    def test_diverging_pretrain_stops_without_a_nan_checkpoint(self):
        t = self.t
        div = self.copy("run", "run-div")
        # --allow-changes: the run was started with another --lr (a changed setting is refused
        # otherwise, issue 31).
        args = self.pretrain(div, "--log-every", "4", "--lr", "1e10", "--resume", "--allow-changes", steps=12)
        diverged = re.compile(r"training diverged at step ([0-9]+): the loss is (nan|inf|-inf) and the gradient "
                              r"norm (nan|inf)|training diverged at step ([0-9]+): after it the weights of '")
        self.check_table([
            Row("--lr 1e10 on --resume", args,
                [div + ": ", diverged, "nothing of it was saved; the last good checkpoint is",
                 "continue from it with --resume --allow-changes and a lower --lr"]),
            Row("--lr 1e10 on a new run",
                self.pretrain(t("div-new"), "--lr", "1e10", steps=12, every=100),
                [t("div-new") + ": ", diverged, "nothing was saved (the run has no checkpoint)"], t("div-new")),
        ])
        p = run(args, check=False)
        m = re.search(r"diverged at step ([0-9]+)", p.stderr)
        self.assertGreater(int(m.group(1)), 4, p.stderr)
        ok = finite_checkpoints(div)
        self.assertTrue(ok and all(ok.values()), ok)  # no NaN checkpoint, ever
        last = max(ok)
        self.assertIn(f"{os.path.join(div, 'checkpoints', last)} (step {int(last[5:])})", p.stderr)
        with open(os.path.join(div, "metrics.jsonl")) as f:
            for line in f:
                for k, v in json.loads(line).items():
                    if k == "precision":  # the one text field: what --precision resolved to
                        self.assertIn(v, ("fp32", "bf16"), line)
                        continue
                    self.assertTrue(isinstance(v, (int, float)) and np.isfinite(v), (k, v, line))
        # A resume from the last good checkpoint with a sane learning rate goes on.
        s = summary(run(self.pretrain(div, "--resume", steps=12)))
        self.assertEqual(s["steps_done"], 12)

    def test_diverging_finetune_and_nan_weights(self):
        t = self.t
        self.check_table([
            Row("finetune --lr 1e10",
                ["finetune", "--model", t("hf"), "--train", t("train.csv"), "--test", t("test.csv"), "--out",
                 t("div-ft"), "--epochs", "3", "--lr", "1e10", *FAST],
                ["fine-tuning diverged", re.compile(r"the training loss is (nan|inf)|probability of nan"),
                 "--lr (now 1e+10)"], t("div-ft")),
            Row("export-hf of NaN weights", ["export-hf", "--run", t("hf-nan"), "--out", t("nan-hf")],
                [t("hf-nan", "model.safetensors"), "'bert.encoder.layer.1.output.dense.weight'",
                 "1 non-finite values", "export an earlier checkpoint"], t("nan-hf")),
        ])

    # ---- item 16: a checkpoint's files belong together; --model compared by content ----

    def test_resume_refuses_files_of_another_checkpoint_or_run(self):
        t = self.t
        ck = os.path.join("checkpoints", "step-00000004")
        a = self.copy("run", "bind-a")  # state.json of step 2 in step-00000004
        shutil.copy(os.path.join(a, "checkpoints", "step-00000002", "state.json"), os.path.join(a, ck, "state.json"))
        b = self.copy("run", "bind-b")  # run2's state.json of the same step
        shutil.copy(t("run2", ck, "state.json"), os.path.join(b, ck, "state.json"))
        c = self.copy("run", "bind-c")  # run2's weights under this run's state.json
        shutil.copy(t("run2", ck, "model.safetensors"), os.path.join(c, ck, "model.safetensors"))
        d = self.copy("run", "bind-d")  # a whole checkpoint of run2
        shutil.rmtree(os.path.join(d, ck))
        shutil.copytree(t("run2", ck), os.path.join(d, ck))

        def resume(out):
            return self.pretrain(out, "--resume", steps=6)

        self.check_table([
            Row("state.json of step 2 in step-00000004", resume(a),
                [os.path.join(a, ck, "state.json"), "records step 2", "checkpoint of step 4"]),
            Row("another run's state.json", resume(b), [os.path.join(b, ck, "state.json"), "is of run", "another run"]),
            Row("another run's model.safetensors", resume(c),
                [os.path.join(c, ck, "model.safetensors"), "is not the file this checkpoint's state.json records"]),
            Row("another run's checkpoint", resume(d), [os.path.join(d, ck, "state.json"), "is of run"]),
        ])
        with open(t("run", ck, "state.json")) as f:
            st = json.load(f)
        self.assertEqual((st["format_version"], st["steps"], st["step"]), (3, 4, 4))
        self.assertRegex(st["run_id"], r"^[0-9a-f]{32}$")
        self.assertEqual(sorted(st["files"]), ["config.json", "model.safetensors", "optimizer.pt", "rng-rank00000.pt",
                                               "special_tokens_map.json", "tokenizer_config.json", "vocab.txt"])
        with open(t("run2", ck, "state.json")) as f:
            self.assertNotEqual(json.load(f)["run_id"], st["run_id"])

    def test_resume_of_a_format_1_checkpoint_and_a_respelt_model(self):
        t = self.t
        old = self.copy("run", "v1")
        for step in ("step-00000002", "step-00000004"):
            path = os.path.join(old, "checkpoints", step, "state.json")
            with open(path) as f:
                st = json.load(f)
            for k in ("run_id", "files", "steps"):
                del st[k]
            st["format_version"] = 1
            with open(path, "w") as f:
                json.dump(st, f)
        s = summary(run(self.pretrain(old, "--resume", steps=6)))
        self.assertEqual((s["start_step"], s["steps_done"]), (4, 6))
        with open(os.path.join(old, "checkpoints", "step-00000006", "state.json")) as f:
            self.assertEqual(json.load(f)["format_version"], 3)
        # --model ./tiny.json, then the same file by its absolute path: the same config.
        run(self.pretrain("respelt", model="./tiny.json"), cwd=self.tmp)
        s = summary(run(self.pretrain(t("respelt"), "--resume", steps=6)))
        self.assertEqual((s["start_step"], s["steps_done"]), (4, 6))

    # ---- item 18: dtypes and the legacy torch.save format ------------------------------------

    def test_weights_of_other_dtypes_and_formats(self):
        t = self.t
        embed = lambda m, n: ["embed", "--model", t(m), "--input", t("test.csv"), "--out", t(f"dt{n}.h5"), *FAST]
        self.check_table([
            Row("I64 weights", embed("hf-int64", 1),
                [t("hf-int64", "model.safetensors"), "'bert.embeddings.LayerNorm.weight'", "dtype I64"],
                t("dt1.h5")),
            Row("I32 weights", embed("hf-int32", 2),
                [t("hf-int32", "model.safetensors"), "'bert.embeddings.LayerNorm.weight'", "dtype I32"],
                t("dt2.h5")),
            Row("a Long tensor in pytorch_model.bin", embed("hf-bin-long", 3),
                [t("hf-bin-long", "pytorch_model.bin"), "'bert.embeddings.LayerNorm.bias'", "dtype Long"],
                t("dt3.h5")),
            Row("legacy torch.save", embed("hf-legacy", 4),
                [t("hf-legacy", "pytorch_model.bin"), "legacy torch.save file", "python -c"], t("dt4.h5")),
        ])
        # The conversion the message gives works, and the model then gives what the original does.
        p = run(embed("hf-legacy", 5), check=False)
        code = re.search(r'python -c "(.*)"$', self.line_of(p)).group(1)
        subprocess.run([sys.executable, "-c", code], check=True)
        run(embed("hf-legacy", 5))
        run(embed("hf", 6))
        with h5py.File(t("dt5.h5"), "r") as a, h5py.File(t("dt6.h5"), "r") as b:
            np.testing.assert_array_equal(a["mean"][...], b["mean"][...])

    # ---- item 25: config.json not an object; a malicious pickle ------------------------------

    def test_config_not_an_object_and_malicious_pickle(self):
        t = self.t
        embed = lambda m, n: ["embed", "--model", t(m), "--input", t("test.csv"), "--out", t(f"c{n}.h5"), *FAST]
        self.check_table([
            Row("config.json is []", embed("hf-cfg-list", 1),
                [t("hf-cfg-list", "config.json"), "holds a JSON array ([])", "not an object"], t("c1.h5")),
            Row("config.json is 42", embed("hf-cfg-number", 2),
                [t("hf-cfg-number", "config.json"), "holds a JSON number (42)"], t("c2.h5")),
            Row("predict: config.json is []",
                ["predict", "--model", t("hf-cfg-list"), "--input", t("test.csv"), "--out", t("c3.tsv"), *FAST],
                [t("hf-cfg-list", "config.json"), "holds a JSON array"], t("c3.tsv")),
            Row("GLOBAL posix.system in data.pkl", embed("hf-pickle", 4),
                [t("hf-pickle", "pytorch_model.bin"), "cannot read as a torch.save file", NO_BACKTRACE], t("c4.h5")),
        ])

    # ---- item 22: a sweep over a run still in progress ----------------------------------

    def sweep_plan(self, name, model_path):
        with open(self.t(name), "w") as f:
            f.write(f"models:\n  - {{name: m, path: {model_path}}}\n"
                    "tasks:\n  - {name: t, train: train.csv, test: test.csv}\nshots: [3]\nseeds: 2\n"
                    "threads_per_worker: 1\nfinetune: {epochs: 1}\n")
        return self.t(name)

    def test_sweep_resolves_a_run_once_and_refuses_unfinished_ones(self):
        t = self.t
        unfinished = self.copy("run", "run-unfinished")
        state = os.path.join(unfinished, "checkpoints", "step-00000004", "state.json")
        with open(state) as f:
            st = json.load(f)
        st["steps"] = 100
        with open(state, "w") as f:
            json.dump(st, f)
        live = self.copy("run", "run-live")
        sweep = lambda plan, out, *x: ["sweep", "--plan", plan, "--out", t(out), "--progress-every", "0", *x]
        with open(os.path.join(live, ".genemask.lock"), "w") as lock:  # a live pretrain's lock
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            lock.write("host elsewhere, pid 4242\n")
            lock.flush()
            self.check_table([
                Row("a run whose newest checkpoint is step 4 of 100",
                    sweep(self.sweep_plan("p-unfinished.yaml", "run-unfinished"), "sw1", "--simulate", "0"),
                    [t("p-unfinished.yaml") + ":2: models[0].path: ", "has not finished", "step 4 of the 100",
                     os.path.join(unfinished, "checkpoints", "step-00000004")], t("sw1")),
                Row("a run locked by a live pretrain",
                    sweep(self.sweep_plan("p-live.yaml", "run-live"), "sw2", "--simulate", "0"),
                    [t("p-live.yaml") + ":2: models[0].path: ", "still being trained", "host elsewhere, pid 4242"],
                    t("sw2")),
            ])
        # A checkpoint named explicitly is taken as it is; a finished run resolves to its newest.
        for plan, out, path, step in [("p-explicit.yaml", "sw3", "run-unfinished/checkpoints/step-00000002", 2),
                                      ("p-run.yaml", "sw4", "run", 4)]:
            summary(run(sweep(self.sweep_plan(plan, path), out, "--simulate", "0")))
            want = os.path.join(self.tmp, path) if step == 2 else t("run", "checkpoints", "step-00000004")
            with open(t(out, "results.jsonl")) as f:
                recs = [json.loads(l) for l in f]
            self.assertEqual([(r["checkpoint"], r["checkpoint_step"]) for r in recs], [(want, step)] * 2)
            with open(t(out, "plan.json")) as f:
                m = json.load(f)["models"][0]
            self.assertEqual((m["checkpoint"], m["checkpoint_step"]), (want, step))
        # Real jobs: every seed loads the checkpoint resolved at plan time, also after the
        # run has gone on (a newer checkpoint appears between the jobs of a restarted sweep).
        live_run = self.copy("run", "run-growing")
        plan = self.sweep_plan("p-real.yaml", "run-growing")
        s = summary(run(sweep(plan, "sw5", "--strict")))
        self.assertEqual(s["ok"], 2)
        with open(t("sw5", "results.jsonl")) as f:
            recs = [json.loads(l) for l in f]
        for r in recs:
            with open(os.path.join(r["out"], "metrics.json")) as f:
                self.assertEqual(json.load(f)["model"], r["checkpoint"])
            self.assertEqual(r["checkpoint"], os.path.join(live_run, "checkpoints", "step-00000004"))
        run(self.pretrain(live_run, "--resume", steps=6))
        p = run(sweep(plan, "sw5"), check=False)  # the resolved checkpoint changed: not silently mixed
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn('model "m" changed', p.stderr)


    # ---- a fifth campaign: model inputs that were used without a word -----------------

    def test_models_and_inputs_genemask_cannot_read_as_given_are_refused(self):
        """Each of these once ran with exit 0 and published numbers of another model or input:
        a vocabulary of other ids under pretrain --init, a run stopped half-way taken for its
        final model, a multi-label or regression head read as a softmax, two classes of one
        name, a BERT setting genemask does not implement (or misspelt) dropped (a decoder's
        causal attention run as an encoder's, pruned heads, an untied decoder asked of a new
        model), an untied decoder replaced by the tied one, alignment gaps or U scored as
        sequence, a --config that nothing read, and a variant beyond the 6-mers the model
        reads scored as delta 0."""
        from safetensors.numpy import load_file, save_file
        t = self.t
        vocab = self.copy("hf", "hf-vocab")
        lines = open(os.path.join(vocab, "vocab.txt")).read().split("\n")
        lines[5], lines[6] = lines[6], lines[5]
        open(os.path.join(vocab, "vocab.txt"), "w").write("\n".join(lines))
        half = self.copy("run", "run-half")
        state = os.path.join(half, "checkpoints", "step-00000004", "state.json")
        st = json.load(open(state))
        st["steps"] = 100
        json.dump(st, open(state, "w"))

        def edited(src, name, **changes):
            d = self.copy(src, name)
            c = json.load(open(os.path.join(d, "config.json")))
            c.update(changes)
            json.dump(c, open(os.path.join(d, "config.json"), "w"))
            return d

        edited("clf", "clf-multi", problem_type="multi_label_classification")
        edited("clf", "clf-dup", id2label={"0": "promoter", "1": "promoter"})
        edited("clf", "clf-l2i", label2id={"0": 1, "1": 0})
        edited("hf", "hf-near", hidden_size_per_head=16)  # near hidden_size, which is there: not a misspelling
        edited("hf", "hf-decoder-config", is_decoder=True)  # transformers: causal attention
        edited("hf", "hf-not-decoder", is_decoder=False, add_cross_attention=False, pruned_heads={})
        untied = self.copy("hf", "hf-decoder")
        w = load_file(os.path.join(untied, "model.safetensors"))
        w["cls.predictions.decoder.weight"] = w["bert.embeddings.word_embeddings.weight"] * 2
        save_file(w, os.path.join(untied, "model.safetensors"), metadata={"format": "pt"})
        typo = {k: v for k, v in tb.TINY.items() if k != "max_position_embeddings"}
        for name, cfg in [("tiny-typo.json", dict(typo, max_position_embedding=64)),  # 512 would be used
                          ("tiny-relative.json", dict(tb.TINY, position_embedding_type="relative_key")),
                          ("tiny-pruned.json", dict(tb.TINY, pruned_heads={"0": [1]})),
                          ("tiny-cross.json", dict(tb.TINY, is_decoder=True, add_cross_attention=True)),
                          ("tiny-flag.json", dict(tb.TINY, add_cross_attention="no")),
                          ("tiny-untied.json", dict(tb.TINY, tie_word_embeddings=False))]:
            json.dump(cfg, open(t(name), "w"))
        open(t("gaps.fa"), "w").write(">a\nACGTACGTAC--GTACGTACGT\n")
        open(t("rna.fa"), "w").write(">a\nACGUACGUACGUACGUACGU\n")
        open(t("bom.fa"), "wb").write(b"\xef\xbb\xbf>a\nACGTACGTACGTACGTACGT\n")
        open(t("alln.fa"), "w").write(">a\nNNNNNNNNNNNNNNNNNNNN\n>b\nNNNNNNNNNN\n")
        genome = "".join(l.strip() for l in open(t("g.fa")).read().split(">chr2")[0].splitlines()[1:])
        pos = next(p for p in range(2000, 3000) if genome[p - 1] in "ACGT")
        alt = {"A": "C", "C": "G", "G": "T", "T": "A"}[genome[pos - 1]]
        with open(t("far.vcf"), "w") as f:
            f.write("##fileformat=VCFv4.2\n#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO\n"
                    f"chr1\t{pos}\trs9\t{genome[pos - 1]}\t{alt}\t.\t.\t.\n")
        pre = lambda out, *x: ["pretrain", "--shards", t("shards"), "--out", t(out), "--masking", "random", "--steps",
                               "1", "--batch-per-rank", "2", "--grad-accum", "1", *FAST, *x]
        ft = lambda model, out, *x: ["finetune", "--model", t(model), "--train", t("train.csv"), "--test",
                                     t("test.csv"), "--out", t(out), "--epochs", "1", *FAST, *x]
        predict = lambda model, inp, out: ["predict", "--model", t(model), "--input", t(inp), "--out", t(out), *FAST]
        unfinished = ["has not finished", "step 4 of the 100", "name a checkpoint directory"]
        self.check_table([
            Row("pretrain --init with a vocab.txt of other ids", pre("i1", "--init", vocab),
                [os.path.join(vocab, "vocab.txt") + ":6: token"], t("i1")),
            Row("finetune of a run stopped half-way", ft("run-half", "f1"), unfinished, t("f1")),
            Row("embed of a run stopped half-way",
                ["embed", "--model", half, "--input", t("test.csv"), "--out", t("e1.h5"), *FAST], unfinished, t("e1.h5")),
            Row("pretrain --init of a run stopped half-way", pre("i2", "--init", half), unfinished, t("i2")),
            Row("a multi-label head", predict("clf-multi", "test.csv", "p1.tsv"),
                [t("clf-multi", "config.json"), "problem_type is \"multi_label_classification\""], t("p1.tsv")),
            Row("two classes of one name", predict("clf-dup", "test.csv", "p2.tsv"),
                [t("clf-dup", "config.json"), "class 'promoter' for ids 0 and 1"], t("p2.tsv")),
            Row("label2id that contradicts id2label", predict("clf-l2i", "test.csv", "p3.tsv"),
                [t("clf-l2i", "config.json"), "label2id maps '0' to 1, but id2label gives it id 0"], t("p3.tsv")),
            Row("pretrain --init of a decoder of its own", pre("i4", "--init", untied),
                [os.path.join(untied, "model.safetensors"), "'cls.predictions.decoder.weight' differs from the word "
                 "embeddings", "pretraining from --init would not be of this model's decoder"], t("i4")),
            Row("predict: a FASTA with a byte-order mark", predict("clf", "bom.fa", "p6.tsv"),
                [t("bom.fa"), "starts with a UTF-8 byte-order mark before '>'"], t("p6.tsv")),
            Row("a misspelt BERT key", pre("i5", "--model", t("tiny-typo.json")),
                [t("tiny-typo.json"), "'max_position_embedding'", "misspelt 'max_position_embeddings'"], t("i5")),
            Row("relative position embeddings", pre("i6", "--model", t("tiny-relative.json")),
                [t("tiny-relative.json"), "position_embedding_type is \"relative_key\""], t("i6")),
            Row("a decoder's config (causal attention)",
                ["embed", "--model", t("hf-decoder-config"), "--input", t("test.csv"), "--out", t("e4.h5"), *FAST],
                [t("hf-decoder-config", "config.json"), "is_decoder is true", "genemask's BERT is an encoder"],
                t("e4.h5")),
            Row("pruned attention heads", pre("i8", "--model", t("tiny-pruned.json")),
                [t("tiny-pruned.json"), "pruned_heads is {\"0\":[1]}", "every head of every layer"], t("i8")),
            Row("a decoder with cross-attention", pre("i9", "--model", t("tiny-cross.json")),
                [t("tiny-cross.json"), "is_decoder is true"], t("i9")),
            Row("a flag that is no boolean", pre("i10", "--model", t("tiny-flag.json")),
                [t("tiny-flag.json"), "add_cross_attention is \"no\", not true or false"], t("i10")),
            Row("an untied decoder asked of a new model", pre("i11", "--model", t("tiny-untied.json")),
                [t("tiny-untied.json"), "tie_word_embeddings is false", "ties its MLM decoder"], t("i11")),
            Row("predict: alignment gaps in a FASTA", predict("clf", "gaps.fa", "p4.tsv"),
                [t("gaps.fa"), "record 'a': '-' at position 11 is not a base (A, C, G, T, N or another IUPAC code, any case): "
                 "alignment gaps and stops are not sequence"], t("p4.tsv")),
            Row("predict: RNA (U) in a FASTA", predict("clf", "rna.fa", "p8.tsv"),
                [t("rna.fa"), "record 'a': 'U' at position 4 is not a base (A, C, G, T, N or another IUPAC code, any case)"],
                t("p8.tsv")),
            Row("predict: a FASTA of N only", predict("clf", "alln.fa", "p5.tsv"),
                [t("alln.fa"), "none of its 2 records has an A, C, G or T"], t("p5.tsv")),
            Row("finetune --config beside a pretrained model", ft("hf", "f2", "--config", "dnabert"),
                ["--config", "applies to --model random only"], t("f2"), usage=True),
            Row("variants: the variant beyond the 510 6-mers read",
                ["variants", "--model", t("clf"), "--variants", t("far.vcf"), "--genome", t("g.fa"), "--flank", "600",
                 "--out", t("v1"), *FAST],
                [t("far.vcf") + ":3 (rs9): the variant lies beyond the first 510 6-mers of its 1201-base window",
                 "--flank 257"], t("v1")),
        ])
        # What still works: a checkpoint of the half run named explicitly, a window the model
        # reads whole, and a run from --init names the model it trained; the encoder of a model
        # with its own decoder (embed reads no decoder); a key near a BERT key that is there; a
        # label2id beside an edited id2label that names none of its classes (transformers'
        # default LABEL_k); a variant whose 6-mers all hold an N (the same tokens, said).
        run(ft(os.path.join("run-half", "checkpoints", "step-00000004"), "f3"))
        run(["embed", "--model", untied, "--input", t("test.csv"), "--out", t("e2.h5"), *FAST])
        run(["embed", "--model", t("hf-near"), "--input", t("test.csv"), "--out", t("e3.h5"), *FAST])
        run(["embed", "--model", t("hf-not-decoder"), "--input", t("test.csv"), "--out", t("e5.h5"), *FAST])
        # U is refused for what it is, not as an alignment gap.
        p = run(predict("clf", "rna.fa", "p8.tsv"), check=False)
        self.assertNotIn("alignment gaps", p.stderr)
        edited("clf", "clf-default-l2i", label2id={"LABEL_0": 0, "LABEL_1": 1})
        run(predict("clf-default-l2i", "test.csv", "p7.tsv"))
        left, right = "ACGTTGCA" * 8 + "N", "N" + "TTGCAACG" * 8
        with open(t("n.tsv"), "w") as f:
            f.write(f"id\tref_sequence\talt_sequence\nsnv_between_N\t{left}A{right}\t{left}C{right}\n"
                    f"plain\t{left[:-1]}GA{right[1:]}\t{left[:-1]}GC{right[1:]}\n")
        s = summary(run(["variants", "--model", t("clf"), "--variants", t("n.tsv"), "--out", t("v3"), *FAST]))
        self.assertEqual(s["same_tokens"], 1, s)
        s = summary(run(["variants", "--model", t("clf"), "--variants", t("far.vcf"), "--genome", t("g.fa"),
                         "--flank", "257", "--out", t("v2"), *FAST]))
        self.assertEqual(s["truncated"], 0, s)
        s = summary(run(pre("i7", "--init", t("hf"))))
        self.assertEqual(s["model"], t("hf"), s)
        self.assertEqual(json.load(open(t("i7", "checkpoints", "step-00000001", "state.json")))["model"],
                         t("hf"))
        # A resume of a finished run runs no step and says where the run is.
        again = self.copy("run", "run-again")
        s = summary(run(self.pretrain(again, "--resume")))
        self.assertEqual((s["steps_done"], os.path.basename(s["checkpoint"])), (4, "step-00000004"), s)


if __name__ == "__main__":
    unittest.main()
