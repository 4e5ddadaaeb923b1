#!/usr/bin/env python3
"""Many genomes (`--genomes LIST`, issue 32): the genome list's refusals, `count --genomes`
(each genome's counts against a brute-force Python count, the pool equal to their sum and to
a count of the concatenated genomes, byte-identical files at 1, 2, 3 and 4 ranks with rank
shares that cross file boundaries), and `npmi`/`pmi-vocab` of the pool and of one genome
(equal to the single-genome commands on the concatenation and on that genome's FASTA)."""
import filecmp
import gzip
import os
import random
import shutil
import subprocess
import tempfile
import unittest

import h5py
import numpy as np

from test_cli import python_counts, random_genome, run, summary

KMAX = 6


class Genomes(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="genemask-genomes-")
        rng = random.Random(32)
        cls.genomes = []  # (name, file, fasta text, sequences)
        # Uneven sizes, the three FASTA forms, and the same record names (chr1, ...) in each.
        for name, fname, records, length in [("human", "human.fa", 3, (20000, 40000)),
                                             ("mouse", "mouse.fa.gz", 2, (3000, 9000)),
                                             ("fly", "fly.fa.bgz", 4, (8000, 16000)),
                                             ("yeast", "yeast.fa", 1, (500, 900))]:
            text, seqs = random_genome(rng, records=records, length=length)
            path = os.path.join(cls.tmp, fname)
            if fname.endswith(".gz"):
                with gzip.open(path, "wt") as f:
                    f.write(text)
            elif fname.endswith(".bgz"):
                plain = path + ".plain"
                with open(plain, "w") as f:
                    f.write(text)
                with open(path, "wb") as out:
                    subprocess.run(["bgzip", "-c", plain], stdout=out, check=True)
                os.unlink(plain)
            else:
                with open(path, "w") as f:
                    f.write(text)
            cls.genomes.append((name, fname, text, seqs))
        cls.list = os.path.join(cls.tmp, "genomes.tsv")
        with open(cls.list, "w") as f:
            f.write("# a comment\nname\tpath\tweight\n")
            for i, (name, fname, _, _) in enumerate(cls.genomes):
                f.write(f"{name}\t{fname}\t{i + 1}\n")
        # The concatenation, records renamed so that their names stay unique.
        cls.concat = os.path.join(cls.tmp, "all.fa")
        with open(cls.concat, "w") as f:
            for name, _, text, _ in cls.genomes:
                f.write(text.replace(">chr", f">{name}_chr"))
        cls.counts = cls.count(1)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    @classmethod
    def count(cls, ranks, extra=()):
        d = tempfile.mkdtemp(dir=cls.tmp)
        p = run(["count", "--genomes", cls.list, "--out", "counts.h5", "--kmax", str(KMAX), "--quiet", *extra],
                cwd=d, ranks=ranks)
        return os.path.join(d, "counts.h5"), summary(p)

    def test_each_genome_and_the_pool_match_python(self):
        path, s = self.counts
        pooled = {k: np.zeros(4 ** k, dtype=np.uint64) for k in range(1, KMAX + 1)}
        with h5py.File(path, "r") as h:
            self.assertEqual(h.attrs["genomes"].split("\n") if isinstance(h.attrs["genomes"], str)
                             else h.attrs["genomes"].decode().split("\n"), [g[0] for g in self.genomes])
            record_genome = list(h["records/genome"][...])
            names = [n.decode() if isinstance(n, bytes) else n for n in h["records/name"][...]]
            for i, (name, fname, _, seqs) in enumerate(self.genomes):
                ref = python_counts(seqs, KMAX)
                g = h[f"genomes/{name}"]
                self.assertEqual(int(g.attrs["index"]), i)
                self.assertEqual(int(g.attrs["acgt_bases"]), int(ref[1].sum()))
                self.assertEqual(int(g.attrs["records"]), len(seqs))
                for k in range(1, KMAX + 1):
                    np.testing.assert_array_equal(g[f"counts/k{k}"][...], ref[k], err_msg=f"{name} k={k}")
                    pooled[k] += ref[k]
                self.assertEqual(record_genome.count(i), len(seqs))
                self.assertEqual(s["genomes"][i]["name"], name)
            for k in range(1, KMAX + 1):
                np.testing.assert_array_equal(h[f"counts/k{k}"][...], pooled[k], err_msg=f"pool k={k}")
            self.assertEqual(names.count("chr1"), len(self.genomes))  # qualified by genome, not renamed
        self.assertEqual(s["acgt_bases"], int(pooled[1].sum()))

    def test_byte_identical_across_rank_counts(self):
        ref, _ = self.counts
        for ranks in (2, 3, 4):
            path, s = self.count(ranks)
            self.assertTrue(filecmp.cmp(ref, path, shallow=False), f"{ranks} ranks")
            # Every rank had a share, and the shares add up to the files.
            self.assertEqual(len(s["rank_balance"]), ranks)
            self.assertEqual(sum(r["file_bytes"] for r in s["rank_balance"]), s["file_bytes"])

    def test_pool_equals_the_concatenation_and_genome_equals_its_file(self):
        d = tempfile.mkdtemp(dir=self.tmp)
        run(["count", "--genome", self.concat, "--out", "cat.h5", "--kmax", str(KMAX), "--quiet"], cwd=d)
        name, fname = self.genomes[2][0], self.genomes[2][1]
        run(["count", "--genome", os.path.join(self.tmp, fname), "--out", "one.h5", "--kmax", str(KMAX), "--quiet"],
            cwd=d)
        path, _ = self.counts
        for cmd, extra in [("npmi", ["--k", "6", "--min-count", "5"]), ("pmi-vocab", ["--min-count", "5", "--kmax", "6",
                                                                                      "--size", "500"])]:
            run([cmd, "--counts", path, "--out", f"pool-{cmd}.tsv", *extra], cwd=d)
            run([cmd, "--counts", "cat.h5", "--out", f"cat-{cmd}.tsv", *extra], cwd=d)
            self.assertTrue(filecmp.cmp(os.path.join(d, f"pool-{cmd}.tsv"), os.path.join(d, f"cat-{cmd}.tsv"),
                                        shallow=False), cmd)
            s = summary(run([cmd, "--counts", path, "--genome", name, "--out", f"g-{cmd}.tsv", *extra], cwd=d))
            self.assertEqual(s["genome"], name)
            run([cmd, "--counts", "one.h5", "--out", f"one-{cmd}.tsv", *extra], cwd=d)
            self.assertTrue(filecmp.cmp(os.path.join(d, f"g-{cmd}.tsv"), os.path.join(d, f"one-{cmd}.tsv"),
                                        shallow=False), cmd)
        # --genome needs a list's counts and a genome it has.
        p = run(["npmi", "--counts", "one.h5", "--genome", name, "--out", "x.tsv"], cwd=d, check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("counts one genome", p.stderr)
        p = run(["npmi", "--counts", path, "--genome", "zebrafish", "--out", "x.tsv"], cwd=d, check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("has no genome 'zebrafish' (its genomes: human, mouse, fly, yeast)", p.stderr)
        self.assertFalse(os.path.exists(os.path.join(d, "x.tsv")))

    def test_bad_lists_are_refused_with_file_line_and_value(self):
        d = tempfile.mkdtemp(dir=self.tmp)
        human = os.path.join(self.tmp, "human.fa")
        open(os.path.join(d, "empty.fa"), "w").close()
        with open(os.path.join(d, "nn.fa"), "w") as f:
            f.write(">r1\nNNNNNNNN\n")
        os.symlink(human, os.path.join(d, "alias.fa"))
        cases = [
            (f"a\t{human}\nb\tmissing.fa\n", 2, "missing.fa does not exist"),
            ("a\tempty.fa\n", 1, "empty.fa is empty (0 bytes)"),
            (f"a\t{human}\na\t{self.concat}\n", 2, "genome name 'a' is already used on line 1"),
            (f"a\t{human}\nb\talias.fa\n", 2, "alias.fa is the same file as genome 'a' on line 1"),
            (f"a\t{human}\n# c\nb\t{human}\n", 3, "is the same file as genome 'a' on line 1"),
            (f"a\t{human}\t0\n", 1, "weight '0' is not a positive finite number"),
            (f"a\t{human}\t-2\n", 1, "weight '-2' is not a positive finite number"),
            (f"a\t{human}\tinf\n", 1, "weight 'inf' is not a positive finite number"),
            (f"a\t{human}\tnan\n", 1, "weight 'nan' is not a positive finite number"),
            (f"a\t{human}\t1.5x\n", 1, "weight '1.5x' is not a positive finite number"),
            (f"a b\t{human}\n", 1, "genome name 'a b' has a space"),
            (f"../a\t{human}\n", 1, "genome name '../a' starts with '.' or '-'"),
            (f"a\n", 1, "1 tab-separated column(s) in 'a'"),
            (f"a\t{human}\t1\tgenes.gtf\textra\n", 1, "5 tab-separated column(s)"),
            (f"a\t{human}\t1\tnogenes.gtf\n", 1, "genes file of genome 'a': "),
            ("# nothing\n", 0, "lists no genome"),
        ]
        for i, (text, line, message) in enumerate(cases):
            lst = os.path.join(d, f"bad{i}.tsv")
            with open(lst, "w") as f:
                f.write(text)
            for ranks in (None, 2):
                p = run(["count", "--genomes", lst, "--out", "out.h5", "--kmax", "4"], cwd=d, ranks=ranks, check=False)
                self.assertNotEqual(p.returncode, 0, text)
                where = f"{lst}:{line}: " if line else f"{lst}: "
                self.assertIn(where, p.stderr, text)
                self.assertIn(message, p.stderr, text)
                self.assertEqual(p.stderr.count("error:"), 1, p.stderr)  # one line, not one per rank
                self.assertFalse(os.path.exists(os.path.join(d, "out.h5")))
        # A genome of only N is refused by name once counted.
        lst = os.path.join(d, "nn.tsv")
        with open(lst, "w") as f:
            f.write(f"a\t{human}\nb\tnn.fa\n")
        p = run(["count", "--genomes", lst, "--out", "out.h5", "--kmax", "4"], cwd=d, check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("nn.fa: has no A, C, G or T base", p.stderr)
        self.assertFalse(os.path.exists(os.path.join(d, "out.h5")))
        self.assertEqual([f for f in os.listdir(d) if ".tmp." in f], [])
        # --genome and --genomes: one of them.
        p = run(["count", "--out", "out.h5"], cwd=d, check=False)
        self.assertIn("--genome FASTA or --genomes LIST", p.stderr)
        p = run(["count", "--genome", human, "--genomes", self.list, "--out", "out.h5"], cwd=d, check=False)
        self.assertIn("--genome excludes --genomes", p.stderr)


if __name__ == "__main__":
    unittest.main()
