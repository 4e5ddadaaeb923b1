#!/usr/bin/env python3
"""End-to-end tests of `genemask dataset promoter` and `genemask dataset enhancer` on a
genome generated here. The expected windows come from a separate, deliberately simple
Python implementation (slicing + reverse complement), not from the tool's code.
FinetuneOnDataset (registered only with LibTorch) runs `genemask finetune` on the result."""
import gzip
import hashlib
import json
import os
import random
import shutil
import sys
import tempfile
import unittest

from test_cli import run, summary

COMP = {"A": "T", "C": "G", "G": "C", "T": "A", "N": "N"}
TINY = {"model_type": "bert", "vocab_size": 4101, "hidden_size": 32, "num_hidden_layers": 1,
        "num_attention_heads": 2, "intermediate_size": 64, "max_position_embeddings": 512}


def rc(s):
    return "".join(COMP.get(c, c) for c in reversed(s))


def make_genome(rng, path, lengths):
    """Soft-masked FASTA with a few N runs; returns {name: upper-case sequence}."""
    seqs = {}
    with open(path, "w") as f:
        for i, n in enumerate(lengths):
            s = [rng.choice("ACGT") for _ in range(n)]
            for _ in range(n // 3000):  # N runs
                p = rng.randrange(n - 20)
                s[p:p + rng.randint(1, 15)] = "N" * len(s[p:p + 15])
            s = "".join(s)[:n]
            name = f"chr{i + 1}"
            seqs[name] = s
            masked = "".join(c.lower() if (j // 100) % 3 == 0 else c for j, c in enumerate(s))
            f.write(f">{name} generated\n")
            for j in range(0, n, 61):
                f.write(masked[j:j + 61] + "\n")
    return seqs


def expected_window(seqs, chrom, tss, strand, first, last):
    """Bases first..last (inclusive, relative to the TSS) read on the TSS's strand; None
    when the window leaves the chromosome, 'N' when it holds a non-ACGT base."""
    s = seqs[chrom]
    lo, hi = (tss + first, tss + last) if strand == "+" else (tss - last, tss - first)
    if lo < 0 or hi >= len(s):
        return None
    w = s[lo:hi + 1]
    if strand == "-":
        w = rc(w)
    return "N" if set(w) - set("ACGT") else w


def read_plain(path):
    with open(path) as f:
        assert f.readline() == "sequence\tlabel\tid\n"
        return [tuple(l.rstrip("\n").split("\t")) for l in f]


def read_released(path):
    """The published few-shot layout, parsed strictly: quoted header, quoted 6-mer text,
    bare label."""
    rows = []
    with open(path) as f:
        assert f.readline() == '"sequence"\t"label"\n'
        for line in f:
            text, label = line.rstrip("\n").split("\t")
            assert text[0] == '"' and text[-1] == '"', line
            kms = text[1:-1].split(" ")
            assert all(len(k) == 6 for k in kms)
            for a, b in zip(kms, kms[1:]):
                assert a[1:] == b[:5], (a, b)
            rows.append((kms[0] + "".join(k[-1] for k in kms[1:]), label))
    return rows


def slurp(path):
    with open(path) as f:
        return f.read()


def spit(path, text):
    with open(path, "w") as f:
        f.write(text)


def parts(n):
    return [(i * n // 20, (i + 1) * n // 20) for i in range(20)]


class PromoterTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="gm-dataset-")
        rng = random.Random(3)
        cls.seqs = make_genome(rng, os.path.join(cls.tmp, "g.fa"), [30000, 20000, 9000])
        cls.sites = []
        for i in range(400):
            chrom = rng.choice(list(cls.seqs))
            n = len(cls.seqs[chrom])
            # some sites close to the ends, so that windows run off
            pos = rng.choice([rng.randrange(n), rng.randrange(40), n - 1 - rng.randrange(40)])
            cls.sites.append((chrom, pos, rng.choice("+-"), f"P{i}"))
        with open(os.path.join(cls.tmp, "t.bed"), "w") as f:
            f.write("track name=tss\n")
            for c, p, s, nm in cls.sites:
                f.write(f"{c}\t{p}\t{p + 1}\t{nm}\t900\t{s}\n")
        with open(os.path.join(cls.tmp, "t.sga"), "w") as f:
            for c, p, s, nm in cls.sites:
                f.write(f"{c}\tTSS\t{p + 1}\t{s}\t1\t{nm}\n")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp)

    def build(self, out, *extra, tss="t.bed"):
        p = run(["dataset", "promoter", "--genome", os.path.join(self.tmp, "g.fa"), "--tss",
                 os.path.join(self.tmp, tss), "--out", os.path.join(self.tmp, out), *extra])
        return summary(p), p

    def expected(self, first, last):
        exp, drops = {}, {"off_chromosome": 0, "contains_n": 0}
        for c, p, s, nm in self.sites:
            w = expected_window(self.seqs, c, p, s, first, last)
            if w is None:
                drops["off_chromosome"] += 1
            elif w == "N":
                drops["contains_n"] += 1
            else:
                exp[nm] = w
        return exp, drops

    def check_dataset(self, out, first, last, shuffle=False):
        exp, drops = self.expected(first, last)
        d = os.path.join(self.tmp, out)
        rows = read_plain(os.path.join(d, "train.tsv")) + read_plain(os.path.join(d, "test.tsv"))
        pos = {i.split("|")[1]: s for s, y, i in rows if y == "1"}
        neg = {i.split("|")[1]: s for s, y, i in rows if y == "0"}
        # Each negative is in its positive's split (it keeps 8 of the positive's 20 parts: split
        # apart, the test split held near copies of training positives), and the training
        # share is still about 70% (binomial over the pairs, 5 sd).
        split_of = {}
        for split in ("train", "test"):
            for _, y, i in read_plain(os.path.join(d, f"{split}.tsv")):
                split_of[(i.split("|")[1], y)] = split
        pairs = [nm for nm in neg if (nm, "1") in split_of]
        self.assertGreater(len(pairs), 100)
        self.assertEqual([nm for nm in pairs if split_of[(nm, "0")] != split_of[(nm, "1")]], [])
        in_train = sum(split_of[(nm, "1")] == "train" for nm in pairs)
        self.assertLess(abs(in_train - 0.7 * len(pairs)), 5 * (0.21 * len(pairs)) ** 0.5)
        # Every positive the reference expects, except exact duplicates of an earlier one.
        uniq = {}
        for nm, w in exp.items():
            uniq.setdefault(w, nm)
        self.assertEqual({nm: exp[nm] for nm in uniq.values()}, pos)
        L = last - first + 1
        for nm, n in neg.items():
            p = exp[nm]
            self.assertEqual(len(n), L)
            same = [n[a:b] == p[a:b] for a, b in parts(L)]
            self.assertGreaterEqual(sum(same), 8)  # 8 kept, others equal only by chance
            if shuffle:
                for a, b in parts(L):
                    self.assertEqual(sorted(n[a:b]), sorted(p[a:b]))
        s = json.loads(slurp(os.path.join(d, "summary.json")))
        self.assertGreater(min(drops.values()), 0, "the generated input should exercise both drop reasons")
        self.assertGreater(len(pos), 100)
        for k, v in drops.items():
            self.assertEqual(s["dropped"].get(k, 0), v, k)
        self.assertEqual(s["classes"]["1"]["total"], len(pos))
        self.assertEqual(s["train"] + s["test"], len(rows))
        return rows, s

    def test_prom_core_bed(self):
        s, p = self.build("core", "--window", "-34:35", "--shots", "10,20", "--seed", "5")
        rows, js = self.check_dataset("core", -34, 35)
        self.assertEqual(s["classes"], js["classes"])
        self.assertIn("class 1:", p.stderr)
        # split close to 70/30 (binomial, 5 sd)
        n = len(rows)
        train = len(read_plain(os.path.join(self.tmp, "core", "train.tsv")))
        self.assertLess(abs(train - 0.7 * n), 5 * (0.21 * n) ** 0.5)
        # Released layout == plain tables; few-shot files n per class from train.
        d = os.path.join(self.tmp, "core")
        for split in ("train", "test"):
            plain = [(s_, y) for s_, y, _ in read_plain(os.path.join(d, f"{split}.tsv"))]
            self.assertEqual(read_released(os.path.join(d, "fewshot", f"{split}.tsv")), plain)
        train_set = {(s_, y) for s_, y, _ in read_plain(os.path.join(d, "train.tsv"))}
        for k in (10, 20):
            few = read_released(os.path.join(d, "fewshot", str(k), "train.tsv"))
            self.assertEqual(sorted(y for _, y in few), ["0"] * k + ["1"] * k)
            self.assertTrue(set(few) <= train_set)
        # Same seed: identical outputs; SGA gives the same dataset.
        self.build("core2", "--window", "-34:35", "--shots", "10,20", "--seed", "5")
        self.build("core_sga", "--window=-34:35", "--shots", "10,20", "--seed", "5", tss="t.sga")
        for f in ("train.tsv", "test.tsv", "fewshot/train.tsv", "fewshot/10/train.tsv"):
            a = slurp(os.path.join(d, f))
            self.assertEqual(a, slurp(os.path.join(self.tmp, "core2", f)), f)
            self.assertEqual(a, slurp(os.path.join(self.tmp, "core_sga", f)), f)
        self.build("core3", "--window", "-34:35", "--seed", "6")
        self.assertNotEqual(slurp(os.path.join(d, "train.tsv")), slurp(os.path.join(self.tmp, "core3", "train.tsv")))

    def test_prom300_shuffle(self):
        self.build("p300", "--preset", "prom-300", "--negatives", "shuffle")
        self.check_dataset("p300", -249, 50, shuffle=True)
        # Below 60 bp a part is 1-2 bases, which a shuffle barely changes: the negatives were
        # near copies of their positives under the other label. Refused; 60 bp works.
        out = os.path.join(self.tmp, "short-shuffle")
        p = run(["dataset", "promoter", "--genome", os.path.join(self.tmp, "g.fa"), "--tss",
                 os.path.join(self.tmp, "t.bed"), "--out", out, "--window=-20:19", "--negatives", "shuffle"], check=False)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("--negatives shuffle needs a window of at least 60 bp (parts of 3 bases or more to shuffle); "
                      "the window is 40 bp", p.stderr)
        self.assertFalse(os.path.exists(out))
        self.build("shuffle60", "--window=-30:29", "--negatives", "shuffle")
        self.check_dataset("shuffle60", -30, 29, shuffle=True)

    def test_errors(self):
        bad = os.path.join(self.tmp, "bad.bed")
        with open(bad, "w") as f:
            f.write("chr1\t100\t101\tA\t900\t+\nchr3\t9000\t9001\tB\t900\t-\n")
        p = run(["dataset", "promoter", "--genome", os.path.join(self.tmp, "g.fa"), "--tss", bad,
                 "--out", os.path.join(self.tmp, "bad")], check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("bad.bed:2:", p.stderr)
        self.assertIn("beyond the end of 'chr3' (9000 bp)", p.stderr)
        with open(bad, "w") as f:
            f.write("chr1\t100\t101\tA\t900\t+\nchrQ\t10\t11\tB\t900\t-\n")
        p = run(["dataset", "promoter", "--genome", os.path.join(self.tmp, "g.fa"), "--tss", bad,
                 "--out", os.path.join(self.tmp, "bad")], check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("bad.bed:2:", p.stderr)
        self.assertIn("'chrQ'", p.stderr)
        self.assertIn("chr1, chr2, chr3", p.stderr)
        p = run(["dataset", "promoter", "--genome", os.path.join(self.tmp, "g.fa"), "--tss",
                 os.path.join(self.tmp, "t.bed"), "--out", os.path.join(self.tmp, "bad"), "--shots", "5000"],
                check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("--shots 5000: class '0' has only", p.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "bad", "train.tsv")))

    def test_rebuild_replaces_the_whole_task(self):
        """Rebuilding into the same --out with another seed (issue 21, item 23): refused
        without --force; with it, no few-shot set of the old split survives, each new one is
        drawn from the new training split and shares no row with the new test split, and a
        file the user put there stays."""
        out = os.path.join(self.tmp, "rebuild")
        self.build("rebuild", "--seed", "1", "--shots", "10,20")
        spit(os.path.join(out, "my-notes.txt"), "mine\n")
        old_test = read_plain(os.path.join(out, "test.tsv"))
        p = run(["dataset", "promoter", "--genome", os.path.join(self.tmp, "g.fa"), "--tss",
                 os.path.join(self.tmp, "t.bed"), "--out", out, "--seed", "2", "--shots", "15"], check=False)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("earlier output of `genemask dataset promoter`", p.stderr)
        self.assertEqual(read_plain(os.path.join(out, "test.tsv")), old_test)
        self.build("rebuild", "--seed", "2", "--shots", "15", "--force")
        self.assertEqual(sorted(os.listdir(os.path.join(out, "fewshot"))), ["15", "test.tsv", "train.tsv"])
        train = {r[0] for r in read_plain(os.path.join(out, "train.tsv"))}
        test = {r[0] for r in read_plain(os.path.join(out, "test.tsv"))}
        self.assertNotEqual(test, {r[0] for r in old_test})  # another split
        shots = read_released(os.path.join(out, "fewshot", "15", "train.tsv"))
        self.assertEqual(len(shots), 30)
        self.assertTrue({r[0] for r in shots} <= train)
        self.assertFalse({r[0] for r in shots} & test)
        self.assertEqual(slurp(os.path.join(out, "my-notes.txt")), "mine\n")
        self.assertEqual(json.loads(slurp(os.path.join(out, "summary.json")))["options"]["seed"], 2)


    def test_tables_cut_or_changed_after_the_build_are_refused(self):
        """The marker records the SHA-256 of every table, inside fewshot/ too; every reader of
        a task table checks it. A copy cut at a line end (every line whole, fewer examples)
        was read as a smaller task; a table under fewshot/ of an output whose publication was
        cut short was read too (only DIR's own files were checked)."""
        out = os.path.join(self.tmp, "digests")
        self.build("digests", "--shots", "10")
        marker = json.loads(slurp(os.path.join(out, ".genemask.json")))
        tables = ["fewshot/10/train.tsv", "fewshot/test.tsv", "fewshot/train.tsv", "summary.json", "test.tsv",
                  "train.tsv"]
        self.assertEqual(sorted(marker["files"]), tables)
        for t in tables:
            with open(os.path.join(out, t), "rb") as f:
                self.assertEqual(marker["files"][t], hashlib.sha256(f.read()).hexdigest(), t)
        shots, test = os.path.join(out, "fewshot", "10", "train.tsv"), os.path.join(out, "fewshot", "test.tsv")

        def overlap(name, train=shots):
            return run(["overlap", "--test", test, "--train", train, "--k", "6", "--out",
                        os.path.join(self.tmp, name)], check=False)
        self.assertEqual(overlap("ov-whole").returncode, 0)
        whole = slurp(shots)
        lines = whole.splitlines(keepends=True)
        spit(shots, "".join(lines[:-3]))  # cut at a line end: 3 examples fewer
        p = overlap("ov-cut")
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn(shots + ": is not the file `genemask dataset promoter` wrote (SHA-256 ", p.stderr)
        self.assertIn("it was cut short, changed or replaced since", p.stderr.replace("\n", " "))
        spit(shots, whole)
        # A file of the user's inside the output is not genemask's: read as it is.
        spit(os.path.join(out, "mine.tsv"), "".join(lines[:-3]))
        self.assertEqual(overlap("ov-mine", train=os.path.join(out, "mine.tsv")).returncode, 0)
        # An output whose publication was cut short: its tables under fewshot/ are refused too.
        marker["complete"] = False
        spit(os.path.join(out, ".genemask.json"), json.dumps(marker))
        p = overlap("ov-incomplete")
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn(f"{test}: is in {out}, an incomplete output of `genemask dataset promoter`", p.stderr)


class EnhancerTest(unittest.TestCase):
    def test_genomic_benchmarks_layout(self):
        tmp = tempfile.mkdtemp(prefix="gm-enh-")
        try:
            rng = random.Random(9)
            seqs = make_genome(rng, os.path.join(tmp, "g.fa"), [40000, 25000])
            expected, drops = {"t": {}, "e": {}}, {"off_chromosome": 0, "contains_n": 0}
            for split, sub in (("t", "train"), ("e", "test")):
                os.makedirs(os.path.join(tmp, "gb", sub))
                for cls, label in (("positive", "1"), ("negative", "0")):
                    lines = ["id,region,start,end,strand"]
                    for i in range(60):
                        chrom = rng.choice(list(seqs))
                        n = len(seqs[chrom])
                        start = rng.choice([rng.randrange(n - 500), n - rng.randrange(1, 400)])
                        strand = rng.choice("+-")
                        lines.append(f"{i},{chrom},{start},{start + 500},{strand}")
                        w = seqs[chrom][start:start + 500]
                        if start + 500 > n:
                            drops["off_chromosome"] += 1
                        elif set(w) - set("ACGT"):
                            drops["contains_n"] += 1
                        else:
                            expected[split].setdefault(rc(w) if strand == "-" else w, label)
                    text = "\n".join(lines) + "\n"
                    path = os.path.join(tmp, "gb", sub, cls + ".csv")
                    if cls == "negative":
                        with gzip.open(path + ".gz", "wt") as f:
                            f.write(text)
                    else:
                        spit(path, text)
            out = os.path.join(tmp, "out")
            p = run(["dataset", "enhancer", "--genome", os.path.join(tmp, "g.fa"), "--intervals",
                     os.path.join(tmp, "gb"), "--out", out, "--shots", "5"])
            s = summary(p)
            self.assertEqual(s["options"]["split"], "given")
            self.assertGreater(min(drops.values()), 0)
            for k, v in drops.items():
                self.assertEqual(s["dropped"].get(k, 0), v, k)
            got_train = {q: y for q, y, _ in read_plain(os.path.join(out, "train.tsv"))}
            got_test = {q: y for q, y, _ in read_plain(os.path.join(out, "test.tsv"))}
            # train is first in input order, so a test window equal to a train one is a duplicate
            exp_test = {q: y for q, y in expected["e"].items() if q not in expected["t"]}
            self.assertEqual(got_train, expected["t"])
            self.assertEqual(got_test, exp_test)
            self.assertEqual(len(read_released(os.path.join(out, "fewshot", "5", "train.tsv"))), 10)
            self.assertTrue(os.path.exists(os.path.join(out, "fewshot", "test.tsv")))
        finally:
            shutil.rmtree(tmp)


class FinetuneOnDataset(unittest.TestCase):
    """The released layout is what `genemask finetune` (and a sweep task dir) reads."""

    def test_finetune_runs(self):
        tmp = tempfile.mkdtemp(prefix="gm-dsft-")
        try:
            rng = random.Random(4)
            seqs = make_genome(rng, os.path.join(tmp, "g.fa"), [20000])
            with open(os.path.join(tmp, "t.bed"), "w") as f:
                for i in range(150):
                    p = rng.randrange(300, 19700)
                    f.write(f"chr1\t{p}\t{p + 1}\tP{i}\t900\t{rng.choice('+-')}\n")
            out = os.path.join(tmp, "ds")
            run(["dataset", "promoter", "--genome", os.path.join(tmp, "g.fa"), "--tss", os.path.join(tmp, "t.bed"),
                 "--out", out, "--shots", "10"])
            spit(os.path.join(tmp, "tiny.json"), json.dumps(TINY))
            p = run(["finetune", "--model", "random", "--config", os.path.join(tmp, "tiny.json"), "--train",
                     os.path.join(out, "fewshot", "10", "train.tsv"), "--test", os.path.join(out, "fewshot", "test.tsv"),
                     "--out", os.path.join(tmp, "ft"), "--threads", "1", "--epochs", "1"])
            s = summary(p)
            self.assertEqual(s["n_train"], 20)
            self.assertEqual(s["n_test"], len(read_released(os.path.join(out, "fewshot", "test.tsv"))))
            self.assertEqual(s["classes"], 2)
        finally:
            shutil.rmtree(tmp)


if __name__ == "__main__":
    unittest.main(argv=sys.argv)
