#!/usr/bin/env python3
"""Hostile input, issue 21 (file formats and system limits), with the row/check machinery
of test_bad_input.py: every row must exit 1 (or, for an option error, CLI11's code below
128), in exactly one escaped "genemask: error: " line naming the file and the value, and
leave no partial output behind. Rows with `limits` run under setrlimit (ulimit -v, -n)."""
import contextlib
import json
import os
import random
import resource
import shutil
import subprocess
import tempfile
import unittest

import test_bad_input as tbi
from test_bad_input import Row
from test_cli import BIN, ENV, run
from test_corpus import write_genome

TINY = tbi.TINY
FAST = tbi.FAST
MIB = 1 << 20


class LimitedRow(Row):
    """A Row run with resource limits: {resource.RLIMIT_AS: bytes, ...} (soft and hard)."""

    def __init__(self, name, argv, expect, out=None, usage=False, limits=None):
        super().__init__(name, argv, expect, out, usage)
        self.limits = limits or {}


@contextlib.contextmanager
def rlimits(limits):
    """subprocess.run, as check_row calls it, with `limits` set in the child."""
    if not limits:
        yield
        return
    real = subprocess.run

    def preexec():
        for what, value in limits.items():
            resource.setrlimit(what, (value, value))

    def limited(*args, **kwargs):
        kwargs["preexec_fn"] = preexec
        return real(*args, **kwargs)

    subprocess.run = limited
    try:
        yield
    finally:
        subprocess.run = real


def run_limited(argv, limits):
    """The binary under `limits`, for probing (not a table row)."""
    def preexec():
        for what, value in limits.items():
            resource.setrlimit(what, (value, value))

    return subprocess.run([os.path.abspath(BIN)] + [str(a) for a in argv], env=ENV, capture_output=True,
                          preexec_fn=preexec, timeout=120)


def result_line(seed, **metrics):
    rec = {"job": f"m|t|10|{seed}", "model": "m", "group": "", "task": "t", "shots": 10, "seed": seed,
           "status": "ok", "accuracy": 0.6, "auc": 0.7, "f1": 0.6, "mcc": 0.2}
    rec.update(metrics)
    return json.dumps(rec)


class BadInputIO(unittest.TestCase):
    check_table_plain = tbi.BadInput.check_table
    check_row_plain = tbi.BadInput.check_row
    leftovers = tbi.BadInput.leftovers

    def check_row(self, row):
        with rlimits(getattr(row, "limits", None)):
            self.check_row_plain(row)

    def check_table(self, rows):
        for row in rows:
            with self.subTest(row.name):
                self.check_row(row)

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="genemask-bad-input-io-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, ignore_errors=True)
        t = cls.t
        rng = random.Random(21)
        cls.fa = t("g.fa")
        cls.seqs = write_genome(cls.fa, rng, records=2, length=(6000, 8000))
        run(["count", "--genome", cls.fa, "--out", t("counts.h5"), "--quiet", "--kmax", "6"])
        with open(t("tiny.json"), "w") as f:
            json.dump(TINY, f)

        def write(name, data):
            with open(t(name), "wb") as f:
                f.write(data if isinstance(data, bytes) else data.encode())

        # FASTA that held no sequence but counted 0 records with exit 0.
        body = "\r".join(cls.seqs[0][i:i + 60] for i in range(0, 600, 60))
        write("mac.fa", f">chr1\r{body}\r>chr2\r{body}\r")
        write("header-only.fa", ">chr1")
        write("all-n.fa", ">chr1\n" + "N" * 600 + "\n>chr2\n" + "NNNNRYNN" * 50 + "\n")

        # Plans nested 100,000 deep: the JSON one crashed formatting its error.
        deep = "[" * 100000 + "]" * 100000
        write("deep.json", '{"models":\n' + deep + ', "tasks": []}\n')
        write("deep-flow.yaml", "models:\n  - " + deep + "\n")
        write("deep-block.yaml", "models:\n" + "- " * 100000 + "x\n")

        # results.jsonl records out of range, and a complete last line with NaN.
        good = "".join(result_line(s) + "\n" for s in range(1, 4))
        write("good.jsonl", good)
        write("acc-7.5.jsonl", good + result_line(4, accuracy=7.5) + "\n")
        write("acc-neg.jsonl", result_line(4, accuracy=-1) + "\n" + good)
        write("mcc-1.5.jsonl", good + result_line(4, mcc=1.5) + "\n")
        write("nan-last.jsonl", good + result_line(4).replace('"accuracy": 0.6', '"accuracy": NaN') + "\n")

        # Task tables.
        def seq(n):
            return "".join(rng.choice("ACGT") for _ in range(n))

        rows = "".join(f"{seq(60)},{i % 2}\n" for i in range(12))
        write("train.csv", "sequence,label\n" + rows)
        write("test.csv", "sequence,label\n" + rows)
        write("label-space.csv", "sequence,label\n" + rows + f"{seq(60)},1 \n")
        write("label-float.csv", "sequence,label\n" + rows + f"{seq(60)},1.0\n")
        write("label-zero.csv", "sequence,label\n" + rows + f"{seq(60)},01\n")
        write("all-n.csv", "sequence,label\n" + "".join(f"{'N' * 60},{i % 2}\n" for i in range(6)))
        write("two-seq.csv", "sequence,label,sequence\n" + "".join(f"{seq(60)},{i % 2},{seq(60)}\n" for i in range(6)))
        write("bom.csv", b"\xef\xbb\xbfseqs,label\n" + rows.encode())

        # genomic-benchmarks directories for `dataset enhancer`.
        header = "id,region,start,end,strand\n"
        ivs = "".join(f"{i},chr1,{100 * i},{100 * i + 80},+\n" for i in range(1, 6))
        for d in ("gb-missing", "gb-stray"):
            os.makedirs(t(d, "train"))
            os.makedirs(t(d, "test"))
            for cls_name in ("positive", "negative"):
                write(os.path.join(d, "train", cls_name + ".csv"), header + ivs)
        write(os.path.join("gb-missing", "test", "positive.csv"), header + ivs)
        for cls_name in ("positive", "negative"):
            write(os.path.join("gb-stray", "test", cls_name + ".csv"), header + ivs)
        write(os.path.join("gb-stray", "test", "notes.csv"), b"")
        write("v.tsv", "id\tref\talt\nv1\tACGT\tACGA\n")

    @classmethod
    def t(cls, *names):
        return os.path.join(cls.tmp, *names)

    # ---- item 20: FASTA without any sequence -------------------------------------------

    def test_count_and_shards_refuse_inputs_without_sequence(self):
        t = self.t
        cr = "the file's line ends are CR only"
        rows = []
        for cmd, out in (("count", "c-{}.h5"), ("shards", "s-{}")):
            def argv(fa, tag):
                o = t(out.format(tag))
                a = [cmd, "--genome", t(fa), "--out", o]
                return a + (["--quiet"] if cmd == "count" else []), o

            a, o = argv("mac.fa", "mac")
            rows.append(Row(f"{cmd}: CR-only line ends", a, [t("mac.fa") + ":1:", cr, "tr '\\r' '\\n'"], o))
            a, o = argv("header-only.fa", "hdr")
            rows.append(Row(f"{cmd}: '>chr1' and no newline", a,
                            [t("header-only.fa") + ":1: record 'chr1' has no sequence"], o))
        a = ["count", "--genome", t("all-n.fa"), "--out", t("c-n.h5"), "--quiet"]
        rows.append(Row("count: only N", a, [t("all-n.fa") + ": has no A, C, G or T base", "1000 bases"], t("c-n.h5")))
        a = ["shards", "--genome", t("all-n.fa"), "--out", t("s-n")]
        rows.append(Row("shards: only N", a, [t("all-n.fa") + ": gives no sample", "--min-tokens"], t("s-n")))
        # No N at all, but every record shorter than its start offset: --max-offset named.
        a = ["shards", "--genome", self.fa, "--out", t("s-off"), "--max-offset",
             "100000000"]
        rows.append(Row("shards: --max-offset past every record", a,
                        ["gives no sample: no segment fits in any of its", "--max-offset 100000000",
                         "lower --max-offset"], t("s-off")))
        self.check_table(rows)

    def test_counting_at_several_ranks_refuses_cr_only_files(self):
        # Whichever rank owns the header says it; the others must not hang or print a count.
        for ranks in (2, 4):
            p = run(["count", "--genome", self.t("mac.fa"), "--out", self.t(f"c-mac-{ranks}.h5"), "--quiet"],
                    ranks=ranks, check=False)
            self.assertNotEqual(p.returncode, 0, p.stderr)
            self.assertIn("the file's line ends are CR only", p.stderr)
            self.assertFalse(os.path.exists(self.t(f"c-mac-{ranks}.h5")))

    # ---- item 13: allocations refused under ulimit -v ----------------------------------

    def test_out_of_memory_names_the_amount_and_the_option(self):
        t = self.t
        # The smallest address space in which a small count runs, then work that cannot fit
        # in a little more: measured, not guessed, since MPI and the libraries take their share.
        base = None
        for mib in range(32, 4097, 16):
            if run_limited(["count", "--genome", self.fa, "--out", t("probe.h5"), "--quiet", "--kmax", "4"],
                           {resource.RLIMIT_AS: mib * MIB}).returncode == 0:
                base = mib
                break
        self.assertIsNotNone(base, "count --kmax 4 does not run in 4 GiB of address space")
        # 40 MB of bases: 80 MB of tokens in one shard buffer with --shard-tokens 2^30.
        table = bytes(b"ACGT"[i & 3] for i in range(256))
        with open(t("big.fa"), "wb") as f:
            f.write(b">chr1\n")
            data = random.Random(13).randbytes(40 << 20).translate(table)
            for i in range(0, len(data), 1 << 16):
                f.write(data[i:i + (1 << 16)] + b"\n")
        self.check_table([
            LimitedRow("count --kmax 12 --presence15", ["count", "--genome", self.fa, "--out", t("c-oom.h5"),
                                                         "--quiet", "--kmax", "12", "--presence15"],
                       [f"out of memory under a virtual memory limit of {base + 128} MiB (ulimit -v)",
                        "331 MiB of k-mer tables per rank", "16777216 counters for k = 12",
                        "128 MiB --presence15 bitset", "lower --kmax", "leave out --presence15"],
                       t("c-oom.h5"), limits={resource.RLIMIT_AS: (base + 128) * MIB}),
            LimitedRow("shards --shard-tokens 2^30", ["shards", "--genome", t("big.fa"), "--out", t("s-oom"),
                                                       "--shard-tokens", str(1 << 30)],
                       [f"out of memory under a virtual memory limit of {base + 64} MiB (ulimit -v)",
                        "--shard-tokens 1073741824 tokens", "lower --shard-tokens (--shard-tokens 16777216 needs"],
                       t("s-oom"), limits={resource.RLIMIT_AS: (base + 64) * MIB}),
        ])
        os.remove(t("big.fa"))

    # ---- item 25: the limit on open files ----------------------------------------------

    def test_too_many_open_files_is_named(self):
        # A shard set is opened whole (every file at once): past `ulimit -n` the open that
        # fails names the file, EMFILE and the limit, instead of "missing or not HDF5".
        t = self.t
        write_genome(t("many.fa"), random.Random(25), records=2, length=(20000, 25000))
        run(["shards", "--genome", t("many.fa"), "--out", t("many"), "--max-tokens", "60", "--min-tokens", "20",
             "--shard-tokens", "512"])
        self.assertGreater(len(os.listdir(t("many"))), 40)
        self.check_table([
            LimitedRow("mask-stats, ulimit -n 24", ["mask-stats", "--shards", t("many"), "--masking", "random"],
                       [t("many", "train-r00000-"), ": cannot open", "Too many open files (EMFILE: this process may "
                        "have at most 24 files open", "ulimit -n"],
                       limits={resource.RLIMIT_NOFILE: 24}),
        ])

    # ---- item 9: nesting ---------------------------------------------------------------

    def test_plans_nested_100000_deep(self):
        t = self.t

        def sweep(plan, out):
            return ["sweep", "--plan", t(plan), "--out", t(out), "--simulate", "0", "--progress-every", "0"]

        self.check_table([
            Row("plan.json", sweep("deep.json", "w1"),
                [t("deep.json") + ":2:", "nested more than 64 levels deep"], t("w1")),
            Row("plan.yaml, flow", sweep("deep-flow.yaml", "w2"),
                [t("deep-flow.yaml") + ":2:", "more than 64 levels deep"], t("w2")),
            Row("plan.yaml, block", sweep("deep-block.yaml", "w3"),
                [t("deep-block.yaml") + ":2:", "more than 64 levels deep"], t("w3")),
            Row("report --plan", ["report", "--results", t("good.jsonl"), "--plan", t("deep.json"),
                                  "--out", t("r0"), "--no-png"],
                [t("deep.json") + ":2:", "nested more than 64 levels deep"], t("r0")),
        ])

    # ---- item 19: metric values ----------------------------------------------------------

    def test_report_refuses_metrics_out_of_range(self):
        t = self.t

        def report(results, out):
            return ["report", "--results", t(results), "--out", t(out), "--no-png"]

        self.check_table([
            Row("accuracy 7.5", report("acc-7.5.jsonl", "r1"),
                [t("acc-7.5.jsonl") + ":4:", "job m|t|10|4", '"accuracy" is 7.5', "[0, 1]"], t("r1")),
            Row("accuracy -1", report("acc-neg.jsonl", "r2"),
                [t("acc-neg.jsonl") + ":1:", "job m|t|10|4", '"accuracy" is -1', "[0, 1]"], t("r2")),
            Row("mcc 1.5", report("mcc-1.5.jsonl", "r3"),
                [t("mcc-1.5.jsonl") + ":4:", '"mcc" is 1.5', "[-1, 1]"], t("r3")),
            Row("a complete last line with NaN", report("nan-last.jsonl", "r4"),
                [t("nan-last.jsonl") + ":4:", "not valid JSON"], t("r4")),
        ])

    # ---- item 17: task tables ------------------------------------------------------------

    def test_task_tables(self):
        t = self.t

        def finetune(train, test, out):
            return ["finetune", "--model", "random", "--config", t("tiny.json"), "--train", t(train),
                    "--test", t(test), "--out", t(out), "--epochs", "1", *FAST]

        self.check_table([
            Row("label '1 '", finetune("label-space.csv", "test.csv", "f1"),
                [t("label-space.csv") + ":14:", "label '1 '", "space"], t("f1")),
            Row("label '1.0'", finetune("train.csv", "label-float.csv", "f2"),
                [t("label-float.csv") + ":14:", "label '1.0'", "plain integer"], t("f2")),
            Row("label '01'", finetune("label-zero.csv", "test.csv", "f3"),
                [t("label-zero.csv") + ":14:", "label '01'"], t("f3")),
            Row("a test table of N only", finetune("train.csv", "all-n.csv", "f4"),
                [t("all-n.csv"), "none of its 6 sequences has an A, C, G or T"], t("f4")),
            Row("two sequence columns", finetune("two-seq.csv", "test.csv", "f5"),
                [t("two-seq.csv") + ":1:", "two 'sequence' columns (columns 1 and 3)"], t("f5")),
            # A byte order mark is not part of the column name (and never printed raw).
            Row("BOM before a wrong header", finetune("bom.csv", "test.csv", "f6"),
                [t("bom.csv") + ":1: header 'seqs,label' lacks"], t("f6")),
        ])

    # ---- item 24: dataset enhancer, pmi-vocab --size, variants --top ---------------------

    def test_dataset_and_options(self):
        t = self.t

        def enhancer(d, out):
            return ["dataset", "enhancer", "--genome", self.fa, "--intervals", t(d), "--out", t(out)]

        self.check_table([
            Row("enhancer: a class missing from test/", enhancer("gb-missing", "d1"),
                [t("gb-missing", "test") + ":", "no file for class 'negative'"], t("d1")),
            Row("enhancer: an empty stray file", enhancer("gb-stray", "d2"),
                [t("gb-stray", "test", "notes.csv") + ":", "empty file (0 bytes)"], t("d2")),
            Row("pmi-vocab --size 0", ["pmi-vocab", "--counts", t("counts.h5"), "--out", t("v0.tsv"), "--size", "0"],
                ["--size", "0"], t("v0.tsv"), usage=True),
            Row("variants --top -5", ["variants", "--model", self.tmp, "--variants", t("v.tsv"), "--top", "-5",
                                      "--out", t("va")],
                ["--top", "'-5' is not a positive integer"], t("va"), usage=True),
            Row("variants --top 10,x", ["variants", "--model", self.tmp, "--variants", t("v.tsv"), "--top", "10,x",
                                        "--out", t("vb")],
                ["--top", "'x' is not a positive integer"], t("vb"), usage=True),
        ])


if __name__ == "__main__":
    unittest.main()
