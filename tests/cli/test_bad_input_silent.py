#!/usr/bin/env python3
"""The third hostile-input campaign (issue 31): nothing silent, nothing left behind.

Each case of the campaign is a row or a test here, checked against what must hold, not
against the text genemask happens to print:
- data loss: a file output that exists is replaced only when it is the command's own
  earlier output, or with --force; nothing is written inside a directory genemask manages
  (the bytes of every user file are compared afterwards);
- silent results: a truncated BGZF, a manifest that lists a shard twice, a sweep continued
  on changed inputs, labels with separators, the peak memory, a changed checkpoint, NaN
  options, unmeasured losses, a changed --resume, a FIFO: each refused, or the number
  corrected and compared with an independent measurement;
- left behind: a signal leaves the disk as it was; a reader of a rotating run never fails.
The error rows reuse test_bad_input's check (one "genemask: error:" line naming the file,
exit 1, no output or temporary left behind, the kept files' bytes unchanged)."""
import csv
import fcntl
import gzip
import json
import os
import random
import re
import resource
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
import unittest

import h5py
import numpy as np

import test_bad_input as tb
from test_cli import BIN, ENV, mpiexec, run, summary
from test_corpus import write_genome

FAST = tb.FAST
Row = tb.Row
digest = tb.digest


def bgzf_blocks(data):
    """The (offset, size) of every BGZF block of `data` (BSIZE at bytes 16-17 of each header)."""
    out, off = [], 0
    while off < len(data):
        assert data[off:off + 4] == b"\x1f\x8b\x08\x04", off
        size = struct.unpack("<H", data[off + 16:off + 18])[0] + 1
        out.append((off, size))
        off += size
    return out


def count_bases(path):
    """A, C, G and T bases of a FASTA (upper-cased), the reference for bases_read."""
    n = 0
    with open(path) as f:
        for line in f:
            if not line.startswith(">"):
                s = line.strip().upper()
                n += sum(s.count(c) for c in "ACGT")
    return n


def metrics_lines(run_dir):
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        return [json.loads(l) for l in f if l.strip()]


class Silent(unittest.TestCase):
    check_row = tb.BadInput.check_row
    check_table = tb.BadInput.check_table
    leftovers = tb.BadInput.leftovers

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="genemask-silent-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, ignore_errors=True)
        t = cls.t
        rng = random.Random(31)
        cls.fa = t("g.fa")
        cls.seqs = write_genome(cls.fa, rng, records=3, length=(30000, 40000))
        run(["count", "--genome", cls.fa, "--out", t("counts.h5"), "--quiet"])
        run(["npmi", "--counts", t("counts.h5"), "--out", t("npmi.tsv")])
        run(["shards", "--genome", cls.fa, "--out", t("shards"), "--max-tokens", "60", "--min-tokens", "20"])
        with open(t("tiny.json"), "w") as f:
            json.dump(tb.TINY, f)
        cls.tiny_pretrain = ["--model", t("tiny.json"), "--masking", "random", "--warmup", "1", "--batch-per-rank", "2",
                             "--grad-accum", "1", "--eval-every", "0", "--precision", "fp32", *FAST]
        run(["pretrain", "--shards", t("shards"), "--out", t("run"), "--steps", "2", *cls.tiny_pretrain])
        run(["export-hf", "--run", t("run"), "--out", t("hf")])
        tb.make_classifier(t, rng)
        cls.checkpoint = os.path.join(t("run"), "checkpoints", sorted(os.listdir(t("run", "checkpoints")))[-1])

    @classmethod
    def t(cls, *names):
        return os.path.join(cls.tmp, *names)

    # ---- 1. data loss: single-file outputs ---------------------------------------------

    def test_two_writers_of_one_file_never_replace_each_other(self):
        # count held its finished output while npmi wrote the same name: count's rename replaced
        # npmi's table, and both exited 0. Now the later rename is refused and the file is npmi's.
        t = self.t
        out = t("race.out")
        env = dict(ENV, GENEMASK_TEST_HOLD_TEMP="3", GENEMASK_TEST_HOLD_TEMP_MATCH="race.out")
        count = subprocess.Popen([BIN, "count", "--genome", self.fa, "--out", out, "--kmax", "6", "--quiet"], env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.time() + 60
        while not [n for n in os.listdir(self.tmp) if n.startswith("race.out.tmp.")] and time.time() < deadline:
            time.sleep(0.05)
        run(["npmi", "--counts", t("counts.h5"), "--out", out])
        stdout, stderr = count.communicate(timeout=60)
        self.assertEqual(count.returncode, 1, stderr)
        self.assertIn(f"{out} appeared while this command ran: another command wrote it", stderr)
        self.assertEqual(stdout, "")  # no summary: nothing was published
        with open(out) as f:
            self.assertTrue(f.readline().startswith("rank\tkmer\t"))  # npmi's table, whole
        self.assertEqual([n for n in os.listdir(self.tmp) if n.startswith("race.out.")], [])

    def test_file_outputs_replace_only_their_own_earlier_output(self):
        t = self.t
        shutil.copy(self.fa, t("other_genome.fa"))
        shutil.copytree(t("shards"), t("own-shards"))
        shutil.copytree(t("run"), t("own-run"))
        os.symlink(t("train.csv"), t("train-link.csv"))
        ckpt = os.path.join(t("own-run"), "checkpoints", os.path.basename(self.checkpoint))
        with h5py.File(t("user.h5"), "w") as h:
            h["x"] = np.arange(4)
        with open(t("user.tsv"), "w") as f:
            f.write("id\tvalue\nx\t1\n")
        with open(t("user.txt"), "w") as f:
            f.write("my notes\n")
        self.check_table([
            Row("count --out a FASTA", ["count", "--genome", self.fa, "--out", t("other_genome.fa"), "--quiet"],
                ["--out " + t("other_genome.fa"), "is not an earlier output of `genemask count`", "--force"],
                keep=[t("other_genome.fa")]),
            Row("count --out a user's HDF5 file", ["count", "--genome", self.fa, "--out", t("user.h5"), "--quiet"],
                ["--out " + t("user.h5"), "a genemask counts file", "--force"], keep=[t("user.h5")]),
            Row("npmi --out a shard set's manifest", ["npmi", "--counts", t("counts.h5"), "--out",
                                                      t("own-shards", "manifest.json"), "--force"],
                ["lies inside " + t("own-shards"), "`genemask shards`", "--force or not"], keep=[t("own-shards")]),
            Row("vocab --out a checkpoint's weights", ["vocab", "--out", os.path.join(ckpt, "model.safetensors"),
                                                        "--force"],
                ["lies inside " + ckpt, "checkpoint", "--force or not"], keep=[t("own-run")]),
            Row("pmi-vocab --out a file in a run", ["pmi-vocab", "--counts", t("counts.h5"), "--out",
                                                    t("own-run", "vocab.tsv")],
                ["lies inside " + t("own-run"), "`genemask pretrain`"], keep=[t("own-run")]),
            Row("export-hf --out a directory inside a shard set", ["export-hf", "--run", t("run"), "--out",
                                                                    t("own-shards", "export")],
                ["lies inside " + t("own-shards")], keep=[t("own-shards")]),
            Row("embed --out a user's HDF5 file", ["embed", "--model", t("hf"), "--input", t("test.csv"), "--out",
                                                   t("user.h5"), *FAST],
                ["--out " + t("user.h5"), "a genemask embeddings file"], keep=[t("user.h5")]),
            Row("predict --out a user's table", ["predict", "--model", t("clf"), "--input", t("test.csv"), "--out",
                                                 t("user.tsv"), *FAST],
                ["--out " + t("user.tsv"), "`genemask predict`", "--force"], keep=[t("user.tsv")]),
            Row("npmi --out a text file", ["npmi", "--counts", t("counts.h5"), "--out", t("user.txt")],
                ["--out " + t("user.txt"), "an npmi.tsv"], keep=[t("user.txt")]),
            Row("overlap --train given twice, by a link", ["overlap", "--test", t("test.csv"), "--train", t("train.csv"),
                                                           "--train", t("train-link.csv"), "--out", t("ov2")],
                ["--train " + t("train-link.csv") + " is the same file as --train " + t("train.csv"),
                 "give each training table once"], t("ov2")),
            Row("overlap --filtered an existing table", ["overlap", "--test", t("test.csv"), "--train", t("train.csv"),
                                                         "--out", t("ov1"), "--drop-above", "0.5", "--filtered",
                                                         t("user.tsv")],
                ["--filtered " + t("user.tsv"), "--force"], t("ov1"), keep=[t("user.tsv")]),
            Row("pretrain --dump-first-batch over a user file",
                ["pretrain", "--shards", t("shards"), "--out", t("run-dump"), "--steps", "1", *self.tiny_pretrain,
                 "--dump-first-batch", t("user.txt")],
                ["--dump-first-batch " + t("user.txt"), "remove it yourself"], t("run-dump"), keep=[t("user.txt")]),
        ])

    def test_own_earlier_outputs_and_force_replace(self):
        t = self.t
        # An earlier output of the same command is replaced without --force, with the same bytes.
        for argv, out in [(["count", "--genome", self.fa, "--quiet"], "rep-counts.h5"),
                          (["npmi", "--counts", t("counts.h5")], "rep-npmi.tsv"),
                          (["vocab"], "rep-vocab.txt"),
                          (["embed", "--model", t("hf"), "--input", t("test.csv"), *FAST], "rep-emb.h5"),
                          (["predict", "--model", t("clf"), "--input", t("test.csv"), *FAST], "rep-pred.tsv")]:
            with self.subTest(argv[0]):
                run(argv + ["--out", t(out)])
                first = digest(t(out))
                run(argv + ["--out", t(out)])
                if argv[0] in ("count", "npmi", "vocab", "predict"):
                    self.assertEqual(digest(t(out)), first)
        # --force replaces a file that is not an earlier output; an embeddings file is not a
        # counts file, so count refuses it without --force.
        p = run(["count", "--genome", self.fa, "--out", t("rep-emb.h5"), "--quiet"], check=False)
        self.assertEqual(p.returncode, 1, p.stderr)
        run(["count", "--genome", self.fa, "--out", t("rep-emb.h5"), "--quiet", "--force"])
        with h5py.File(t("rep-emb.h5")) as h:
            self.assertEqual(h.attrs["format"], "genemask-counts")
        self.assertEqual(self.leftovers(), [])

    # ---- 2. truncated compressed genomes -----------------------------------------------

    def test_a_plain_fasta_cut_inside_a_line_is_said_and_listed(self):
        """A plain FASTA cut short (its last line without a line end) was counted, sharded and
        scored as whole without a word; now each reader says so once (rank 0) and its summary
        lists it, as for tables. A whole FASTA, and a gzip (whose end is checked), say nothing."""
        t = self.t
        data = open(self.fa, "rb").read()
        with open(t("cut-line.fa"), "wb") as f:
            f.write(data[:len(data) * 2 // 3].rstrip(b"\n"))
        cut = t("cut-line.fa")
        warning = f"genemask: warning: {cut}: the last line has no line end"
        for ranks in (None, 2):
            for argv in (["count", "--genome", cut, "--out", t(f"cut{ranks}.h5"), "--quiet"],
                         ["shards", "--genome", cut, "--out", t(f"cut-shards{ranks}")]):
                with self.subTest(ranks=ranks, command=argv[0]):
                    p = run(argv, ranks=ranks)
                    self.assertEqual(p.stderr.count(warning), 1, p.stderr)
                    self.assertIn("its last record may be partial", p.stderr)
                    self.assertEqual(summary(p)["unterminated_inputs"], [cut])
        with open(t("cut-list.tsv"), "w") as f:
            f.write(f"name\tpath\ncut\t{cut}\nwhole\t{self.fa}\n")
        p = run(["count", "--genomes", t("cut-list.tsv"), "--out", t("cut-list.h5"), "--quiet"], ranks=2)
        self.assertEqual((p.stderr.count(warning), summary(p)["unterminated_inputs"]), (1, [cut]))
        # The same cut in a FASTA of sequences to score.
        p = run(["embed", "--model", t("hf"), "--input", cut, "--out", t("cut-emb.h5"), "--threads", "1"])
        self.assertEqual(summary(p)["unterminated_inputs"], [cut])
        for whole in (self.fa, t("whole.fa.gz")):
            if whole.endswith(".gz"):
                with open(whole, "wb") as f:
                    f.write(gzip.compress(data.rstrip(b"\n")))  # whole, its last line unended: the gzip end says so
            p = run(["count", "--genome", whole, "--out", t("whole.h5"), "--quiet", "--force"])
            self.assertNotIn("no line end", p.stderr)
            self.assertNotIn("unterminated_inputs", summary(p))

    def test_a_truncated_bgzf_is_refused_by_every_reader(self):
        t = self.t
        with open(t("bg.fa.gz"), "wb") as f:
            subprocess.run(["bgzip", "-c", self.fa], stdout=f, check=True)
        data = open(t("bg.fa.gz"), "rb").read()
        blocks = bgzf_blocks(data)
        self.assertGreaterEqual(len(blocks), 3)  # two blocks of text (64 KiB each at most) and the EOF block
        self.assertEqual(data[-28:], bytes.fromhex("1f8b08040000000000ff0600424302001b0003000000000000000000"))
        cut = blocks[1][0]  # at a block boundary: the first block whole, the rest gone
        with open(t("cut.fa.gz"), "wb") as f:
            f.write(data[:cut])
        with open(t("noeof.fa.gz"), "wb") as f:
            f.write(data[:-28])  # every block whole, only the end-of-file block missing
        with open(t("appended.fa.gz"), "wb") as f:  # cat a.fa.bgz b.fa.gz: not cut, and no BGZF file
            f.write(data + gzip.compress(b">extra\nACGTACGTAC\n"))
        # The whole file counts every base (the reference for what a cut file would lose).
        whole = summary(run(["count", "--genome", t("bg.fa.gz"), "--out", t("bg.h5"), "--quiet"]))
        self.assertEqual(whole["acgt_bases"], count_bases(self.fa))
        rows = []
        appended = os.path.getsize(t("appended.fa.gz"))
        for name, size in [("cut.fa.gz", cut), ("noeof.fa.gz", len(data) - 28), ("appended.fa.gz", appended)]:
            expect = [t(name), "BGZF", "end-of-file block", "truncated", f"at byte {size}", "a gzip file appended",
                      "gzip -dc F | bgzip > F2"]
            rows += [Row(f"count {name}", ["count", "--genome", t(name), "--out", t("x.h5"), "--quiet"], expect, t("x.h5")),
                     Row(f"shards {name}", ["shards", "--genome", t(name), "--out", t("xs")], expect, t("xs"))]
        self.check_table(rows)
        # Every rank checks the end, whichever blocks it reads, before the ranks start: one line
        # from rank 0 (mpiexec adds its own words about the exit status).
        for ranks in (2, 4):
            for name in ("cut.fa.gz", "noeof.fa.gz"):
                for argv, out in [(["count", "--genome", t(name), "--out", t("m.h5"), "--quiet"], t("m.h5")),
                                  (["shards", "--genome", t(name), "--out", t("ms")], t("ms"))]:
                    with self.subTest(ranks=ranks, file=name, command=argv[0]):
                        p = subprocess.run(mpiexec(ranks) + [os.path.abspath(BIN)] + argv, env=ENV, capture_output=True,
                                           text=True, timeout=120)
                        self.assertNotEqual(p.returncode, 0)
                        lines = [l for l in p.stderr.splitlines() if l.startswith("genemask")]
                        self.assertEqual(len(lines), 1, p.stderr)
                        self.assertIn(f"genemask: error: {t(name)}: BGZF (bgzip) file without its end-of-file block",
                                      lines[0])
                        self.assertFalse(os.path.exists(out))
                        self.assertEqual(self.leftovers(), [])
        # A plain gzip member that ends early names the file and the byte.
        raw = gzip.compress(open(self.fa, "rb").read())
        with open(t("half.fa.gz"), "wb") as f:
            f.write(raw[:len(raw) // 2])
        self.check_row(Row("gzip cut", ["count", "--genome", t("half.fa.gz"), "--out", t("h.h5"), "--quiet"],
                           [t("half.fa.gz"), "truncated gzip stream", "byte"], t("h.h5")))

    # ---- 4. manifests -----------------------------------------------------------------

    def damaged_manifest(self, name, edit):
        d = self.t(name)
        shutil.copytree(self.t("shards"), d)
        with open(os.path.join(d, "manifest.json")) as f:
            m = json.load(f)
        edit(d, m)
        with open(os.path.join(d, "manifest.json"), "w") as f:
            json.dump(m, f, indent=2)
        return d

    def test_manifests_are_checked_wherever_read(self):
        t = self.t

        def twice(d, m):
            first = next(s for s in m["shards"] if s["split"] == "train")
            m["shards"].append(dict(first))

        def copied(d, m):  # the same shard again under another name: its samples twice
            first = next(s for s in m["shards"] if s["split"] == "train")
            shutil.copy(os.path.join(d, first["file"]), os.path.join(d, "copy.h5"))
            m["shards"].append(dict(first, file="copy.h5"))
            m["totals"]["train"]["samples"] += first["samples"]  # every count made to agree: the
            m["totals"]["train"]["tokens"] += first["tokens"]  # shards' own sample indices tell
            m["candidates"] += first["samples"]

        def linked(d, m):
            first = next(s for s in m["shards"] if s["split"] == "train")
            os.link(os.path.join(d, first["file"]), os.path.join(d, "link.h5"))
            m["shards"].append(dict(first, file="link.h5"))

        def totals(d, m):
            m["totals"]["train"]["samples"] += 7

        def nan_fraction(d, m):
            m["valid_fraction"] = None  # what json.dump writes for NaN in other tools

        def escape(d, m):
            m["shards"][0]["file"] = "../g.fa"

        cases = [("twice", twice, ["both list the shard", "listed once"]),
                 ("copied", copied, ["is in both", "copy.h5", "a sample is in one shard"]),
                 ("linked", linked, ["same file"]),
                 ("totals", totals, ["totals.train", "samples"]),
                 ("nan", nan_fraction, ["valid_fraction", "null", "not a number in [0, 1]"]),
                 ("escape", escape, ["shards[0].file", "not a file name"])]
        rows = []
        for name, edit, expect in cases:
            d = self.damaged_manifest(f"man-{name}", edit)
            rows.append(Row(f"mask-stats: {name}", ["mask-stats", "--shards", d, "--masking", "random"],
                            [d + "/manifest.json"] + expect, keep=[d]))
            rows.append(Row(f"pretrain --verify: {name}",
                            ["pretrain", "--shards", d, "--out", t(f"run-{name}"), "--steps", "1", "--verify",
                             *self.tiny_pretrain], [d + "/manifest.json"] + expect, t(f"run-{name}"), keep=[d]))
        self.check_table(rows)
        # Without a manifest edit, a shard copied over another (same name, other samples) is
        # caught by its SHA-256, which every reader now checks (no --verify needed).
        d = self.damaged_manifest("man-swapped", lambda d, m: None)
        with open(os.path.join(d, "manifest.json")) as f:
            m = json.load(f)
        train = [s for s in m["shards"] if s["split"] == "train"]
        valid = [s for s in m["shards"] if s["split"] == "valid"]
        shutil.copy(os.path.join(d, valid[0]["file"]), os.path.join(d, train[0]["file"]))
        self.check_row(Row("pretrain: a shard replaced", ["pretrain", "--shards", d, "--out", t("run-swapped"),
                                                          "--steps", "1", *self.tiny_pretrain],
                           [os.path.join(d, train[0]["file"]), "SHA-256 differs"], t("run-swapped"), keep=[d]))
        # The reference: mask-stats counts exactly the samples of the train shards.
        s = summary(run(["mask-stats", "--shards", t("shards"), "--masking", "random", "--samples", "100000"]))
        self.assertEqual(s["samples"], sum(x["samples"] for x in train))

    # ---- 5. labels with separators ------------------------------------------------------

    def test_labels_with_separators_come_back_whole(self):
        t = self.t
        rng = random.Random(5)
        labels = ["a,b", "c\td", 'say "hi"', "two\nlines"]
        with open(t("sep-train.csv"), "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["sequence", "label"])
            for i in range(24):
                w.writerow([tb.seq(rng, 80), labels[i % 4]])
        with open(t("sep-test.csv"), "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["sequence", "label"])
            for i in range(8):
                w.writerow([tb.seq(rng, 80), labels[i % 4]])
        run(["finetune", "--model", t("hf"), "--train", t("sep-train.csv"), "--test", t("sep-test.csv"), "--out",
             t("sep-ft"), "--epochs", "1", "--save-model", t("sep-clf"), *FAST])
        with open(t("sep-ft", "predictions.tsv"), newline="") as f:
            rows = list(csv.reader(f, delimiter="\t"))
        header, body = rows[0], rows[1:]
        self.assertEqual(len(body), 8)
        self.assertTrue(all(len(r) == len(header) for r in rows), rows)
        self.assertEqual([r[1] for r in body], [labels[i % 4] for i in range(8)])
        # predict names the classes in its header and its predictions: whole fields too.
        run(["predict", "--model", t("sep-clf"), "--input", t("sep-test.csv"), "--out", t("sep-pred.tsv"), *FAST])
        with open(t("sep-pred.tsv"), newline="") as f:
            rows = list(csv.reader(f, delimiter="\t"))
        self.assertEqual(sorted(h[len("prob_"):] for h in rows[0] if h.startswith("prob_")), sorted(labels))
        self.assertTrue(all(len(r) == len(rows[0]) for r in rows), rows)
        self.assertTrue(all(r[-1] in labels for r in rows[1:]))
        # A quote left open names the line where it opened.
        with open(t("open-quote.csv"), "w") as f:
            f.write('sequence,label\nACGTACGTAC,"open\nACGTACGTAC,1\n')
        self.check_row(Row("a quote never closed", ["finetune", "--model", t("hf"), "--train", t("open-quote.csv"),
                                                    "--test", t("sep-test.csv"), "--out", t("oq")],
                           [t("open-quote.csv") + ":2:", "never closed"], t("oq")))

    def test_test_sequences_seen_in_training_are_counted_and_said(self):
        """A fresh case of the class: metrics over a test table that holds training sequences
        (or is the training table) measure memory. finetune counts them by their tokens, so
        across the two table formats, writes test_in_train and says so."""
        t = self.t
        rng = random.Random(9)
        with open(t("train.csv")) as f:
            train = [line.strip().split(",") for line in f.readlines()[1:]]
        six = lambda s: " ".join(s[i:i + 6] for i in range(len(s) - 5))  # the released 6-mer layout
        with open(t("mixed-test.tsv"), "w") as f:
            f.write('"sequence"\t"label"\n')
            for s, label in [(tb.seq(rng, 80), str(i % 2)) for i in range(5)] + train[3:6]:
                f.write(f'"{six(s)}"\t{label}\n')
        p = run(["finetune", "--model", t("hf"), "--train", t("train.csv"), "--test", t("mixed-test.tsv"), "--out",
                 t("seen-ft"), "--epochs", "1", *FAST])
        self.assertEqual(summary(p)["test_in_train"], 3)
        self.assertIn(f"3 of the 8 test sequences ({t('mixed-test.tsv')}:7 the first) are also training sequences",
                      p.stderr)
        with open(t("seen-ft", "metrics.json")) as f:
            self.assertEqual(json.load(f)["test_in_train"], 3)
        p = run(["finetune", "--model", t("hf"), "--train", t("train.csv"), "--test", t("train.csv"), "--out",
                 t("same-ft"), "--epochs", "1", *FAST])
        self.assertEqual(summary(p)["test_in_train"], 20)
        self.assertIn("all of them: is --test the training table?", p.stderr)
        p = run(["finetune", "--model", t("hf"), "--train", t("train.csv"), "--test", t("test.csv"), "--out",
                 t("apart-ft"), "--epochs", "1", *FAST])
        self.assertEqual(summary(p)["test_in_train"], 0)
        self.assertNotIn("also training sequences", p.stderr)

    def test_repeated_test_sequences_are_counted_and_said(self):
        """A test table that holds one sequence twice scores it twice; under two labels it is a
        contradiction. finetune counts repeats by their tokens (so across the raw and the 6-mer
        layouts in one table), writes test_duplicates and says so; a table of distinct
        sequences writes 0 and says nothing."""
        t = self.t
        with open(t("test.csv")) as f:
            rows = [line.strip().split(",") for line in f.readlines()[1:]]
        six = lambda s: " ".join(s[i:i + 6] for i in range(len(s) - 5))
        flip = {"0": "1", "1": "0"}
        extra = [(six(rows[0][0]), rows[0][1]), (rows[1][0], rows[1][1]), (rows[1][0], flip[rows[1][1]])]
        with open(t("dup-test.tsv"), "w") as f:
            f.write("sequence\tlabel\n")
            for s, label in [(s, label) for s, label in rows] + extra:
                f.write(f"{s}\t{label}\n")
        n = len(rows) + 3
        p = run(["finetune", "--model", t("hf"), "--train", t("train.csv"), "--test", t("dup-test.tsv"), "--out",
                 t("dup-ft"), "--epochs", "1", *FAST])
        self.assertEqual(summary(p)["test_duplicates"], 3)
        self.assertEqual(summary(p)["n_test"], n)
        self.assertIn(f"3 of the {n} test sequences ({t('dup-test.tsv')}:{len(rows) + 2} the first) repeat an earlier "
                      "test sequence, 1 of them under another label", p.stderr)
        with open(t("dup-ft", "metrics.json")) as f:
            self.assertEqual(json.load(f)["test_duplicates"], 3)
        p = run(["finetune", "--model", t("hf"), "--train", t("train.csv"), "--test", t("test.csv"), "--out",
                 t("nodup-ft"), "--epochs", "1", *FAST])
        self.assertEqual(summary(p)["test_duplicates"], 0)
        self.assertNotIn("repeat an earlier", p.stderr)
        # A training sequence under two labels (learnt both ways) is said too.
        with open(t("train.csv")) as f:
            lines = f.read().splitlines()
        seq, label = lines[1].split(",")
        with open(t("conflict-train.csv"), "w") as f:
            f.write("\n".join(lines + [f"{seq},{flip[label]}"]) + "\n")
        p = run(["finetune", "--model", t("hf"), "--train", t("conflict-train.csv"), "--test", t("test.csv"), "--out",
                 t("conflict-ft"), "--epochs", "1", *FAST])
        self.assertIn(f"1 training sequence(s) ({t('conflict-train.csv')}:{len(lines) + 1} the first) repeat an earlier "
                      "training sequence under another label", p.stderr)

    # ---- 6. peak memory -----------------------------------------------------------------

    def test_peak_rss_is_the_process_peak(self):
        t = self.t
        for extra in ([], ["--presence15"]):
            with self.subTest(extra=extra):
                p = subprocess.Popen([os.path.abspath(BIN), "count", "--genome", self.fa, "--out", t("rss.h5"),
                                      "--quiet", *extra], env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                out, err = p.stdout.read(), p.stderr.read()
                _, status, usage = os.wait4(p.pid, 0)  # the child's own peak, as /usr/bin/time -v reports it
                p.returncode = os.waitstatus_to_exitcode(status)
                p.stdout.close()
                p.stderr.close()
                self.assertEqual(p.returncode, 0, err)
                reported = json.loads(out.decode().strip().splitlines()[-1])["peak_rss_mib"]
                measured = usage.ru_maxrss / 1024  # KiB -> MiB
                self.assertLessEqual(reported, measured + 0.5)
                self.assertGreaterEqual(reported, 0.97 * measured, f"reported {reported} MiB, measured {measured} MiB")

    # ---- 7. checkpoints are checked by every reader --------------------------------------

    def test_every_reader_checks_a_checkpoint(self):
        t = self.t
        run(["pretrain", "--shards", t("shards"), "--out", t("other-run"), "--steps", "2", "--seed", "7",
             *self.tiny_pretrain])
        shutil.copytree(t("run"), t("swapped-run"))
        ck = os.path.join(t("swapped-run"), "checkpoints", os.path.basename(self.checkpoint))
        other = os.path.join(t("other-run"), "checkpoints", sorted(os.listdir(t("other-run", "checkpoints")))[-1])
        shutil.copy(os.path.join(other, "model.safetensors"), os.path.join(ck, "model.safetensors"))
        expect = [os.path.join(ck, "model.safetensors"), "state.json records", "SHA-256"]
        self.check_table([
            Row("export-hf a run", ["export-hf", "--run", t("swapped-run"), "--out", t("sw-hf")], expect, t("sw-hf"),
                keep=[t("swapped-run")]),
            Row("export-hf the checkpoint", ["export-hf", "--run", ck, "--out", t("sw-hf")], expect, t("sw-hf"),
                keep=[t("swapped-run")]),
            Row("embed", ["embed", "--model", t("swapped-run"), "--input", t("test.csv"), "--out", t("sw.h5"), *FAST],
                expect, t("sw.h5"), keep=[t("swapped-run")]),
            Row("finetune", ["finetune", "--model", t("swapped-run"), "--train", t("train.csv"), "--test",
                             t("test.csv"), "--out", t("sw-ft"), "--epochs", "1", *FAST], expect, t("sw-ft"),
                keep=[t("swapped-run")]),
            Row("pretrain --init", ["pretrain", "--shards", t("shards"), "--out", t("sw-init"), "--steps", "1",
                                    "--init", t("swapped-run"), "--masking", "random", "--warmup", "1",
                                    "--batch-per-rank", "2", "--grad-accum", "1", *FAST], expect, t("sw-init"),
                keep=[t("swapped-run")]),
        ])

    def test_every_reader_checks_a_model_directory_genemask_wrote(self):
        """An export and a saved classifier record their files' SHA-256 in their marker: weights
        replaced or edited after genemask wrote them are refused by every reader, named."""
        t = self.t
        shutil.copytree(t("hf"), t("ed-hf"))
        shutil.copytree(t("clf"), t("ed-clf"))
        marker = json.load(open(t("ed-hf", ".genemask.json")))
        self.assertEqual(marker["files"]["model.safetensors"], tb.sha256(t("ed-hf", "model.safetensors")))
        for d in ("ed-hf", "ed-clf"):
            with open(t(d, "model.safetensors"), "r+b") as f:
                f.seek(-4, 2)
                f.write(struct.pack("<f", 0.25))
        expect = [t("ed-hf", "model.safetensors"), "is not the file `genemask export-hf` wrote"]
        with open(t("ed-plan.json"), "w") as f:
            json.dump({"models": [{"name": "m", "path": t("ed-hf")}],
                       "tasks": [{"name": "t", "train": t("train.csv"), "test": t("test.csv")}], "shots": [4],
                       "seeds": 1}, f)
        self.check_table([
            Row("embed an edited export", ["embed", "--model", t("ed-hf"), "--input", t("test.csv"), "--out",
                                           t("ed.h5"), *FAST], expect, t("ed.h5"), keep=[t("ed-hf")]),
            Row("finetune from an edited export", ["finetune", "--model", t("ed-hf"), "--train", t("train.csv"),
                                                   "--test", t("test.csv"), "--out", t("ed-ft"), "--epochs", "1",
                                                   *FAST], expect, t("ed-ft"), keep=[t("ed-hf")]),
            Row("a sweep over an edited export", ["sweep", "--plan", t("ed-plan.json"), "--out", t("ed-sw"),
                                                  "--simulate", "0"], expect, t("ed-sw"), keep=[t("ed-hf")]),
            Row("predict with an edited classifier", ["predict", "--model", t("ed-clf"), "--input", t("test.csv"),
                                                      "--out", t("ed.tsv"), *FAST],
                [t("ed-clf", "model.safetensors"), "is not the file `genemask finetune --save-model` wrote"],
                t("ed.tsv"), keep=[t("ed-clf")]),
        ])

    # ---- 8. NaN and infinity in every floating-point option ------------------------------

    def every_command(self):
        """Each subcommand with otherwise valid arguments (the option under test is added)."""
        t = self.t
        base = {
            "count": ["--genome", self.fa, "--out", t("nan.h5")],
            "npmi": ["--counts", t("counts.h5"), "--out", t("nan.tsv")],
            "pmi-vocab": ["--counts", t("counts.h5"), "--out", t("nan.tsv")],
            "shards": ["--genome", self.fa, "--out", t("nan-s")],
            "mask-stats": ["--shards", t("shards"), "--masking", "random"],
            "pretrain": ["--shards", t("shards"), "--out", t("nan-r"), "--steps", "1", "--model", t("tiny.json")],
            "embed": ["--model", t("hf"), "--input", t("test.csv"), "--out", t("nan-e.h5")],
            "finetune": ["--model", t("hf"), "--train", t("train.csv"), "--test", t("test.csv"), "--out", t("nan-f")],
            "predict": ["--model", t("clf"), "--input", t("test.csv"), "--out", t("nan-p.tsv")],
            "overlap": ["--test", t("test.csv"), "--train", t("train.csv"), "--out", t("nan-o")],
            "report": ["--results", t("none.jsonl"), "--out", t("nan-rep")],
            "sweep": ["--plan", t("none.yaml"), "--out", t("nan-sw")],
        }
        for f in ("none.jsonl", "none.yaml"):
            open(t(f), "w").close()
        return base

    def test_no_option_takes_nan_or_infinity(self):
        """Every FLOAT option of every subcommand (read from --help, so options added later are
        covered), given nan, inf or -inf with otherwise valid arguments: a usage error naming it."""
        t = self.t
        tried = 0
        for cmd, argv in self.every_command().items():
            help_text = run([cmd, "--help"]).stdout
            floats = re.findall(r"^\s+(--[a-z0-9-]+)\s+FLOAT", help_text, re.M)
            for opt in floats:
                for bad in ("nan", "inf", "-inf", "0x1p-3"):
                    with self.subTest(cmd=cmd, opt=opt, value=bad):
                        # The option's own range check may say it first (--valid-fraction: "Value
                        # inf not in range"): refused either way, naming the option and the value.
                        self.check_row(Row(f"{cmd} {opt} {bad}", [cmd, *argv, f"{opt}={bad}"],
                                           [opt, re.compile(rf"{re.escape(bad)} is not a finite number|Value "
                                                            rf"{re.escape(bad)} not in range")], usage=True))
                        tried += 1
        self.assertGreaterEqual(tried, 4 * 8)  # the campaign's options at least: --valid-fraction, --full-prob, --lr...
        # A number given as text and parsed later (a fraction or pNN).
        self.check_row(Row("overlap --drop-above nan", ["overlap", "--test", t("test.csv"), "--train", t("train.csv"),
                                                        "--out", t("nan-o"), "--drop-above", "nan", "--filtered",
                                                        t("nan-f.tsv")],
                           ["--drop-above 'nan'", "fraction"], t("nan-o")))
        self.assertFalse(os.path.exists(t("nan-f.tsv")))

    def test_no_unsigned_option_wraps_a_negative_or_clamps_a_large_number(self):
        """Every UINT option of every subcommand (from --help), given -1, -5 or 2^64: a usage
        error naming it. CLI11's conversion read -1 as 2^64 - 1 and clamped 2^64 to it, so that
        `--seed -1` ran with seed 18446744073709551615 and `npmi --min-count -1` flagged every
        k-mer rare, each with exit status 0."""
        tried = 0
        for cmd, argv in self.every_command().items():
            help_text = run([cmd, "--help"]).stdout
            for opt in re.findall(r"^\s+(--[a-z0-9-]+)\s+UINT", help_text, re.M):
                for bad in ("-1", "-5", "18446744073709551616", "010", "0x10", " 5"):
                    with self.subTest(cmd=cmd, opt=opt, value=bad):
                        # The option's own range check may say it first: refused either way.
                        self.check_row(Row(f"{cmd} {opt} {bad}", [cmd, *argv, f"{opt}={bad}"],
                                           [opt, re.compile(rf"'{re.escape(bad)}' is not a whole number from 0 to "
                                                            rf"18446744073709551615|Value {re.escape(bad)} not in "
                                                            rf"range|{re.escape(bad)}")], usage=True))
                        tried += 1
        self.assertGreaterEqual(tried, 6 * 10)  # --seed of several commands, --min-count, --top, --shots...

    def test_no_integer_option_reads_octal_or_hexadecimal(self):
        """Every INT option of every subcommand (from --help), given 010, 0x10, +-5 or 1.5: a
        usage error naming it. CLI11 converts in base 0, so that `count --kmax 010` counted
        8-mers (octal) and exited 0."""
        tried = 0
        for cmd, argv in self.every_command().items():
            help_text = run([cmd, "--help"]).stdout
            for opt in re.findall(r"^\s+(--[a-z0-9-]+)\s+INT", help_text, re.M):
                if opt in argv:  # given once already (pretrain --steps)
                    continue
                for bad in ("010", "-010", "0x10", "+-5", "1.5"):
                    with self.subTest(cmd=cmd, opt=opt, value=bad):
                        self.check_row(Row(f"{cmd} {opt} {bad}", [cmd, *argv, f"{opt}={bad}"],
                                           [opt, re.compile(rf"'{re.escape(bad)}'|Value {re.escape(bad)} not in "
                                                            rf"range|{re.escape(bad)}")], usage=True))
                        tried += 1
        self.assertGreaterEqual(tried, 5 * 10)  # --kmax, --steps, --batch-per-rank, --layer, --shots...
        # The octal case end to end: refused, where it counted 8-mers.
        p = run(["count", "--genome", self.fa, "--out", self.t("octal.h5"), "--kmax", "010"], check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("without its leading 0", p.stderr)
        self.assertFalse(os.path.exists(self.t("octal.h5")))

    # ---- 9. numbers that were not measured -----------------------------------------------

    def test_unmeasured_losses_are_null(self):
        t = self.t
        # 5-token samples, one per step: random masking leaves most steps without a masked token.
        run(["shards", "--genome", self.fa, "--out", t("short"), "--max-tokens", "5", "--min-tokens", "5"])
        s = summary(run(["pretrain", "--shards", t("short"), "--out", t("run-short"), "--steps", "12",
                         "--log-every", "1", "--batch-per-rank", "1", "--grad-accum", "1", "--model", t("tiny.json"),
                         "--masking", "random", "--warmup", "1", "--eval-every", "0", "--precision", "fp32", *FAST]))
        lines = [l for l in metrics_lines(t("run-short")) if "loss" in l]
        self.assertEqual(len(lines), 12)
        unmasked = [l for l in lines if l["masked_tokens"] == 0]
        masked = [l for l in lines if l["masked_tokens"] > 0]
        self.assertTrue(unmasked, lines)
        for l in unmasked:
            self.assertIsNone(l["loss"])
            self.assertIsNone(l["perplexity"])
        for l in masked:
            self.assertGreater(l["loss"], 0)
            self.assertAlmostEqual(l["perplexity"], np.exp(l["loss"]), places=6)
        self.assertEqual(s["loss"], lines[-1]["loss"])
        self.assertIsNone(s["eval_loss"])  # no evaluation ran (--eval-every 0)
        # Evaluation requested, but the shard set has no validation samples: null, and said.
        run(["shards", "--genome", self.fa, "--out", t("novalid"), "--max-tokens", "60", "--min-tokens", "20",
             "--valid-fraction", "0"])
        p = run(["pretrain", "--shards", t("novalid"), "--out", t("run-novalid"), "--steps", "2", "--eval-every", "1",
                 "--model", t("tiny.json"), "--masking", "random", "--warmup", "1", "--batch-per-rank", "2",
                 "--grad-accum", "1", "--precision", "fp32", *FAST])
        self.assertIsNone(summary(p)["eval_loss"])
        self.assertIn("no evaluation", p.stderr)
        self.assertFalse(any("eval_loss" in l for l in metrics_lines(t("run-novalid"))))

    # ---- 10. --resume compares what changes the result ----------------------------------

    def test_resume_refuses_changed_settings_and_damaged_state(self):
        t = self.t
        args = ["pretrain", "--shards", t("shards"), "--out", t("res"), *self.tiny_pretrain]
        run(args + ["--steps", "2"])
        state = os.path.join(t("res"), "checkpoints", sorted(os.listdir(t("res", "checkpoints")))[-1], "state.json")
        rows = [Row("--lr changed", args + ["--steps", "3", "--resume", "--lr", "0.001"],
                    [state, "--lr is 0.001 now but 0.0004 in the run", "--allow-changes"], keep=[t("res")]),
                Row("--weight-decay changed", args + ["--steps", "3", "--resume", "--weight-decay", "0.5"],
                    [state, "--weight-decay is 0.5 now"], keep=[t("res")])]
        rows.append(Row("--precision changed", ["pretrain", "--shards", t("shards"), "--out", t("res"), "--model",
                                                t("tiny.json"), "--masking", "random", "--warmup", "1",
                                                "--batch-per-rank", "2", "--grad-accum", "1", "--eval-every", "0",
                                                "--precision", "bf16", *FAST, "--steps", "3", "--resume"],
                        [state, "--precision is \"bf16\" now but \"fp32\" in the run"], keep=[t("res")]))
        self.check_table(rows)
        # --allow-changes continues, and says what changed.
        shutil.copytree(t("res"), t("res2"))
        p = run(["pretrain", "--shards", t("shards"), "--out", t("res2"), *self.tiny_pretrain, "--steps", "3",
                 "--resume", "--lr", "0.001", "--allow-changes"])
        self.assertIn("--lr is 0.001 now but 0.0004 in the run; continuing with the new value", p.stderr)
        self.assertIn("--steps is 3 now but 2 in the run", p.stderr)
        # Edited state.json fields out of range are refused, named.
        for field, value, expect in [("cursor.epoch", 1e12, "cursor.epoch is 1000000000000.0"),
                                     ("cursor.epoch", 10 ** 12, "cursor.epoch is 1000000000000, expected an integer in"),
                                     ("cursor.position", -1, "cursor.position is -1"),
                                     ("world_size", 0, "world_size is 0")]:
            with self.subTest(field=field, value=value):
                d = t(f"res-{field}-{value}")
                shutil.copytree(t("res"), d)
                st = os.path.join(d, os.path.relpath(state, t("res")))
                j = json.load(open(st))
                obj, key = (j["cursor"], field.split(".")[1]) if "." in field else (j, field)
                obj[key] = value
                json.dump(j, open(st, "w"))
                self.check_row(Row(field, ["pretrain", "--shards", t("shards"), "--out", d, *self.tiny_pretrain,
                                           "--steps", "3", "--resume"], [st, expect], keep=[d]))
        # A position past the end of the epoch of the run's own shard set: damaged, named.
        d = t("res-past")
        shutil.copytree(t("res"), d)
        st = os.path.join(d, os.path.relpath(state, t("res")))
        j = json.load(open(st))
        j["cursor"]["position"] = 10 ** 9
        json.dump(j, open(st, "w"))
        self.check_row(Row("cursor past the epoch", ["pretrain", "--shards", t("shards"), "--out", d,
                                                     *self.tiny_pretrain, "--steps", "3", "--resume"],
                           [st, "cursor.position is 1000000000, at or beyond the", "training samples of its shard set",
                            "damaged or was edited"], keep=[d]))
        # A smaller batch is a change of settings, named as such (it was "cursor.position is 4,
        # expected an integer in 0..2: the checkpoint is damaged"); --allow-changes continues,
        # and again with another change after it.
        d = t("res-accum")
        shutil.copytree(t("res"), d)
        smaller = [a for a in self.tiny_pretrain]
        smaller[smaller.index("--batch-per-rank") + 1] = "1"
        self.check_row(Row("a smaller batch", ["pretrain", "--shards", t("shards"), "--out", d, *smaller, "--steps",
                                               "3", "--resume"],
                           [os.path.join(d, os.path.relpath(state, t("res"))), "--batch-per-rank is 1 now but 2 in the run",
                            "--allow-changes"], keep=[d]))
        p = run(["pretrain", "--shards", t("shards"), "--out", d, *smaller, "--steps", "4", "--resume",
                 "--allow-changes", "--checkpoint-every", "1"])
        self.assertIn("--batch-per-rank is 1 now but 2 in the run; continuing with the new value", p.stderr)
        p = run(["pretrain", "--shards", t("shards"), "--out", d, *self.tiny_pretrain, "--steps", "5", "--resume",
                 "--allow-changes"])
        self.assertIn("--batch-per-rank is 2 now but 1 in the run; continuing with the new value", p.stderr)
        # Onto a shard set of fewer samples per rank than the run was into its epoch (4): the
        # next epoch, said (it said "resumed", then failed naming no file).
        with open(t("one-sample.fa"), "w") as f:
            f.write(">c0\n" + "".join(random.Random(1).choice("ACGT") for _ in range(120)) + "\n")
        run(["shards", "--genome", t("one-sample.fa"), "--out", t("one-sample"), "--max-tokens", "60", "--min-tokens",
             "20", "--valid-fraction", "0", "--max-offset", "5"])
        d = t("res-fewer")
        shutil.copytree(t("res"), d)
        p = run(["pretrain", "--shards", t("one-sample"), "--out", d, *self.tiny_pretrain, "--steps", "3", "--resume",
                 "--allow-changes"])
        self.assertIn("--resume: the run was 4 samples into epoch 0, more than the 1 training samples of "
                      f"{t('one-sample')} hold: continuing at the start of epoch 1", p.stderr)
        self.assertEqual((summary(p)["start_step"], summary(p)["steps_done"]), (2, 3))

    # ---- 11. FIFOs and process substitution ----------------------------------------------

    def test_pipes_are_refused_before_they_are_opened(self):
        t = self.t
        os.mkfifo(t("g.fifo"))
        rows = [Row("count --genome a FIFO", ["count", "--genome", t("g.fifo"), "--out", t("f.h5")],
                    [t("g.fifo"), "FIFO", "zcat"], t("f.h5"), usage=True),
                Row("npmi --counts a FIFO", ["npmi", "--counts", t("g.fifo"), "--out", t("f.tsv")],
                    [t("g.fifo"), "FIFO"], t("f.tsv"), usage=True),
                Row("embed --input a FIFO", ["embed", "--model", t("hf"), "--input", t("g.fifo"), "--out", t("f2.h5")],
                    [t("g.fifo"), "FIFO"], t("f2.h5"), usage=True),
                Row("a symlink loop", ["count", "--genome", t("loop.fa"), "--out", t("f3.h5")],
                    [t("loop.fa"), "too many levels of symbolic links"], t("f3.h5"), usage=True)]
        os.symlink(t("loop.fa"), t("loop.fa"))
        for row in rows:
            with self.subTest(row.name):
                start = time.monotonic()
                self.check_row(row)
                self.assertLess(time.monotonic() - start, 60)
        # <(zcat ...): a pipe under /dev/fd.
        p = subprocess.run(["bash", "-c", f'"{os.path.abspath(BIN)}" count --genome <(cat "{self.fa}") --out '
                                          f'"{t("ps.h5")}"'], env=ENV, capture_output=True, text=True, timeout=60)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("FIFO", p.stderr)
        self.assertIn("process substitution", p.stderr)
        self.assertFalse(os.path.exists(t("ps.h5")))

    # ---- 12. a signal leaves the disk as it was ------------------------------------------

    def held(self, argv, match, new_dirs, existing=None):
        """Runs argv until it holds a temporary whose name contains `match`, then SIGTERM:
        every path of new_dirs must be gone, `existing` (a directory there before) as it was."""
        before = digest(existing) if existing else None
        p = subprocess.Popen([os.path.abspath(BIN)] + argv, env=dict(ENV, GENEMASK_TEST_HOLD_TEMP="30",
                                                                     GENEMASK_TEST_HOLD_TEMP_MATCH=match),
                             stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
        line = p.stderr.readline()
        while line and not line.startswith("genemask: holding"):
            line = p.stderr.readline()
        self.assertTrue(line.startswith("genemask: holding"), line)
        for d in new_dirs:
            self.assertTrue(os.path.exists(d), d)
        p.send_signal(signal.SIGTERM)
        rest = p.stderr.read()
        p.wait(timeout=60)
        self.assertEqual(p.returncode, -signal.SIGTERM, rest)
        self.assertIn("stopped by SIGTERM", rest)
        self.assertIn("removed the unfinished", rest)
        for d in new_dirs:
            self.assertFalse(os.path.exists(d), f"{d} was left behind\n{rest}")
            self.assertIn(d, rest)
        if existing:
            self.assertEqual(digest(existing), before)
        self.assertEqual(self.leftovers(), [])
        return rest

    def test_a_signal_removes_unfinished_directories(self):
        t = self.t
        self.held(["shards", "--genome", self.fa, "--out", t("sig-shards", "deep")], ".h5",
                  [t("sig-shards", "deep"), t("sig-shards")])
        self.held(["export-hf", "--run", t("run"), "--out", t("sig-hf")], "model.safetensors", [t("sig-hf")])
        self.held(["finetune", "--model", t("hf"), "--train", t("train.csv"), "--test", t("test.csv"), "--out",
                   t("sig-ft"), "--save-model", t("sig-clf"), "--epochs", "1", *FAST], "model.safetensors",
                  [t("sig-ft"), t("sig-clf")])
        # A directory that was there before stays, as it was (empty): only what the run made goes.
        os.makedirs(t("sig-empty"))
        self.held(["export-hf", "--run", t("run"), "--out", t("sig-empty")], "model.safetensors", [],
                  existing=t("sig-empty"))
        self.assertEqual(os.listdir(t("sig-empty")), [])

    # ---- 13. readers and checkpoint rotation ----------------------------------------------

    def test_readers_hold_checkpoints_against_rotation(self):
        t = self.t
        args = ["pretrain", "--shards", t("shards"), "--out", t("rot"), "--checkpoint-every", "1",
                "--keep-checkpoints", "1", *self.tiny_pretrain]
        run(args + ["--steps", "1"])
        lock = os.path.join(t("rot"), "checkpoints", ".genemask-readers.lock")
        self.assertTrue(os.path.exists(lock))
        # A reader holding the lock: rotation keeps the old checkpoints, and says so.
        with open(lock) as f:
            fcntl.flock(f, fcntl.LOCK_SH)
            p = run(args + ["--steps", "3", "--resume"])
            fcntl.flock(f, fcntl.LOCK_UN)
        self.assertIn("a reader of the run holds them", p.stderr)
        self.assertEqual(len([n for n in os.listdir(t("rot", "checkpoints")) if n.startswith("step-")]), 3)
        run(args + ["--steps", "4", "--resume"])  # no reader: the next checkpoint removes them
        self.assertEqual([n for n in os.listdir(t("rot", "checkpoints")) if n.startswith("step-")], ["step-00000004"])
        # Readers of the run while it rotates at every step: the run itself is refused by every
        # reader (its newest checkpoint is not its model); a checkpoint named explicitly is
        # read whole under the readers' lock, or said to be rotated away before the lock was
        # taken, never read half-removed.
        pre = subprocess.Popen([os.path.abspath(BIN)] + args + ["--steps", "100000", "--resume", "--log-every", "50"],
                               env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            # Until the resumed run has written its first checkpoint, it is the finished 4-step run.
            deadline = time.time() + 120
            while pre.poll() is None and time.time() < deadline and not any(
                    n.startswith("step-") and n > "step-00000004" for n in os.listdir(t("rot", "checkpoints"))):
                time.sleep(0.1)
            done = 0
            for i in range(6):
                if pre.poll() is not None:
                    break
                for argv in (["embed", "--model", t("rot"), "--input", t("test.csv"), "--out", t("rot-emb.h5")],
                             ["export-hf", "--run", t("rot"), "--out", t("rot-hf")]):
                    r = run(argv + (FAST if argv[0] == "embed" else []), check=False)
                    if pre.poll() is not None:
                        break
                    self.assertEqual(r.returncode, 1, r.stderr)
                    self.assertIn(f'the run "{t("rot")}" is still being trained', r.stderr)
                    done += 1
                steps = sorted(n for n in os.listdir(t("rot", "checkpoints")) if n.startswith("step-"))
                if not steps:
                    continue
                named = t("rot", "checkpoints", steps[-1])
                r = run(["embed", "--model", named, "--input", t("test.csv"), "--out", t("rot-emb.h5"), "--force",
                         *FAST], check=False)
                if r.returncode != 0:  # gone before the lock was taken, or before the command looked
                    self.assertRegex(r.stderr, "was removed by its run's checkpoint rotation|does not exist|"
                                               "[Nn]o such file|no complete checkpoint", r.stderr)
            self.assertGreaterEqual(done, 3)
        finally:
            pre.send_signal(signal.SIGTERM)
            pre.communicate(timeout=120)

    # ---- 14. a sweep reads its own plan.json ------------------------------------------------

    def write_plan(self, name, model_path, test="test.csv", seeds=2, **more):
        with open(self.t(name), "w") as f:
            json.dump({"models": [{"name": "m", "path": model_path}],
                       "tasks": [{"name": "t", "train": self.t("train.csv"), "test": self.t(test)}],
                       "shots": [4], "seeds": seeds, **more}, f)
        return self.t(name)

    def test_an_fp32_sweep_continues_from_its_own_plan(self):
        """plan.json leaves the precision out for fp32 (so that the plans of earlier sweeps read
        the same); read back as a plan, that meant auto, and the sweep's own plan.json was refused
        as changed, --force then rerunning every job in another precision."""
        t = self.t
        plan = self.write_plan("fp32-plan.json", t("hf"), finetune={"precision": "fp32"})
        run(["sweep", "--plan", plan, "--out", t("fp32"), "--simulate", "0", "--progress-every", "0"])
        own = t("fp32", "plan.json")
        self.assertNotIn("precision", json.load(open(own))["finetune"])
        s = summary(run(["sweep", "--plan", own, "--out", t("fp32"), "--simulate", "0", "--progress-every", "0"]))
        self.assertEqual((s["jobs_skipped"], s["jobs_total"], s["stale_records"]), (2, 2, 0))
        # The original plan continues it too, and the own plan plans another fp32 sweep.
        s = summary(run(["sweep", "--plan", plan, "--out", t("fp32"), "--simulate", "0", "--progress-every", "0"]))
        self.assertEqual(s["jobs_skipped"], 2)
        run(["sweep", "--plan", own, "--out", t("fp32-again"), "--simulate", "0", "--progress-every", "0"])
        self.assertNotIn("precision", json.load(open(t("fp32-again", "plan.json")))["finetune"])
        # A plan written by hand without a precision is auto, the default: another sweep's.
        auto = self.write_plan("auto-plan.json", t("hf"))
        self.check_row(Row("an auto plan onto an fp32 sweep", ["sweep", "--plan", auto, "--out", t("fp32"),
                                                               "--simulate", "0"],
                           ["changed incompatibly", '"precision":"auto"'], keep=[own]))

    def test_sweep_plan_round_trips_and_inputs_are_pinned(self):
        t = self.t
        plan = self.write_plan("sw-plan.json", t("hf"))
        run(["sweep", "--plan", plan, "--out", t("sw"), "--simulate", "0", "--progress-every", "0"])
        own = t("sw", "plan.json")
        # Its own plan continues it (nothing to run), and plans another sweep with the same jobs.
        s = summary(run(["sweep", "--plan", own, "--out", t("sw"), "--simulate", "0", "--progress-every", "0"]))
        self.assertEqual(s["jobs_skipped"], s["jobs_total"])
        run(["sweep", "--plan", own, "--out", t("sw2"), "--simulate", "0", "--progress-every", "0"])
        a, b = json.load(open(own)), json.load(open(t("sw2", "plan.json")))
        a.pop("source"), b.pop("source")
        self.assertEqual(a, b)
        self.assertEqual(a["tasks"][0]["test_sha256"], tb.sha256(t("test.csv")))
        self.assertEqual(a["models"][0]["weights_sha256"], tb.sha256(t("hf", "model.safetensors")))
        # A plan.json whose inputs changed since is refused, naming the field.
        shutil.copytree(t("hf"), t("hf-pinned"))
        os.remove(t("hf-pinned", ".genemask.json"))  # a model directory from elsewhere: no marker of ours
        plan2 = self.write_plan("sw-plan2.json", t("hf-pinned"))
        run(["sweep", "--plan", plan2, "--out", t("sw3"), "--simulate", "0", "--progress-every", "0"])
        with open(t("hf-pinned", "model.safetensors"), "r+b") as f:
            f.seek(-4, 2)
            f.write(b"\x00\x00\x80\x3f")
        self.check_row(Row("plan.json pins the weights", ["sweep", "--plan", t("sw3", "plan.json"), "--out", t("sw4"),
                                                          "--simulate", "0"],
                           ["models[0].weights_sha256", "the input changed since the plan was written"], t("sw4")))

    # ---- 3. a sweep continued after its inputs changed ------------------------------------

    def test_a_sweep_never_mixes_inputs(self):
        t = self.t
        shutil.copy(t("test.csv"), t("mix-test.csv"))
        shutil.copytree(t("hf"), t("hf-mix"))
        os.remove(t("hf-mix", ".genemask.json"))  # a model directory from elsewhere: no marker of ours
        plan = self.write_plan("mix.json", t("hf-mix"), test="mix-test.csv")
        run(["sweep", "--plan", plan, "--out", t("mix"), "--simulate", "0", "--progress-every", "0"])
        recs = [json.loads(l) for l in open(t("mix", "results.jsonl"))]
        self.assertTrue(all(r["test_sha256"] == tb.sha256(t("mix-test.csv")) for r in recs))
        self.assertTrue(all(r["model_sha256"] == tb.sha256(t("hf-mix", "model.safetensors")) for r in recs))
        self.assertTrue(all(r["train_sha256"] == tb.sha256(t("train.csv")) for r in recs))
        # The campaign's case: a shorter test table, other weights, a seed added.
        lines = open(t("mix-test.csv")).read().splitlines(keepends=True)
        with open(t("mix-test.csv"), "w") as f:
            f.writelines(lines[:5])
        with open(t("hf-mix", "model.safetensors"), "r+b") as f:  # other weights: the last float changed
            f.seek(-4, 2)
            f.write(struct.pack("<f", 0.125))
        plan = self.write_plan("mix.json", t("hf-mix"), test="mix-test.csv", seeds=3)
        self.check_row(Row("continued on changed inputs", ["sweep", "--plan", plan, "--out", t("mix"),
                                                           "--simulate", "0"],
                           ["changed incompatibly", "the content of the test table changed",
                            "the content of the weights changed", "--force"], keep=[t("mix", "results.jsonl")]))
        run(["sweep", "--plan", plan, "--out", t("mix"), "--simulate", "0", "--force", "--progress-every", "0"])
        recs = [json.loads(l) for l in open(t("mix", "results.jsonl"))]
        self.assertEqual(len(recs), 3)
        self.assertEqual({r["test_sha256"] for r in recs}, {tb.sha256(t("mix-test.csv"))})
        self.assertEqual(len([l for l in open(t("mix", "results.stale.jsonl"))]), 2)
        # An input changed while the sweep runs: the job fails, named, and is not averaged.
        # (The report refuses records of one task made from two test tables.)
        mixed = t("mixed.jsonl")
        with open(mixed, "w") as f:
            for l in open(t("mix", "results.stale.jsonl")):
                r = json.loads(l)
                r["seed"] += 10
                r["job"] = f"{r['model']}|{r['task']}|{r['shots']}|{r['seed']}"
                del r["record_sha256"]  # merged by hand (an edited record with its seal is refused as such)
                f.write(json.dumps(r) + "\n")
            f.write(open(t("mix", "results.jsonl")).read())
        self.check_row(Row("report of mixed test tables", ["report", "--results", mixed, "--out", t("mix-rep"),
                                                           "--no-png"],
                           [mixed + ":", "the test table of task 't'", "different inputs"], t("mix-rep")))

    # ---- 15. embed ids are valid UTF-8 -----------------------------------------------------

    def test_embed_ids_read_back_as_text(self):
        t = self.t
        with open(t("latin.fa"), "wb") as f:
            f.write(b">seq\xff1 desc\n" + self.seqs[0][:300].encode() + b"\n>plain\n" + self.seqs[1][:300].encode() + b"\n")
        run(["embed", "--model", t("hf"), "--input", t("latin.fa"), "--out", t("latin.h5"), *FAST])
        with h5py.File(t("latin.h5")) as h:
            ids = list(h["ids"].asstr()[...])
        self.assertEqual(ids, ["seq\\xff1", "plain"])

    # ---- 16. messages ----------------------------------------------------------------------

    def test_the_model_library_under_a_memory_limit_says_why(self):
        """Under ulimit -v, loading LibTorch fails (1.5 GB: it cannot be mapped) or an allocation
        does (3 GB, a DNABERT-size model): what the dynamic linker or the allocator said, the
        limit, and what to do; never "build with -DGENEMASK_WITH_TORCH" or "[enforce fail"."""
        t = self.t
        for mib, want in [(1536, r"cannot load the training library .*: .*not enough address space to map LibTorch "
                                 r"under the virtual memory limit of 1536 MiB \(ulimit -v\)"),
                          # Where the address space runs out decides which words come: LibTorch's
                          # allocator error (with its size), std::bad_alloc (which LibTorch's CPU
                          # allocator throws too: seen for the model's first weights), or the
                          # dynamic linker's.
                          (3000, r"out of memory: LibTorch could not allocate [0-9.]+ MiB more under a virtual "
                                 r"memory limit of \d+ MiB \(ulimit -v\)|out of memory under a virtual memory limit of "
                                 r"\d+ MiB \(ulimit -v\); use a smaller batch|not enough address space to map LibTorch")]:
            def limited(limit=mib << 20):
                resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

            with self.subTest(mib=mib):
                out = t(f"lim-{mib}")
                p = subprocess.run([os.path.abspath(BIN), "finetune", "--model", "random", "--config", "dnabert",
                                    "--train", t("train.csv"), "--test", t("test.csv"), "--out", out, "--epochs", "1",
                                    "--precision", "fp32", *FAST], env=ENV, capture_output=True, text=True,
                                   preexec_fn=limited, timeout=300)
                self.assertEqual(p.returncode, 1, p.stderr)
                lines = [l for l in p.stderr.splitlines() if l.startswith("genemask")]
                self.assertEqual(len(lines), 1, p.stderr)
                self.assertRegex(lines[0], want)
                self.assertNotIn("GENEMASK_WITH_TORCH", p.stderr)
                self.assertNotIn("enforce fail", p.stderr)
                self.assertFalse(os.path.exists(out))

if __name__ == "__main__":
    unittest.main()


class RanksAgreeOnContent(unittest.TestCase):
    """Ranks that see files of the same size and time but other bytes (a stale copy on one
    node) are stopped before anything is read: the start check compares a fingerprint of
    the content, not only the metadata."""

    def test_same_size_and_time_other_bytes(self):
        tmp = tempfile.mkdtemp(prefix="genemask-agree-")
        self.addCleanup(shutil.rmtree, tmp, ignore_errors=True)
        d0, d1 = os.path.join(tmp, "n0"), os.path.join(tmp, "n1")
        os.makedirs(d0), os.makedirs(d1)
        rng = random.Random(3)
        a = ">chr1\n" + "".join(rng.choice("ACGT") for _ in range(5000)) + "\n"
        b = a[:3000] + ("A" if a[3000] != "A" else "C") + a[3001:]
        for d, text in ((d0, a), (d1, b)):
            with open(os.path.join(d, "g.fa"), "w") as f:
                f.write(text)
            os.utime(os.path.join(d, "g.fa"), ns=(1_700_000_000_000_000_000, 1_700_000_000_000_000_000))
        cmd = mpiexec()
        for i, d in enumerate((d0, d1)):
            cmd += ([":"] if i else []) + ["-n", "1", "--wdir", d, os.path.abspath(BIN), "count", "--genome", "g.fa",
                                           "--out", "c.h5"]
        p = subprocess.run(cmd, env=ENV, capture_output=True, text=True, timeout=120)
        self.assertNotEqual(p.returncode, 0, p.stderr)
        line = [l for l in p.stderr.splitlines() if l.startswith("genemask")]
        self.assertEqual(len(line), 1, p.stderr)
        self.assertIn("rank 1 sees g.fa differently from rank 0", line[0])
        self.assertIn("content", line[0])
        self.assertFalse(os.path.exists(os.path.join(d0, "c.h5")))
