#!/usr/bin/env python3
"""End-to-end tests of `genemask overlap` against a brute-force Python implementation:
per-sequence fractions of 15-mers found in the training tables and in the genome's
15-mer presence set (counts.h5 from `genemask count --presence15`), numpy percentiles
(default "linear"), the Markdown table, filtering (line-exact copy of the input), errors."""
import json
import os
import random
import shutil
import tempfile
import unittest

import numpy as np

from test_cli import run, summary
from test_corpus import write_genome

K = 15


def kmers6(seq):
    return " ".join(seq[i:i + 6] for i in range(len(seq) - 5))


def write_released(path, rows):
    with open(path, "w") as f:
        f.write('"sequence"\t"label"\n')
        f.writelines(f'"{kmers6(s)}"\t"{y}"\n' for s, y in rows)


def write_csv(path, rows):
    with open(path, "w") as f:
        f.write("sequence,label\n")
        f.writelines(f"{s},{y}\n" for s, y in rows)


def kset(seqs, k=K):
    out = set()
    for s in seqs:
        for i in range(len(s) - k + 1):
            w = s[i:i + k]
            if set(w) <= set("ACGT"):
                out.add(w)
    return out


def revcomp(s):
    return s[::-1].translate(str.maketrans("ACGT", "TGCA"))


def fraction(seq, ref, both=False, k=K):
    n = found = 0
    for i in range(len(seq) - k + 1):
        w = seq[i:i + k]
        if not set(w) <= set("ACGT"):
            continue
        n += 1
        found += w in ref or (both and revcomp(w) in ref)
    return n, (found / n if n else float("nan"))


def read_overlap(path):
    with open(path) as f:
        header = f.readline().rstrip("\n").split("\t")
        rows = [l.rstrip("\n").split("\t") for l in f]
    fl = lambda x: float(x) if x != "" else float("nan")
    return header, rows, np.array([fl(r[3]) for r in rows]), np.array([fl(r[4]) for r in rows])


def text(path):
    with open(path) as f:
        return f.read()


def same(a, b):
    return np.array_equal(np.isnan(a), np.isnan(b)) and np.array_equal(a[~np.isnan(a)], b[~np.isnan(b)])


class Overlap(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="genemask-overlap-")
        t = lambda n: os.path.join(cls.tmp, n)
        rng = random.Random(5)
        cls.genome = write_genome(t("g.fa"), rng, records=3, length=(3000, 6000))
        run(["count", "--genome", t("g.fa"), "--out", t("counts.h5"), "--presence15", "--kmax", "2", "--quiet"])
        run(["count", "--genome", t("g.fa"), "--out", t("plain.h5"), "--kmax", "2", "--quiet"])

        def piece(n):
            s = rng.choice(cls.genome)
            while True:
                i = rng.randrange(len(s) - n)
                if "N" not in s[i:i + n]:
                    return s[i:i + n]

        rand = lambda n: "".join(rng.choice("ACGT") for _ in range(n))
        cls.train1 = [(piece(80) if i % 2 else rand(80), i % 2) for i in range(60)]
        cls.train2 = [(rand(70), i % 2) for i in range(20)]
        test = []
        for i in range(50):
            kind = i % 5
            if kind == 0:  # a training sequence with a few substitutions
                s = list(rng.choice(cls.train1)[0])
                for _ in range(3):
                    s[rng.randrange(len(s))] = rng.choice("ACGT")
                s = "".join(s)
            elif kind == 1:
                s = piece(90)
            elif kind == 2:
                s = rand(90)
            elif kind == 3:  # half from train2, half random, an N inside
                s = rng.choice(cls.train2)[0][:40] + "N" + rand(40)
            else:  # a reverse-complemented training sequence
                s = revcomp(rng.choice(cls.train1)[0])
            test.append((s, i % 2))
        test.append((cls.train1[3][0], 1))        # a training sequence as is
        test.append(("ACGTNACGTNACGTNACGTN", 0))  # no valid 15-mer
        test.append(("ACGTACGTAC", 1))            # shorter than 15
        cls.test = test
        write_released(t("train1.tsv"), cls.train1)
        write_csv(t("train2.csv"), cls.train2)
        write_released(t("test.tsv"), test)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def t(self, n):
        return os.path.join(self.tmp, n)

    def overlap(self, out, *extra, check=True):
        return run(["overlap", "--test", self.t("test.tsv"), "--out", self.t(out), *extra], check=check)

    def test_fractions_percentiles_and_table_match_python(self):
        p = self.overlap("o1", "--train", self.t("train1.tsv"), "--train", self.t("train2.csv"),
                         "--counts", self.t("counts.h5"), "--task", "Prom-test")
        s = summary(p)
        train = kset([x for x, _ in self.train1 + self.train2])
        corpus = kset(self.genome)
        exp_n, exp_tr, exp_co = [], [], []
        for seq, _ in self.test:
            n, f = fraction(seq, train)
            exp_n.append(n)
            exp_tr.append(f)
            exp_co.append(fraction(seq, corpus)[1])
        exp_tr, exp_co = np.array(exp_tr), np.array(exp_co)
        header, rows, got_tr, got_co = read_overlap(self.t("o1/overlap.tsv"))
        self.assertEqual(header, ["line", "label", "kmers", "fraction_train", "fraction_corpus"])
        self.assertEqual([int(r[0]) for r in rows], list(range(2, len(self.test) + 2)))
        self.assertEqual([r[1] for r in rows], [str(y) for _, y in self.test])
        self.assertEqual([int(r[2]) for r in rows], exp_n)
        self.assertTrue(same(got_tr, exp_tr), (got_tr, exp_tr))
        self.assertTrue(same(got_co, exp_co), (got_co, exp_co))
        # the data exercise both ends: some fractions 0, some 1, some in between
        fin = exp_tr[~np.isnan(exp_tr)]
        self.assertTrue((fin == 0).any() and (fin == 1).any() and ((fin > 0) & (fin < 1)).any())
        self.assertTrue((exp_co[~np.isnan(exp_co)] == 1).any())

        j = json.loads(text(self.t("o1/summary.json")))
        self.assertEqual(j["n_test"], len(self.test))
        self.assertEqual(j["no_kmers"], 2)
        self.assertEqual(s["no_kmers"], 2)
        for src, exp in [("train", exp_tr), ("corpus", exp_co)]:
            v = exp[~np.isnan(exp)]
            self.assertEqual(j["sources"][src]["n"], len(v))
            self.assertAlmostEqual(j["sources"][src]["median"], np.percentile(v, 50), places=12)
            self.assertAlmostEqual(j["sources"][src]["p95"], np.percentile(v, 95), places=12)
            self.assertAlmostEqual(j["sources"][src]["mean"], v.mean(), places=12)
        self.assertEqual(j["sources"]["train"]["distinct_kmers"], len(train))
        self.assertAlmostEqual(s["train_p95"], np.percentile(exp_tr[~np.isnan(exp_tr)], 95), places=12)
        md = text(self.t("o1/overlap.md"))
        vt, vc = exp_tr[~np.isnan(exp_tr)], exp_co[~np.isnan(exp_co)]
        row = (f"| Prom-test | {np.percentile(vt, 50):.3f} ({np.percentile(vt, 95):.3f}) | "
               f"{np.percentile(vc, 50):.3f} ({np.percentile(vc, 95):.3f}) |")
        self.assertIn(row, md)

    def test_both_strands_and_other_k(self):
        train = kset([x for x, _ in self.train1])
        self.overlap("o2", "--train", self.t("train1.tsv"), "--both-strands")
        _, _, got, co = read_overlap(self.t("o2/overlap.tsv"))
        exp = np.array([fraction(s, train, both=True)[1] for s, _ in self.test])
        self.assertTrue(same(got, exp))
        self.assertTrue(np.isnan(co).all())  # no corpus given: empty column
        fwd = np.array([fraction(s, train)[1] for s, _ in self.test])
        self.assertGreater(np.nansum(exp), np.nansum(fwd))  # reverse-complemented tests now count
        t8 = kset([x for x, _ in self.train1], 8)
        self.overlap("o3", "--train", self.t("train1.tsv"), "--k", "8")
        _, _, got8, _ = read_overlap(self.t("o3/overlap.tsv"))
        self.assertTrue(same(got8, np.array([fraction(s, t8, k=8)[1] for s, _ in self.test])))

    def test_filtering_copies_the_input_lines(self):
        train = kset([x for x, _ in self.train1 + self.train2])
        fr = np.array([fraction(s, train)[1] for s, _ in self.test])
        src = text(self.t("test.tsv")).split("\n")
        for arg, thr in [("0.5", 0.5), ("p90", np.percentile(fr[~np.isnan(fr)], 90))]:
            # The second pass writes over the first's table: an existing --filtered is replaced
            # only with --force (a filtered table looks like any task table; issue 31).
            p = self.overlap(f"o4-{arg}", "--train", self.t("train1.tsv"), "--train", self.t("train2.csv"),
                             "--drop-above", arg, "--filtered", self.t("filtered.tsv"), *(["--force"] if arg == "p90" else []))
            drop = {i + 2 for i, f in enumerate(fr) if not np.isnan(f) and f > thr}
            self.assertGreater(len(drop), 0)
            self.assertEqual(summary(p)["dropped"], len(drop))
            expect = "\n".join(l for i, l in enumerate(src) if i + 1 not in drop)
            self.assertEqual(text(self.t("filtered.tsv")), expect)
            j = json.loads(text(self.t(f"o4-{arg}/summary.json")))
            self.assertAlmostEqual(j["filter"]["threshold"], thr, places=12)
            self.assertEqual(j["filter"]["kept"], len(self.test) - len(drop))
        # by the corpus fraction
        corpus = kset(self.genome)
        fc = np.array([fraction(s, corpus)[1] for s, _ in self.test])
        self.overlap("o5", "--counts", self.t("counts.h5"), "--drop-above", "0.99", "--filtered", self.t("f2.tsv"))
        kept = text(self.t("f2.tsv")).count("\n") - 1
        self.assertEqual(kept, len(self.test) - int(np.sum(fc[~np.isnan(fc)] > 0.99)))
        # by the larger of the two
        fm = np.fmax(fr, fc)
        p = self.overlap("o6", "--train", self.t("train1.tsv"), "--train", self.t("train2.csv"), "--counts",
                         self.t("counts.h5"), "--drop-source", "max", "--drop-above", "0.3", "--filtered", self.t("f3.tsv"))
        drop = {i + 2 for i, f in enumerate(fm) if not np.isnan(f) and f > 0.3}
        self.assertGreater(len(drop), int(np.sum(fr[~np.isnan(fr)] > 0.3)))
        self.assertEqual(text(self.t("f3.tsv")), "\n".join(l for i, l in enumerate(src) if i + 1 not in drop))

    def test_filtering_drops_every_line_of_a_record(self):
        # A label quoted across lines (RFC 4180): the dropped record's every line goes, else its
        # last line read back as a row of its own, the dropped sequence under a junk label.
        seen = self.train1[0][0]
        fresh = "".join(random.Random(5).choice("ACGT") for _ in range(60))
        with open(self.t("ml.csv"), "w") as f:
            f.write(f'label,sequence\n"prom\nA",{seen}\n1,{fresh}\n"x\ny\nz",{fresh}\n0,{seen}\n')
        p = run(["overlap", "--test", self.t("ml.csv"), "--train", self.t("train1.tsv"), "--out", self.t("o7"),
                 "--drop-above", "0.5", "--filtered", self.t("ml.f.csv")])
        self.assertEqual(summary(p)["dropped"], 2)
        self.assertEqual(text(self.t("ml.f.csv")), f'label,sequence\n1,{fresh}\n"x\ny\nz",{fresh}\n')
        p = run(["overlap", "--test", self.t("ml.f.csv"), "--train", self.t("train1.tsv"), "--out", self.t("o8")])
        self.assertEqual(json.loads(text(self.t("o8/summary.json")))["n_test"], 2)

    def test_a_table_cut_short_is_listed_in_the_summaries(self):
        # A test or training table whose last line has no line end is read as it is, said on
        # stderr, and listed (unterminated_inputs) in the summary line and in summary.json.
        def cut(name):
            body = text(self.t(name))
            self.assertTrue(body.endswith("\n"))
            path = self.t("cut-" + name)
            with open(path, "w") as f:
                f.write(body[:-1])
            return path
        test, train = cut("test.tsv"), cut("train2.csv")
        p = run(["overlap", "--test", test, "--train", self.t("train1.tsv"), "--train", train, "--out",
                 self.t("o-cut")])
        self.assertEqual(summary(p)["unterminated_inputs"], [test, train])
        self.assertEqual(json.loads(text(self.t("o-cut/summary.json")))["unterminated_inputs"], [test, train])
        self.assertEqual(p.stderr.count("the last line has no line end"), 2, p.stderr)
        p = self.overlap("o-whole", "--train", self.t("train1.tsv"))
        self.assertNotIn("unterminated_inputs", summary(p))
        self.assertNotIn("unterminated_inputs", json.loads(text(self.t("o-whole/summary.json"))))

    def test_errors(self):
        p = self.overlap("e1", "--counts", self.t("plain.h5"), check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("presence", p.stderr)
        p = self.overlap("e2", "--counts", self.t("counts.h5"), "--k", "13", check=False)
        self.assertIn("--k 15", p.stderr)
        p = self.overlap("e3", check=False)
        self.assertIn("--train", p.stderr)
        p = self.overlap("e4", "--train", self.t("train1.tsv"), "--drop-above", "0.5", check=False)
        self.assertIn("--filtered", p.stderr)
        p = self.overlap("e5", "--train", self.t("train1.tsv"), "--drop-above", "x", "--filtered", self.t("x.tsv"),
                         check=False)
        self.assertIn("'x'", p.stderr)
        self.assertFalse(os.path.exists(self.t("x.tsv")))
        self.assertFalse(os.path.exists(self.t("e5/overlap.tsv")))
        # A fraction outside [0, 1]: 50 for the paper's 50% dropped nothing, -0.1 every row.
        for bad in ["50", "-0.1", "1.0001"]:
            p = self.overlap("e5b", "--train", self.t("train1.tsv"), "--drop-above", bad, "--filtered", self.t("x.tsv"),
                             check=False)
            self.assertEqual(p.returncode, 1, p.stderr)
            self.assertIn(f"--drop-above {bad} is not a fraction in [0, 1]", p.stderr)
            self.assertIn("give 0.5", p.stderr)
            self.assertFalse(os.path.exists(self.t("x.tsv")))
            self.assertFalse(os.path.exists(self.t("e5b")))
        with open(self.t("bad.tsv"), "w") as f:
            f.write("sequence,label\nACGT1,0\n")
        p = run(["overlap", "--test", self.t("bad.tsv"), "--train", self.t("train1.tsv"), "--out", self.t("e6")],
                check=False)
        self.assertIn("bad.tsv:2", p.stderr)
        # --drop-source alone did nothing, without a word.
        p = self.overlap("e7", "--train", self.t("train1.tsv"), "--drop-source", "train", check=False)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("--drop-source chooses the fraction --drop-above filters by", p.stderr)
        self.assertFalse(os.path.exists(self.t("e7")))
        self.assertIn("--drop-above", run(["overlap", "--help"]).stdout)


if __name__ == "__main__":
    unittest.main()
