#!/usr/bin/env python3
"""Writes the system refuses (a full disk, an I/O error) in the files that are appended to,
rewritten in place, or printed: the pretrain log, a sweep's results and stale records, the
standard output, a sweep's jobs, and an output published beside a directory. Each must stop
the command with one line naming the file and the reason, leave nothing half-written where a
later command would read it as whole, and let a rerun finish. The fault comes from
tests/tools/fault_io.c (LD_PRELOAD; GENEMASK_FAULT_IO names it): writes to paths containing
FAULT_PATH fail with FAULT_ERRNO after FAULT_AFTER bytes."""
import json
import os
import random
import shutil
import subprocess
import tempfile
import unittest

from test_cli import BIN, ENV, run, summary
from test_corpus import write_genome
from test_pretrain import TINY

SHIM = os.environ.get("GENEMASK_FAULT_IO", "")
ENOSPC, EIO = 28, 5
TABLE = "sequence,label\n" + "".join(f"{s},{i % 2}\n" for i, s in enumerate(
    "".join(random.Random(i).choices("ACGT", k=40)) for i in range(24)))


def faulty(path, errno=ENOSPC, after=0, nfail=None, op=None, content=None):
    env = {"LD_PRELOAD": SHIM, "FAULT_PATH": path, "FAULT_ERRNO": str(errno), "FAULT_AFTER": str(after)}
    if content is not None:
        env["FAULT_CONTENT"] = content
    if nfail is not None:
        env["FAULT_NFAIL"] = str(nfail)
    if op is not None:
        env["FAULT_OP"] = op
    return env


def records(path):
    with open(path) as f:
        return [json.loads(l) for l in f]


class WriteFaults(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not os.path.isfile(SHIM):
            raise RuntimeError(f"GENEMASK_FAULT_IO={SHIM!r} is not the built fault library (tests/tools/fault_io.c)")
        cls.tmp = tempfile.mkdtemp(prefix="genemask-write-faults-")
        cls.fa = os.path.join(cls.tmp, "g.fa")
        write_genome(cls.fa, random.Random(5), records=2, length=(30000, 40000))
        for name in ["train.csv", "test.csv"]:
            with open(os.path.join(cls.tmp, name), "w") as f:
                f.write(TABLE)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def fails(self, args, env, ranks=None):
        p = run(args, ranks=ranks, check=False, env=env)
        self.assertEqual(p.returncode, 1, p.stderr)
        errors = [l for l in p.stderr.splitlines() if "error:" in l]
        self.assertEqual(len(errors), 1, p.stderr)
        return errors[0]

    # ---- pretrain's log ------------------------------------------------------------------
    def test_a_refused_log_write_stops_pretrain_and_resume_completes_the_log(self):
        shards = os.path.join(self.tmp, "shards")
        run(["shards", "--genome", self.fa, "--out", shards, "--max-tokens", "60", "--min-tokens", "20"])
        cfg = os.path.join(self.tmp, "tiny.json")
        with open(cfg, "w") as f:
            json.dump(TINY, f)

        def pretrain(out, env=None, extra=()):
            args = ["pretrain", "--shards", shards, "--model", cfg, "--out", out, "--masking", "random", "--steps", "8",
                    "--warmup", "2", "--batch-per-rank", "2", "--grad-accum", "1", "--log-every", "1",
                    "--eval-every", "0", "--checkpoint-every", "4", "--threads", "1"] + list(extra)
            return run(args, check=env is None, env=env)

        ref = os.path.join(self.tmp, "ref")
        pretrain(ref)
        with open(os.path.join(ref, "metrics.jsonl"), "rb") as f:
            lines = f.read().splitlines(keepends=True)
        self.assertEqual([json.loads(l)["step"] for l in lines], list(range(1, 9)))
        for errno, reason in [(EIO, "Input/output error"), (ENOSPC, "No space left on device (the disk is full)")]:
            with self.subTest(errno=errno):
                out = os.path.join(self.tmp, f"run{errno}")
                # The 6th line is cut short: steps 1-5 were logged, step 4 was checkpointed.
                after = sum(len(l) for l in lines[:5]) + 10
                line = self.fails(["pretrain", "--shards", shards, "--model", cfg, "--out", out, "--masking", "random",
                                   "--steps", "8", "--warmup", "2", "--batch-per-rank", "2", "--grad-accum", "1",
                                   "--log-every", "1", "--eval-every", "0", "--checkpoint-every", "4", "--threads",
                                   "1"], faulty("metrics.jsonl", errno, after))
                self.assertIn(f"cannot append to {out}/metrics.jsonl: {reason}", line)
                self.assertEqual([n for n in sorted(os.listdir(os.path.join(out, "checkpoints"))) if n.startswith("step")],
                                 ["step-00000004"])
                s = summary(pretrain(out, extra=["--resume"]))
                self.assertEqual(s["steps_done"], 8)
                got = records(os.path.join(out, "metrics.jsonl"))
                self.assertEqual([j["step"] for j in got], list(range(1, 9)))  # each step once, the torn one gone
                want = [json.loads(l) for l in lines]
                self.assertEqual([j["loss"] for j in got[:4]], [j["loss"] for j in want[:4]])

    def test_another_ranks_refused_checkpoint_write_leaves_no_unfinished_step(self):
        """At 2 ranks, rank 1's random state for checkpoint step 4 cannot be written: every rank
        stops with rank 1's reason, and rank 0 removes step-00000004.tmp first (before, it
        waited in the checkpoint's barrier until mpirun killed it, and the unnamed step, a whole
        model's space, stayed until the next run); the earlier checkpoint is kept."""
        shards = os.path.join(self.tmp, "shards-ckpt")
        run(["shards", "--genome", self.fa, "--out", shards, "--max-tokens", "60", "--min-tokens", "20"])
        cfg = os.path.join(self.tmp, "tiny-ckpt.json")
        with open(cfg, "w") as f:
            json.dump(TINY, f)
        for attempt in range(3):
            out = os.path.join(self.tmp, f"ckpt{attempt}")
            p = run(["pretrain", "--shards", shards, "--model", cfg, "--out", out, "--masking", "random", "--steps", "6",
                     "--warmup", "2", "--batch-per-rank", "2", "--grad-accum", "1", "--log-every", "1",
                     "--eval-every", "0", "--checkpoint-every", "2", "--threads", "1"],
                    ranks=2, check=False, env=faulty("step-00000004.tmp/rng-rank00001", ENOSPC))
            self.assertEqual(p.returncode, 1, p.stderr)
            errors = [l for l in p.stderr.splitlines() if "error:" in l]
            self.assertTrue(errors, p.stderr)
            for line in errors:  # whichever rank's line is printed says why
                self.assertIn("rng-rank00001", line)
                self.assertIn("No space left on device (the disk is full)", line)
            self.assertEqual(sorted(os.listdir(os.path.join(out, "checkpoints"))),
                             [".genemask-readers.lock", "step-00000002"], (attempt, p.stderr))

    # ---- the standard output ---------------------------------------------------------------
    def test_a_summary_or_table_cut_short_on_stdout_fails_the_command(self):
        out = os.path.join(self.tmp, "stdout")
        os.makedirs(out)
        # A summary line into a full device.
        with open("/dev/full", "w") as full:
            p = subprocess.run([BIN, "count", "--genome", self.fa, "--out", f"{out}/c.h5", "--kmax", "6", "--quiet"],
                               stdout=full, stderr=subprocess.PIPE, text=True, env=ENV)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("error: cannot write the standard output (/dev/full): No space left on device (the disk is full)",
                      p.stderr)
        # motifs' table redirected to a file on a disk that fills after 500 bytes (as jobs/npmi.sbatch saves it).
        run(["npmi", "--counts", f"{out}/c.h5", "--out", f"{out}/npmi.tsv", "--k", "6", "--min-count", "2"])
        table = os.path.join(out, "motifs.md")
        args = [BIN, "motifs", "--npmi", f"{out}/npmi.tsv", "nTATAAAr", "ksCTGGGm", "--top", "0", "--format", "markdown"]
        with open(table, "w") as f:
            p = subprocess.run(args, stdout=f, stderr=subprocess.PIPE, text=True,
                               env=dict(ENV, **faulty("motifs.md", ENOSPC, 500)))
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn(f"cannot write the standard output ({table}): No space left on device (the disk is full)", p.stderr)
        with open(table, "w") as f:  # the same command with room: the whole table, bigger than what got through
            p = subprocess.run(args, stdout=f, stderr=subprocess.PIPE, text=True, env=ENV)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertGreater(os.path.getsize(table), 500)
        # Without a standard output at all (closed), nothing is lost: not an error.
        p = subprocess.run([BIN, "count", "--genome", self.fa, "--out", f"{out}/c2.h5", "--kmax", "4", "--quiet"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=ENV,
                           preexec_fn=lambda: os.close(1))
        self.assertEqual(p.returncode, 0, p.stderr)

    # ---- sweeps ------------------------------------------------------------------------------
    def plan(self, name, seeds, lr=None):
        plan = {"models": [{"name": "m", "path": "random", "config": "logo"}],
                "tasks": [{"name": "t", "train": "train.csv", "test": "test.csv"}], "shots": [4], "seeds": seeds}
        if lr is not None:
            plan["finetune"] = {"lr": lr}
        path = os.path.join(self.tmp, name)
        with open(path, "w") as f:
            json.dump(plan, f)
        return path

    def sweep(self, plan, out, env=None, ranks=None, extra=()):
        args = ["sweep", "--plan", plan, "--out", out, "--progress-every", "0", "--simulate", "0"] + list(extra)
        return run(args, ranks=ranks, check=env is None, env=env)

    def test_a_full_disk_stops_the_sweep_without_recording_its_jobs_as_failed(self):
        plan = self.plan("plan-disk.json", 4)
        for ranks in (None, 2):
            with self.subTest(ranks=ranks):
                out = os.path.join(self.tmp, f"sweep-disk-{ranks}")
                self.sweep(self.plan("plan-disk1.json", 1), out)  # one job done before
                line = self.fails(["sweep", "--plan", plan, "--out", out, "--progress-every", "0", "--simulate", "0"],
                                  faulty("metrics.json", ENOSPC), ranks=ranks)
                self.assertRegex(line, r"error: sweep stopped: job m\|t\|4\|\d+ on rank \d+ \(\S+\) could not write its "
                                       r"output: cannot write \S+/runs/m__t__4__\d+/metrics\.json\.tmp\.\S+: No space left "
                                       r"on device \(the disk is full\); no new jobs were handed out and 3 job\(s\) did "
                                       r"not run")
                recs = records(os.path.join(out, "results.jsonl"))
                self.assertEqual([r["status"] for r in recs], ["ok"])  # nothing recorded as failed
                s = summary(self.sweep(plan, out, ranks=ranks))
                self.assertEqual((s["jobs_skipped"], s["ok"], s["failed"], s["disk_error"]), (1, 3, 0, None), s)
                self.assertEqual(sorted(r["seed"] for r in records(os.path.join(out, "results.jsonl"))), [1, 2, 3, 4])

    def test_a_refused_repair_of_the_last_line_changes_nothing(self):
        out = os.path.join(self.tmp, "sweep-newline")
        self.sweep(self.plan("plan-nl2.json", 2), out)
        path = os.path.join(out, "results.jsonl")
        with open(path, "rb") as f:
            text = f.read()
        with open(path, "wb") as f:  # a whole last record without its line end
            f.write(text[:-1])
        line = self.fails(["sweep", "--plan", self.plan("plan-nl3.json", 3), "--out", out, "--progress-every", "0",
                           "--simulate", "0"], faulty("results.jsonl", ENOSPC, nfail=1))
        self.assertIn(f"cannot append to {path}: No space left on device (the disk is full)", line)
        with open(path, "rb") as f:
            self.assertEqual(f.read(), text[:-1])  # no record glued to the next
        s = summary(self.sweep(self.plan("plan-nl3.json", 3), out))
        self.assertEqual((s["jobs_skipped"], s["ok"]), (2, 1), s)
        self.assertEqual(sorted(r["seed"] for r in records(path)), [1, 2, 3])

    def test_a_refused_write_of_the_stale_records_leaves_both_files_as_they_were(self):
        out = os.path.join(self.tmp, "sweep-stale")
        self.sweep(self.plan("plan-st.json", 2), out)
        path, stale = os.path.join(out, "results.jsonl"), os.path.join(out, "results.stale.jsonl")
        with open(path, "rb") as f:
            before = f.read()
        changed = self.plan("plan-st-lr.json", 2, lr=1e-4)  # every record becomes stale
        line = self.fails(["sweep", "--plan", changed, "--out", out, "--progress-every", "0", "--simulate", "0",
                           "--force"], faulty("results.stale.jsonl", ENOSPC, after=100))
        self.assertRegex(line, r"cannot write \S+results\.stale\.jsonl\.tmp\.\S+: No space left on device \(the disk "
                               r"is full\)")
        with open(path, "rb") as f:
            self.assertEqual(f.read(), before)
        self.assertFalse(os.path.exists(stale))
        self.assertEqual([n for n in os.listdir(out) if ".tmp." in n], [])
        s = summary(self.sweep(changed, out, extra=["--force"]))
        self.assertEqual((s["stale_records"], s["ok"]), (2, 2), s)
        self.assertEqual(len(records(stale)), 2)  # moved once
        self.assertEqual(records(stale), [json.loads(l) for l in before.splitlines()])

    # ---- overlap --filtered ----------------------------------------------------------------
    def test_overlap_publishes_no_filtered_table_when_its_out_fails(self):
        d = os.path.join(self.tmp, "overlap")
        os.makedirs(d)
        train, test = os.path.join(self.tmp, "train.csv"), os.path.join(self.tmp, "test.csv")
        args = ["overlap", "--test", test, "--train", train, "--k", "6", "--out", f"{d}/ov", "--drop-above", "0.5",
                "--filtered", f"{d}/filtered.csv"]
        line = self.fails(args, faulty("overlap.tsv", ENOSPC))
        self.assertIn("No space left on device (the disk is full)", line)
        self.assertEqual(os.listdir(d), [])
        run(args)
        self.assertEqual(sorted(os.listdir(d)), ["filtered.csv", "ov"])


    # ---- count --genomes: counts.h5 written on disk by HDF5 -----------------------------------
    def test_a_refused_write_of_a_genome_list_count_exits_1_with_its_reason(self):
        """counts.h5 of a genome list is written by HDF5 straight to disk: a write refused midway
        (a disk filling, a quota) or a close that reports a deferred error (NFS) ends the command
        with exit 1 and the reason, not a crash in HDF5's cleanup at exit (exit 139 before), and
        leaves nothing; the rerun writes the file."""
        d = os.path.join(self.tmp, "genomes")
        os.makedirs(d)
        for name, seed in (("a", 1), ("b", 2)):
            write_genome(os.path.join(d, f"{name}.fa"), random.Random(seed), records=2, length=(3000, 5000))
        with open(os.path.join(d, "genomes.tsv"), "w") as f:
            f.write("a\ta.fa\nb\tb.fa\n")
        out = os.path.join(d, "out")
        os.makedirs(out)
        args = ["count", "--genomes", os.path.join(d, "genomes.tsv"), "--out", f"{out}/counts.h5", "--kmax", "8",
                "--quiet"]
        for env, reason in [(faulty("counts.h5", ENOSPC, after=100000), "No space left on device (the disk is full)"),
                            (faulty("counts.h5", EIO, op="close"), "cannot write the file (closing it): "
                                                                   "Input/output error")]:
            line = self.fails(args, env)
            self.assertIn(reason, line)
            self.assertEqual(os.listdir(out), [])
        run(args)
        self.assertEqual(os.listdir(out), ["counts.h5"])


    # ---- shards at 2 ranks: rank 0's error comes first --------------------------------------
    def test_rank_0s_disk_error_is_said_before_the_other_ranks_lose_the_staging_directory(self):
        """Rank 0 owns the staging directory every rank writes its shards into; when rank 0's
        write is refused, its line (the reason) is written before the staging directory goes
        (rank 1 then meets "No such file or directory" there), so the job's abort can no longer
        end rank 0 first: before, rank 1's line came alone in some runs. Repeated: it was a
        race. (mpirun forwards each rank's stderr on its own, so the order of the two lines
        in its output is not the order they were written.)"""
        d = os.path.join(self.tmp, "shards2")
        os.makedirs(d)
        args = ["shards", "--genome", self.fa, "--out", f"{d}/sh", "--shard-tokens", "2000", "--quiet"]
        for attempt in range(8):
            p = run(args, ranks=2, check=False, env=faulty("train-r00000", ENOSPC))
            self.assertEqual(p.returncode, 1, p.stderr)
            rank0 = [l for l in p.stderr.splitlines() if l.startswith("genemask[rank 0]: error:")]
            self.assertEqual(len(rank0), 1, (attempt, p.stderr))
            self.assertIn("No space left on device (the disk is full)", rank0[0])
            self.assertEqual(os.listdir(d), [], attempt)


    # ---- finetune's two outputs --------------------------------------------------------------
    def test_finetune_leaves_no_complete_output_when_its_out_fails_last(self):
        """--save-model and --out are moved into place (marked incomplete) before either says
        complete; when --out's final marker is refused, the model's is withdrawn: a failed
        command leaves no complete output, and its rerun needs no --force (before, the model
        stayed complete and the rerun was refused)."""
        d = os.path.join(self.tmp, "finetune")
        os.makedirs(d)
        model = os.path.join(self.tmp, "tiny-model.json")
        with open(model, "w") as f:
            json.dump(TINY, f)
        args = ["finetune", "--model", "random", "--config", model, "--train", os.path.join(self.tmp, "train.csv"),
                "--test", os.path.join(self.tmp, "test.csv"), "--out", f"{d}/ft", "--save-model", f"{d}/clf",
                "--epochs", "1", "--threads", "1", "--precision", "fp32"]
        line = self.fails(args, faulty("ft/.genemask.json", ENOSPC, content='"complete": true'))
        self.assertIn("No space left on device (the disk is full)", line)
        self.assertFalse(os.path.exists(f"{d}/ft"), os.listdir(d))  # a directory it made: removed
        with open(f"{d}/clf/.genemask.json") as f:
            self.assertFalse(json.load(f)["complete"])  # readers refuse it
        p = run(args)  # no --force
        self.assertIn("was never completed; it is replaced", p.stderr)
        for out in ("ft", "clf"):
            with open(f"{d}/{out}/.genemask.json") as f:
                self.assertTrue(json.load(f)["complete"], out)


if __name__ == "__main__":
    unittest.main()
