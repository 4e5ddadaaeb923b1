#!/usr/bin/env python3
"""Many genomes (`--genomes LIST`, issue 32): the genome list's refusals, `count --genomes`
(each genome's counts against a brute-force Python count, the pool equal to their sum and to
a count of the concatenated genomes, byte-identical files at 1, 2, 3 and 4 ranks with rank
shares that cross file boundaries), and `npmi`/`pmi-vocab` of the pool and of one genome
(equal to the single-genome commands on the concatenation and on that genome's FASTA)."""
import csv
import filecmp
import gzip
import hashlib
import os
import random
import shutil
import subprocess
import tempfile
import unittest

import json

import h5py
import numpy as np

from test_cli import check_progress, python_counts, random_genome, run, summary
from test_corpus import load_samples

TINY = {"model_type": "bert", "vocab_size": 4101, "hidden_size": 32, "num_hidden_layers": 1,
        "num_attention_heads": 2, "intermediate_size": 64, "max_position_embeddings": 512,
        "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}

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
    def count(cls, ranks, extra=("--quiet",), stderr=None):
        d = tempfile.mkdtemp(dir=cls.tmp)
        p = run(["count", "--genomes", cls.list, "--out", "counts.h5", "--kmax", str(KMAX), *extra],
                cwd=d, ranks=ranks)
        if stderr is not None:
            stderr.append(p.stderr)
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
        # Progress lines over the genomes of rank 0's share (the files are smaller than one read
        # block: a line per file), the same counts (the command line, kept in the file, differs).
        stderr = []
        path, _ = self.count(2, ["--progress-interval", "1e-9"], stderr)
        check_progress(self, stderr[0], "count", least=1)
        with h5py.File(ref, "r") as a, h5py.File(path, "r") as b:
            for k in range(1, KMAX + 1):
                np.testing.assert_array_equal(a[f"counts/k{k}"][...], b[f"counts/k{k}"][...], err_msg=f"k={k}")

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
        # An empty name was "no genome": the pool was ranked without a word.
        for cmd in ("npmi", "pmi-vocab"):
            p = run([cmd, "--counts", path, "--genome", "", "--out", "x.tsv"], cwd=d, check=False)
            self.assertTrue(0 < p.returncode < 128 and p.returncode != 1, p.stderr)  # a usage error
            self.assertIn("--genome: an empty name names nothing", p.stderr)
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
            (f"a\t{human}\t0x1p3\n", 1, "weight '0x1p3' is not a positive finite number (a decimal"),
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
        # The same genome under two files (a compressed copy): pooled twice. Said once, by
        # count and by shards, at 1 and 2 ranks; a genome of other records is not.
        with open(human, "rb") as f, gzip.open(os.path.join(d, "human-copy.fa.gz"), "wb") as g:
            g.write(f.read())
        lst = os.path.join(d, "twice.tsv")
        with open(lst, "w") as f:
            f.write(f"a\t{human}\nb\thuman-copy.fa.gz\nc\t{self.concat}\n")
        for ranks in (None, 2):
            for argv in (["count", "--genomes", lst, "--out", f"twice-{ranks}.h5", "--kmax", "4", "--quiet"],
                         ["shards", "--genomes", lst, "--out", f"twice-{ranks}", "--max-tokens", "60",
                          "--min-tokens", "20"]):
                p = run(argv, cwd=d, ranks=ranks)
                self.assertEqual(p.stderr.count("has the record names and lengths of genome"), 1, p.stderr)
                self.assertIn(f"warning: {lst}:2: genome 'b' ({os.path.join(d, 'human-copy.fa.gz')}) has the record "
                              f"names and lengths of genome 'a' on line 1 ({human})", p.stderr)
                self.assertIn("if it is the same genome listed twice (a copy in another format), it is pooled twice",
                              p.stderr)
        # A list reached through a symbolic link: its relative paths are read from the link's
        # directory; one that names another existing file from the directory the link leads to
        # (a different genome of the same file name) is ambiguous, refused naming both; one
        # that names the same file from both is read.
        real, via = os.path.join(d, "real"), os.path.join(d, "via")
        os.makedirs(real)
        os.makedirs(via)
        shutil.copy(human, os.path.join(real, "g.fa"))
        shutil.copy(self.concat, os.path.join(via, "g.fa"))
        with open(os.path.join(real, "list.tsv"), "w") as f:
            f.write("a\tg.fa\n")
        os.symlink(os.path.join(real, "list.tsv"), os.path.join(via, "list.tsv"))
        lst = os.path.join(via, "list.tsv")
        for ranks in (None, 2):
            p = run(["count", "--genomes", lst, "--out", "out.h5", "--kmax", "4"], cwd=d, ranks=ranks, check=False)
            self.assertNotEqual(p.returncode, 0)
            self.assertIn(f"{lst}:1: genome 'a': the relative path 'g.fa' names {os.path.join(via, 'g.fa')} from the "
                          f"list's directory as given, but the list is reached through a symbolic link, and from the "
                          f"directory it leads to ({real}/) it names another file, {os.path.join(real, 'g.fa')}; "
                          f"write the path absolute, or give the list by its real path", p.stderr)
            self.assertEqual(p.stderr.count("error:"), 1, p.stderr)
            self.assertFalse(os.path.exists(os.path.join(d, "out.h5")))
        # Only in the directory the link leads to: not found, as before, and the refusal says where.
        os.remove(os.path.join(via, "g.fa"))
        p = run(["count", "--genomes", lst, "--out", "out.h5", "--kmax", "4"], cwd=d, check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn(f"{lst}:1: genome 'a': {os.path.join(via, 'g.fa')} does not exist", p.stderr)
        self.assertIn(f"from the directory it leads to, the path names {os.path.join(real, 'g.fa')}: give the list "
                      f"by its real path)", p.stderr)
        os.symlink(os.path.join(real, "g.fa"), os.path.join(via, "g.fa"))  # the same file from both
        got = summary(run(["count", "--genomes", lst, "--out", "via.h5", "--kmax", "4", "--quiet"], cwd=d))
        want = summary(run(["count", "--genome", human, "--out", "human.h5", "--kmax", "4", "--quiet"], cwd=d))
        self.assertEqual(got["kmers"], want["kmers"])
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
        p = run(["count", "--genomes", self.list, "--profile", "--out", "out.h5"], cwd=d, check=False)
        self.assertIn("--profile: times the read and parse of one --genome file", p.stderr)
        self.assertFalse(os.path.exists(os.path.join(d, "out.h5")))


    def shards(self, out, lst, ranks=None, extra=()):
        return summary(run(["shards", "--genomes", lst, "--out", out, "--max-tokens", "60", "--min-tokens", "20",
                            *extra], ranks=ranks))

    def test_shards_label_every_sample_and_match_across_rank_counts(self):
        got = {}
        for ranks in (None, 2, 4):
            d = os.path.join(self.tmp, f"shards-{ranks}")
            # Progress over the genomes of rank 0's share, at 1 rank (the samples are compared below).
            shown = ["--progress-interval", "1e-9"] if ranks is None else []
            p = run(["shards", "--genomes", self.list, "--out", d, "--max-tokens", "60", "--min-tokens", "20",
                     "--shard-tokens", "20000", *shown], ranks=ranks)
            s = summary(p)
            if shown:
                check_progress(self, p.stderr, "shards", least=2)
            m, samples = load_samples(d)
            genome_of = {}
            for f in m["shards"]:
                with h5py.File(os.path.join(d, f["file"]), "r") as h:
                    for idx, g in zip(h["sample_index"][...], h["genome"][...]):
                        genome_of[int(idx)] = int(g)
            got[ranks] = (samples, genome_of)
            self.assertEqual([g["name"] for g in m["genomes"]], [g[0] for g in self.genomes])
            self.assertEqual([g["name"] for g in s["genomes"]], [g[0] for g in self.genomes])
            for i, (name, _, _, seqs) in enumerate(self.genomes):
                mg = m["genomes"][i]
                self.assertEqual(mg["records"], len(seqs))
                self.assertEqual(mg["bases"], sum(len(x) for x in seqs))
                self.assertEqual(mg["weight"], i + 1)
                mine = [x for x in samples if genome_of[x[0]] == i]
                self.assertEqual(mg["samples"]["train"] + mg["samples"]["valid"], len(mine))
                self.assertEqual(mg["tokens"]["train"] + mg["tokens"]["valid"], sum(len(x[4]) for x in mine))
            # Each sample is its genome's bases at (chrom, start), tokenized.
            chroms = m["chromosomes"]
            for idx, split, chrom, start, tokens in samples[::7]:
                c = chroms[chrom]
                self.assertEqual(c["genome"], genome_of[idx])
                seqs = self.genomes[c["genome"]][3]
                bases = seqs[int(c["name"][3:]) - 1][start:start + len(tokens) + 5]
                from test_corpus import token_id
                self.assertEqual(tokens, [token_id(bases[i:i + 6]) for i in range(len(tokens))])
        self.assertEqual(got[None], got[2])
        self.assertEqual(got[None], got[4])

    def test_gene_boundaries_per_genome(self):
        # genes for "human" only: its samples stay inside gene/intergenic stretches, the
        # other genomes' samples are those of a list without genes.
        name, fname, _, seqs = self.genomes[0]
        gtf = os.path.join(self.tmp, "human.gtf")
        bounds = [(1000, 6000), (9000, 15000)]
        with open(gtf, "w") as f:
            for k, (a, b) in enumerate(bounds):
                f.write(f"chr1\ttest\tgene\t{a + 1}\t{b}\t.\t+\t.\tgene_id \"G{k}\";\n")
        lst = os.path.join(self.tmp, "genes.tsv")
        with open(self.list) as f, open(lst, "w") as out:
            for line in f:
                if line.startswith(name + "\t"):
                    line = line.rstrip("\n") + "\thuman.gtf\n"
                out.write(line)
        d1, d2 = os.path.join(self.tmp, "gb"), os.path.join(self.tmp, "nogb")
        sum1 = self.shards(d1, lst)
        self.shards(d2, self.list)
        # The summary names each genome's genes file (the list's column), not "genes": null.
        self.assertNotIn("genes", sum1)
        self.assertEqual([g["genes"] for g in sum1["genomes"]],
                         [os.path.join(self.tmp, "human.gtf") if g["name"] == name else None for g in sum1["genomes"]])
        m1, s1 = load_samples(d1)
        m2, s2 = load_samples(d2)
        self.assertEqual(m1["genomes"][0]["genes"], os.path.join(self.tmp, "human.gtf"))
        # The recipe says samples were cut at gene boundaries (it said false for a list's genes).
        self.assertTrue(m1["recipe"]["gene_boundaries"])
        self.assertFalse(m2["recipe"]["gene_boundaries"])
        cuts = sorted({x for ab in bounds for x in ab})
        human_chr1 = m1["chromosomes"].index({"name": "chr1", "length": len(seqs[0]), "genome": 0})
        for idx, split, chrom, start, tokens in s1:
            if chrom == human_chr1:
                end = start + len(tokens) + 5
                self.assertFalse(any(start < c < end for c in cuts), (start, end))
        # (the sample numbers, and so the train/valid split, move with the human candidates)
        other = lambda m, s: [x[2:] for x in s if m["chromosomes"][x[2]]["genome"] != 0]
        self.assertEqual(other(m1, s1), other(m2, s2))

    def test_pretrain_genome_weights_resume_across_an_epoch_and_log(self):
        d = tempfile.mkdtemp(dir=self.tmp)
        rng = random.Random(8)
        with open(os.path.join(d, "small.tsv"), "w") as f:
            f.write("name\tpath\tweight\n")
            for name, n, w in [("a", 3000, 1), ("b", 2000, 2), ("c", 1200, 1)]:
                with open(os.path.join(d, f"{name}.fa"), "w") as g:
                    g.write(f">chr1\n{''.join(rng.choice('ACGT') for _ in range(n))}\n")
                f.write(f"{name}\t{name}.fa\t{w}\n")
        s = self.shards(os.path.join(d, "shards"), os.path.join(d, "small.tsv"), extra=["--valid-fraction", "0"])
        train = s["samples"]["train"]
        self.assertTrue(16 * 4 < train < 16 * 9, train)  # the epoch ends between step 5 and step 9
        with open(os.path.join(d, "tiny.json"), "w") as f:
            json.dump(TINY, f)

        def pretrain(out, extra=(), weights="uniform", shards="shards", check=True, batch=8, accum=2, ranks=None):
            args = ["pretrain", "--shards", os.path.join(d, shards), "--model", os.path.join(d, "tiny.json"),
                    "--out", os.path.join(d, out), "--masking", "random", "--steps", "10", "--warmup", "1",
                    "--batch-per-rank", str(batch), "--grad-accum", str(accum), "--checkpoint-every", "4",
                    "--eval-every", "0", "--log-every", "1", "--threads", "1", *extra]
            if weights:
                args += ["--genome-weights", weights]
            return run(args, check=check, ranks=ranks)

        def lines(out):
            with open(os.path.join(d, out, "metrics.jsonl")) as f:
                return [(r["step"], r["loss"], r["grad_norm"], r["genome_tokens"]) for r in map(json.loads, f)
                        if "loss" in r]

        pretrain("a")
        want = lines("a")
        self.assertEqual([w[0] for w in want], list(range(1, 11)))
        self.assertTrue(all(set(w[3]) == {"a", "b", "c"} for w in want))
        seen = {g: sum(w[3][g] for w in want) for g in "abc"}
        self.assertTrue(all(v > 0 for v in seen.values()), seen)
        pretrain("b", ["--stop-after", "6"])  # killed after step 6: the last checkpoint is step 4
        pretrain("b", ["--resume"])
        self.assertEqual(lines("b"), want)  # exactly, across the epoch boundary
        # Each step trains the same samples at any layout of its 16 (ranks x micro-batch x
        # accumulation), across the epoch's end too: the tokens of each genome, step by step,
        # are equal. (The last N mod R of an epoch were left out, and its short last
        # micro-batch moved the steps' boundaries, by layout.) 91 samples: odd, 3 past a
        # multiple of 8.
        s91 = summary(run(["shards", "--genomes", os.path.join(d, "small.tsv"), "--out", os.path.join(d, "shards91"),
                           "--max-tokens", "62", "--min-tokens", "20", "--valid-fraction", "0"]))
        self.assertEqual(s91["samples"]["train"], 91)
        pretrain("l1x8x2", shards="shards91")
        ref = [(w[0], w[3]) for w in lines("l1x8x2")]
        for out, batch, accum, ranks in (("l1x4x4", 4, 4, None), ("l2x4x2", 4, 2, 2), ("l2x8x1", 8, 1, 2)):
            pretrain(out, batch=batch, accum=accum, ranks=ranks, shards="shards91")
            self.assertEqual([(w[0], w[3]) for w in lines(out)], ref, out)
        # The run's totals per genome (state.json, carried across the resume) go with the
        # exported model, and the report shows them: equal to the sum of the log's lines.
        for r in ("a", "b"):
            run(["export-hf", "--run", os.path.join(d, r), "--out", os.path.join(d, f"model-{r}")])
            with open(os.path.join(d, f"model-{r}", "genemask_pretraining.json")) as f:
                pj = json.load(f)
            self.assertEqual(pj["genome_tokens"], seen, r)
            self.assertEqual(pj["genome_weights"], "uniform")
            self.assertEqual(pj["step"], 10)
        from test_report import record
        with open(os.path.join(d, "plan.json"), "w") as f:
            json.dump({"models": [{"name": "tiny-a", "path": os.path.join(d, "model-a")},
                                  {"name": "tiny-b", "path": os.path.join(d, "b"),  # a run, as a sweep pins it
                                   "checkpoint": os.path.join(d, "b", "checkpoints", "step-00000010")},
                                  {"name": "tiny-x"}],
                       "tasks": ["t"]}, f)
        with open(os.path.join(d, "results.jsonl"), "w") as f:
            for m in ("tiny-a", "tiny-b", "tiny-x"):
                for seed in range(2):
                    f.write(json.dumps(record(m, "G", "t", 10, seed, acc=0.6, auc=0.7)) + "\n")
        rs = summary(run(["report", "--results", os.path.join(d, "results.jsonl"), "--plan",
                          os.path.join(d, "plan.json"), "--out", os.path.join(d, "report"), "--no-png"]))
        self.assertIn("genomes.csv", rs["files"])
        with open(os.path.join(d, "report", "genomes.csv")) as f:
            rows = list(csv.DictReader(f))
        total = sum(seen.values())
        self.assertEqual([(r["model"], r["genome"], int(r["tokens"])) for r in rows],
                         [(m, g, seen[g]) for m in ("tiny-a", "tiny-b") for g in "abc"])
        for r in rows:
            self.assertAlmostEqual(float(r["share"]), seen[r["genome"]] / total, places=12)
        # The export's file is held to its marker's SHA-256, as its other readers hold it: an
        # edited total (one genome's line left) was published as that genome's share 1.0.
        pj_path = os.path.join(d, "model-a", "genemask_pretraining.json")
        with open(pj_path) as f:
            pj_text = f.read()
        edited = json.loads(pj_text)
        edited["genome_tokens"] = {"a": seen["a"]}
        with open(pj_path, "w") as f:
            json.dump(edited, f)
        def left_out(out, why):
            """The report in OUT leaves tiny-a out of genomes.md, saying WHY."""
            p = run(["report", "--results", os.path.join(d, "results.jsonl"), "--plan", os.path.join(d, "plan.json"),
                     "--out", os.path.join(d, out), "--no-png"])
            self.assertIn(why, p.stderr)
            self.assertIn("genomes.md leaves model 'tiny-a' out", p.stderr)
            with open(os.path.join(d, out, "genomes.csv")) as f:
                self.assertEqual({r["model"] for r in csv.DictReader(f)}, {"tiny-b"})
        left_out("report3", "genemask_pretraining.json: is not the file `genemask export-hf` wrote")
        # A key given twice (an edit that pasted the totals again, the marker's digest edited
        # to match) is not read as its last value: the report leaves the model out and says why.
        text = pj_text.replace("{", '{"genome_tokens": {"a": 1}, ', 1)
        with open(pj_path, "w") as f:
            f.write(text)
        marker_path = os.path.join(d, "model-a", ".genemask.json")
        with open(marker_path) as f:
            marker = json.load(f)
        marker["files"]["genemask_pretraining.json"] = hashlib.sha256(text.encode()).hexdigest()
        with open(marker_path, "w") as f:
            json.dump(marker, f)
        left_out("report2", 'genemask_pretraining.json:2: the key "genome_tokens" appears twice in one object')
        # A changed weighting is a changed run.
        p = pretrain("b", ["--resume"], weights="list", check=False)
        self.assertIn('--genome-weights is "list" now but "uniform" in the run', p.stderr)
        # Refusals: one genome's shards, a genome without samples, a list without a weight, a bad value.
        one = os.path.join(d, "one")
        run(["shards", "--genome", os.path.join(d, "a.fa"), "--out", one, "--max-tokens", "60", "--min-tokens", "20"])
        p = pretrain("x1", weights="uniform", shards="one", check=False)
        self.assertIn("was built from one genome", p.stderr)
        with open(os.path.join(d, "n.fa"), "w") as g:
            g.write(">chr1\n" + "N" * 500 + "\n")
        with open(os.path.join(d, "withn.tsv"), "w") as f:
            f.write("a\ta.fa\nn\tn.fa\t2\n")
        p = run(["shards", "--genomes", os.path.join(d, "withn.tsv"), "--out", os.path.join(d, "withn"),
                 "--max-tokens", "60", "--min-tokens", "20"])
        self.assertIn("genome n (", p.stderr)
        self.assertIn("gives no sample", p.stderr)
        p = pretrain("x2", weights="uniform", shards="withn", check=False)
        self.assertIn("genome n has weight 1 but no sample", p.stderr)
        p = pretrain("x3", weights="list", shards="withn", check=False)
        self.assertIn("genome a has no weight in the genome list", p.stderr)
        p = pretrain("x4", weights="temperature:0", check=False)
        self.assertIn("temperature '0' is not a positive finite number", p.stderr)
        for x in ("x1", "x2", "x3", "x4"):
            self.assertFalse(os.path.exists(os.path.join(d, x, "checkpoints")), x)


if __name__ == "__main__":
    unittest.main()
