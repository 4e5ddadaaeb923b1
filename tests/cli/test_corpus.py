#!/usr/bin/env python3
"""End-to-end tests of `genemask shards`, `mask-stats` and `vocab`, checked with h5py,
itertools and a plain Python re-implementation of the segment cutting."""
import itertools
import json
import os
import random
import shutil
import signal
import subprocess
import tempfile
import time
import unittest

import h5py
import numpy as np

from test_cli import BIN, ENV, MPIEXEC, check_progress, run, summary

ATCG = "ATCG"


def token_id(kmer):
    v = 0
    for c in kmer:
        v = v * 4 + ATCG.index(c)
    return 5 + v


def write_genome(path, rng, records=3, length=(20000, 60000)):
    seqs = []
    with open(path, "w") as f:
        for r in range(records):
            n = rng.randint(*length)
            s = "".join(rng.choices("ACGTacgt", k=n))
            # a few N gaps, some of them long
            for _ in range(4):
                p = rng.randrange(n - 300)
                g = rng.choice([1, 50, 250])
                s = s[:p] + "N" * g + s[p + g:]
            seqs.append(s.upper())
            f.write(f">chr{r + 1}\n" + "".join(s[i:i + 70] + "\n" for i in range(0, len(s), 70)))
    return seqs


def load_samples(d, split=None):
    with open(os.path.join(d, "manifest.json")) as f:
        m = json.load(f)
    out = []
    for s in m["shards"]:
        if split and s["split"] != split:
            continue
        with h5py.File(os.path.join(d, s["file"]), "r") as h:
            assert h.attrs["format"] == "genemask-shard"
            assert h["tokens"].dtype == np.uint16
            off = h["offsets"][...]
            tok = h["tokens"][...]
            for i, idx in enumerate(h["sample_index"][...]):
                out.append((int(idx), s["split"], int(h["chrom"][i]), int(h["start"][i]),
                            tok[off[i]:off[i + 1]].tolist()))
    out.sort()
    return m, out


class Corpus(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="genemask-corpus-")
        cls.fa = os.path.join(cls.tmp, "g.fa")
        cls.seqs = write_genome(cls.fa, random.Random(5))

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def shards(self, out, ranks=None, extra=()):
        return summary(run(["shards", "--genome", self.fa, "--out", out, "--seed", "7", *extra], ranks=ranks))

    def test_vocab_matches_itertools(self):
        out = os.path.join(self.tmp, "vocab.txt")
        run(["vocab", "--out", out])
        with open(out) as f:
            lines = f.read().splitlines()
        want = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + ["".join(p) for p in itertools.product("ATCG", repeat=6)]
        self.assertEqual(lines, want)
        run(["vocab", "--out", out])  # its own earlier output: replaced (the same bytes)
        # Every BERT vocabulary starts with [PAD]: another model's vocab.txt (a DNABERT-3's) is
        # not genemask's, and is replaced only with --force.
        other = os.path.join(self.tmp, "dnabert3-vocab.txt")
        mine = "\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] +
                         ["".join(p) for p in itertools.product("ATCG", repeat=3)]) + "\n"
        with open(other, "w") as f:
            f.write(mine)
        p = run(["vocab", "--out", other], check=False)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("is not an earlier output of `genemask vocab` (it is not genemask's vocab.txt)", p.stderr)
        with open(other) as f:
            self.assertEqual(f.read(), mine)
        run(["vocab", "--out", other, "--force"])
        with open(other) as f:
            self.assertEqual(f.read().splitlines(), want)
        # An empty output name (an unset shell variable) is refused before any work.
        p = run(["vocab", "--out", ""], check=False)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("--out is empty: an empty name names nothing; give a file name", p.stderr)

    def test_same_samples_for_any_rank_count_and_valid_segments(self):
        results = {}
        # Progress lines (rank 0's share of both passes) at 2 ranks, none with --quiet at 4: the
        # samples are the same either way.
        for ranks, shown in [(None, []), (2, ["--progress-interval", "1e-9"]), (4, ["--quiet"])]:
            d = os.path.join(self.tmp, f"s{ranks}")
            p = run(["shards", "--genome", self.fa, "--out", d, "--seed", "7", "--shard-tokens", "20000", *shown],
                    ranks=ranks)
            s = summary(p)
            if shown == ["--quiet"]:
                self.assertNotIn("[genemask shards]", p.stderr)
            elif shown:
                check_progress(self, p.stderr, "shards", least=2)  # one read block: a line per pass
            results[ranks] = load_samples(d)
            self.assertEqual(s["segments_kept"], len(results[ranks][1]))
        self.assertEqual(results[None][1], results[2][1])
        self.assertEqual(results[None][1], results[4][1])
        m, samples = results[None]
        self.assertEqual([c["name"] for c in m["chromosomes"]], ["chr1", "chr2", "chr3"])
        self.assertEqual([c["length"] for c in m["chromosomes"]], [len(s) for s in self.seqs])
        valid = sum(1 for s in samples if s[1] == "valid")
        self.assertGreater(valid, 0.05 * len(samples))
        self.assertLess(valid, 0.15 * len(samples))
        full = 0
        for idx, split, chrom, start, tokens in samples:
            n = len(tokens)
            self.assertTrue(5 <= n <= 510)
            full += n == 510
            bases = self.seqs[chrom][start:start + n + 5]
            self.assertNotIn("N", bases)
            self.assertEqual(tokens, [token_id(bases[i:i + 6]) for i in range(n)])
        self.assertGreater(full / len(samples), 0.35)
        # No kept segment overlaps another in the same chromosome.
        by_chrom = {}
        for idx, split, chrom, start, tokens in samples:
            by_chrom.setdefault(chrom, []).append((start, start + len(tokens) + 5))
        for spans in by_chrom.values():
            spans.sort()
            for a, b in zip(spans, spans[1:]):
                self.assertLessEqual(a[1], b[0])

    def test_gene_boundaries_are_respected(self):
        gtf = os.path.join(self.tmp, "genes.gtf")
        bounds = [(2000, 7000), (15000, 15500), (30000, 36000)]
        with open(gtf, "w") as f:
            f.write("#comment\n")
            for s, e in bounds:  # GTF is 1-based inclusive: [s, e) 0-based is s+1..e
                f.write(f"1\ttest\tgene\t{s + 1}\t{e}\t.\t+\t.\tgene_id \"g{s}\";\n")
        d = os.path.join(self.tmp, "gb")
        self.shards(d, 2, ["--genes", gtf])
        _, samples = load_samples(d)
        cuts = sorted({x for b in bounds for x in b})
        crossing = [s for s in samples if s[2] == 0 and any(s[3] < c < s[3] + len(s[4]) + 5 for c in cuts)]
        self.assertEqual(crossing, [])
        bad = os.path.join(self.tmp, "bad.gtf")
        with open(bad, "w") as f:
            f.write("1\ttest\tgene\t100\tx\t.\t+\t.\tgene_id \"a\";\n")
        p = run(["shards", "--genome", self.fa, "--out", os.path.join(self.tmp, "bad"), "--genes", bad], check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn(f"{bad}:1: column 5 (end) is not a positive integer: 'x'", p.stderr)

    def test_genes_on_other_sequences_are_reported(self):
        # Regression: names that match no record were ignored silently (exit 0), and genes
        # past a record's end were accepted.
        other = os.path.join(self.tmp, "other.gff3")
        with open(other, "w") as f:
            f.write("NC_000001.11\tsrc\tgene\t101\t5000\t.\t+\t.\tID=a\n")
        out = os.path.join(self.tmp, "other")
        p = run(["shards", "--genome", self.fa, "--out", out, "--genes", other], check=False)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn(f"{other}: none of its 1 genes lies on a sequence of the genome", p.stderr)
        self.assertFalse(os.path.exists(os.path.join(out, "manifest.json")))
        some = os.path.join(self.tmp, "some.gff3")
        with open(some, "w") as f:
            f.write("1\tsrc\tgene\t101\t5000\t.\t+\t.\tID=a\n")
            f.write("scaf9\tsrc\tgene\t101\t5000\t.\t+\t.\tID=b\n")
            f.write("scaf9\tsrc\tgene\t7101\t9000\t.\t+\t.\tID=c\n")
        for ranks in (1, 2):
            p = run(["shards", "--genome", self.fa, "--out", os.path.join(self.tmp, f"some{ranks}"), "--genes", some],
                    ranks=ranks)
            s = summary(p)
            self.assertEqual((s["genes_read"], s["genes_on_unknown_sequences"], s["unknown_sequences"]), (3, 2, 1))
            self.assertIn(f"2 of the 3 genes in {some} lie on 1 sequence(s) the genome does not have (first: scaf9)",
                          p.stderr)
        past = os.path.join(self.tmp, "past.gff3")
        end = len(self.seqs[0])
        with open(past, "w") as f:
            f.write("1\tsrc\tgene\t101\t5000\t.\t+\t.\tID=a\n")
            f.write(f"1\tsrc\tgene\t{end - 100}\t{end + 1}\t.\t+\t.\tID=b\n")
        p = run(["shards", "--genome", self.fa, "--out", os.path.join(self.tmp, "past"), "--genes", past], check=False)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn(f"{past}:2: a gene on 1 ends at {end + 1}, past the end of chr1 ({end} bases) in the genome", p.stderr)

    def test_mrna_only_gff3_gives_the_genes_of_its_transcripts(self):
        # A fungal-style GFF3: mRNA and CDS lines, no gene lines. Two isoforms of one locus
        # overlap (merged into one gene), one locus is on the minus strand.
        mrnas = [(2000, 6000, "+"), (2500, 7000, "+"), (15000, 15500, "-"), (30000, 36000, "+")]
        only = os.path.join(self.tmp, "mrna-only.gff3")
        with open(only, "w") as f:
            f.write("##gff-version 3\n")
            for i, (a, b, st) in enumerate(mrnas):
                f.write(f"1\tsrc\tmRNA\t{a + 1}\t{b}\t.\t{st}\t.\tID=m{i}\n")
                f.write(f"1\tsrc\tCDS\t{a + 11}\t{b - 10}\t.\t{st}\t0\tParent=m{i}\n")
        # The reference: the same loci written as gene lines (the isoforms' union).
        genes = os.path.join(self.tmp, "as-genes.gff3")
        with open(genes, "w") as f:
            for i, (a, b, st) in enumerate([(2000, 7000, "+"), (15000, 15500, "-"), (30000, 36000, "+")]):
                f.write(f"1\tsrc\tgene\t{a + 1}\t{b}\t.\t{st}\t.\tID=g{i}\n")
        a, b = os.path.join(self.tmp, "gb-mrna"), os.path.join(self.tmp, "gb-gene")
        p = run(["shards", "--genome", self.fa, "--out", a, "--seed", "7", "--genes", only])
        s = summary(p)
        self.assertEqual(s["gene_source"], "mRNA/transcript spans (no gene lines)")
        self.assertEqual(s["gene_transcripts"], 4)
        self.assertIn(f"no 'gene' features in {only}: using the spans of its 4 mRNA/transcript lines", p.stderr)
        r = self.shards(b, None, ["--genes", genes])
        self.assertEqual(r["gene_source"], "gene lines")
        self.assertEqual(load_samples(a)[1], load_samples(b)[1])
        for key in ["segments_kept", "samples", "tokens"]:
            self.assertEqual(s[key], r[key], key)

    def test_interrupted_run_leaves_no_corrupt_set(self):
        big = os.path.join(self.tmp, "big.fa")
        write_genome(big, random.Random(9), records=3, length=(6_000_000, 6_000_001))
        ref = os.path.join(self.tmp, "ref")
        run(["shards", "--genome", big, "--out", ref, "--shard-tokens", "50000"])
        _, want = load_samples(ref)
        # One directory per kill: a run that finished before its kill leaves a complete
        # output, which the next run would rightly refuse to replace without --force.
        interrupted = None
        for k, delay in enumerate([0.02, 0.1, 0.25]):
            d = os.path.join(self.tmp, f"interrupted-{k}")
            cmd = [os.path.abspath(BIN), "shards", "--genome", big, "--out", d, "--shard-tokens", "50000"]
            p = subprocess.Popen(cmd, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(delay)
            p.send_signal(signal.SIGKILL)
            p.wait()
            manifest = os.path.join(d, "manifest.json")
            if os.path.exists(manifest):  # finished before the kill: then it must be complete
                _, got = load_samples(d)
                self.assertEqual(got, want)
            else:
                interrupted = d
            if not os.path.isdir(d):  # killed before it made its directory (a loaded machine): nothing to check
                continue
            for name in os.listdir(d):  # no file under a final name is partial
                if name.endswith(".h5"):
                    with h5py.File(os.path.join(d, name), "r") as h:
                        self.assertEqual(h.attrs["format"], "genemask-shard")
        self.assertIsNotNone(interrupted, "no kill landed before the run finished; use a larger genome")
        # The next run on a killed run's --out cleans up after it and completes.
        d = interrupted
        run(["shards", "--genome", big, "--out", d, "--shard-tokens", "50000"])
        _, got = load_samples(d)
        self.assertEqual(got, want)
        with open(os.path.join(d, "manifest.json")) as f:
            listed = {s["file"] for s in json.load(f)["shards"]}
        self.assertEqual({n for n in os.listdir(d) if n.endswith(".h5")}, listed)

    def test_mask_stats(self):
        d = os.path.join(self.tmp, "ms")
        self.shards(d)
        s = summary(run(["mask-stats", "--shards", d, "--masking", "random", "--samples", "2000"]))
        self.assertAlmostEqual(s["masked_fraction"], 0.14, delta=0.015)
        with open(os.path.join(d, "manifest.json")) as f:
            train = sum(sh["samples"] for sh in json.load(f)["shards"] if sh["split"] == "train")
        self.assertEqual((s["split"], s["split_samples"], s["seed"], s["epoch"], s["samples"]),
                         ("train", train, 42, 0, min(2000, train)))
        # Only rank 0 masks: the same summary at 1, 2 and 4 ranks.
        outs = {r: run(["mask-stats", "--shards", d, "--masking", "random", "--samples", "300", "--split", "valid",
                        "--seed", "5", "--epoch", "2"], ranks=r).stdout for r in (1, 2, 4)}
        self.assertEqual(outs[1], outs[2])
        self.assertEqual(outs[1], outs[4])
        v = summary(run(["mask-stats", "--shards", d, "--masking", "random", "--split", "valid", "--seed", "5",
                         "--epoch", "2", "--samples", "300"]))
        self.assertEqual((v["split"], v["seed"], v["epoch"]), ("valid", 5, 2))
        self.assertAlmostEqual(s["replacement"]["mask"], 0.8, delta=0.02)
        self.assertIn("6", s["span_histogram"])
        p = run(["mask-stats", "--shards", d, "--masking", "genemask"], check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("needs --npmi", p.stderr)
        p = run(["mask-stats", "--shards", self.tmp, "--masking", "random"], check=False)
        self.assertIn("manifest.json: cannot open", p.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
