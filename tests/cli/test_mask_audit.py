#!/usr/bin/env python3
"""The masking audit of `genemask mask-stats --by-kmer` (issue 33) against an independent
re-implementation in plain Python of the paper's masking as the reference notes write it
(random: centres with p = 0.025, each masking [c-2, c+3]; GeneMask: centres with p = 0.0176,
tau the best-ranked 6-mer of [c-2, c+3], the better ceil(m/2) centres, all when m <= 8,
masking [tau-5, tau+5], the rest [c-2, c+3]) and of the audit itself, on the same samples
read from the shards with h5py. The random stream is genemask's counter-based SplitMix64
(include/genemask/rng.hpp), written out again here, so the masks and every count must be
equal, not close."""
import csv
import itertools
import json
import math
import os
import random
import shutil
import tempfile
import unittest

import h5py
import numpy as np

from test_cli import run, summary
from test_corpus import write_genome

M64 = (1 << 64) - 1
VOCAB = ["".join(p) for p in itertools.product("ATCG", repeat=6)]  # token id - 5 -> 6-mer
MASK_STREAM = 1


def splitmix(x):
    x = (x + 0x9E3779B97F4A7C15) & M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M64
    return x ^ (x >> 31)


class Rng:
    def __init__(self, seed, purpose, a=0, b=0):
        self.state = splitmix(splitmix(splitmix(seed ^ 0x6A09E667F3BCC908) ^ purpose) ^ a) ^ \
            splitmix((b + 0x3C6EF372FE94F82B) & M64)

    def next(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & M64
        return splitmix((self.state - 0x9E3779B97F4A7C15) & M64)

    def uniform(self):
        return (self.next() >> 11) * 2.0 ** -53

    def geometric(self, log1m_p):
        g = math.floor(math.log(1.0 - self.uniform()) / log1m_p)
        return 1 << 62 if g > 1e18 else int(g)


def centres(n, p, rng):
    """A Bernoulli(p) process over n positions, drawn as gaps."""
    log1m_p = math.log1p(-p)
    out, c = [], rng.geometric(log1m_p)
    while c < n:
        out.append(c)
        c += 1 + rng.geometric(log1m_p)
    return out


def mask_random(tokens, rng):
    n = len(tokens)
    masked = [False] * n
    for c in centres(n, 0.025, rng):
        for i in range(max(c - 2, 0), min(c + 3, n - 1) + 1):
            masked[i] = True
    return masked


def mask_genemask(tokens, rng, rank):
    """rank: 6-mer -> GRANK (1 = highest NPMI)."""
    n = len(tokens)
    picks = []
    for c in centres(n, 0.0176, rng):
        window = range(max(c - 2, 0), min(c + 3, n - 1) + 1)
        tau = min(window, key=lambda i: rank[VOCAB[tokens[i] - 5]])  # the first best on ties
        picks.append((rank[VOCAB[tokens[tau] - 5]], c, tau))
    picks.sort(key=lambda x: x[0])  # stable: centres of equal rank keep their order
    high = len(picks) if len(picks) <= 8 else (len(picks) + 1) // 2
    masked = [False] * n
    for k, (_, c, tau) in enumerate(picks):
        lo, hi = (tau - 5, tau + 5) if k < high else (c - 2, c + 3)
        for i in range(max(lo, 0), min(hi, n - 1) + 1):
            masked[i] = True
    return masked


def audit(samples, masks):
    """The audit written from its definition: per 6-mer counts, position deciles, the ends,
    spans, and for leakage the bases each unmasked token shows (token k shows k..k+5)."""
    a = {"kmer_n": {}, "kmer_m": {}, "dec_n": [0] * 10, "dec_m": [0] * 10, "edge_n": 0, "edge_m": 0, "spans": {},
         "span_count": 0, "leaking_spans": 0, "leaking_tokens": 0, "hidden": 0, "tokens": 0, "masked": 0,
         "by_hidden": [0] * 7}
    for tokens, masked in zip(samples, masks):
        n = len(tokens)
        a["tokens"] += n
        a["masked"] += sum(masked)
        shown = [False] * (n + 5)  # bases
        for k in range(n):
            if not masked[k]:
                for x in range(k, k + 6):
                    shown[x] = True
        for j, t in enumerate(tokens):
            kmer = VOCAB[t - 5]
            a["kmer_n"][kmer] = a["kmer_n"].get(kmer, 0) + 1
            a["kmer_m"][kmer] = a["kmer_m"].get(kmer, 0) + masked[j]
            a["dec_n"][j * 10 // n] += 1
            a["dec_m"][j * 10 // n] += masked[j]
            if j < 5 or j >= n - 5:
                a["edge_n"] += 1
                a["edge_m"] += masked[j]
        j = 0
        while j < n:
            if not masked[j]:
                j += 1
                continue
            b = j
            while b + 1 < n and masked[b + 1]:
                b += 1
            a["spans"][b - j + 1] = a["spans"].get(b - j + 1, 0) + 1
            a["span_count"] += 1
            a["hidden"] += sum(not shown[x] for x in range(j, b + 6))
            hidden = [sum(not shown[x] for x in range(k, k + 6)) for k in range(j, b + 1)]
            for h in hidden:
                a["by_hidden"][h] += 1
            a["leaking_tokens"] += hidden.count(0)
            a["leaking_spans"] += 0 in hidden
            j = b + 1
    return a


class MaskAudit(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="genemask-audit-")
        t = cls.t
        write_genome(t("g.fa"), random.Random(33), records=3, length=(40000, 60000))
        run(["count", "--genome", t("g.fa"), "--out", t("c.h5"), "--quiet"])
        run(["npmi", "--counts", t("c.h5"), "--out", t("npmi.tsv"), "--min-count", "3"])
        # short samples too, so that spans are clipped by the ends and some centres are few
        run(["shards", "--genome", t("g.fa"), "--out", t("shards"), "--min-tokens", "5", "--max-tokens", "200"])
        with open(t("npmi.tsv")) as f:
            cls.rank = {r["kmer"]: int(r["rank"]) for r in csv.DictReader(f, delimiter="\t")}
        with open(t("shards", "manifest.json")) as f:
            manifest = json.load(f)
        samples = []
        for s in manifest["shards"]:
            if s["split"] != "train":
                continue
            with h5py.File(t("shards", s["file"])) as h:
                off, tok, idx = h["offsets"][...], h["tokens"][...], h["sample_index"][...]
                samples += [(int(idx[i]), [int(x) for x in tok[off[i]:off[i + 1]]]) for i in range(len(idx))]
        samples.sort()
        # mask-stats takes --samples spread evenly over the split (k x size // n), not its
        # first ones (those of the first chromosome).
        cls.split_samples = len(samples)
        n = min(1500, len(samples) * 2 // 3)
        cls.samples = [samples[k * len(samples) // n] for k in range(n)]

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    @classmethod
    def t(cls, *names):
        return os.path.join(cls.tmp, *names)

    def check(self, strategy, mask, extra):
        t = self.t
        seed, epoch = 7, 1
        tsv = t(f"by-kmer-{strategy}.tsv")
        p = run(["mask-stats", "--shards", t("shards"), "--masking", strategy, "--samples",
                 str(len(self.samples)), "--seed", str(seed), "--epoch", str(epoch), "--by-kmer", tsv,
                 "--flag-factor", "1.5", "--min-occurrences", "20", *extra])
        s = summary(p)
        # The summary and the first line say what the figures are of.
        self.assertEqual((s["split"], s["split_samples"], s["seed"], s["epoch"]),
                         ("train", self.split_samples, seed, epoch))
        self.assertIn(f"{len(self.samples)} of {self.split_samples} train samples", p.stderr.splitlines()[0])
        masks = [mask(tokens, Rng(seed, MASK_STREAM, epoch, index)) for index, tokens in self.samples]
        a = audit([tokens for _, tokens in self.samples], masks)
        self.assertEqual((s["samples"], s["tokens"], s["masked_tokens"]), (len(self.samples), a["tokens"], a["masked"]))
        self.assertGreater(a["masked"], 0)
        self.assertEqual(s["span_histogram"], {str(k): v for k, v in sorted(a["spans"].items())})
        self.assertEqual([d["tokens"] for d in s["by_position"]], a["dec_n"])
        self.assertEqual([d["masked"] for d in s["by_position"]], a["dec_m"])
        self.assertAlmostEqual(s["edges"]["masked_fraction_edges"], a["edge_m"] / a["edge_n"], places=15)
        self.assertAlmostEqual(s["edges"]["masked_fraction_middle"],
                               (a["masked"] - a["edge_m"]) / (a["tokens"] - a["edge_n"]), places=15)
        lk = s["leakage"]
        self.assertEqual((lk["spans"], lk["leaking_spans"], lk["leaking_tokens"]),
                         (a["span_count"], a["leaking_spans"], a["leaking_tokens"]))
        self.assertAlmostEqual(lk["hidden_bases_per_span"], a["hidden"] / a["span_count"], places=12)
        self.assertEqual(lk["masked_tokens_by_hidden_bases"], a["by_hidden"])
        self.assertAlmostEqual(lk["hidden_bases_per_masked_token"],
                               sum(h * c for h, c in enumerate(a["by_hidden"])) / a["masked"], places=12)
        frac = a["masked"] / a["tokens"]
        with open(tsv) as f:
            rows = list(csv.DictReader(f, delimiter="\t"))
        self.assertEqual([r["kmer"] for r in rows], VOCAB)  # vocabulary order
        high = low = 0
        for r in rows:
            n, m = a["kmer_n"].get(r["kmer"], 0), a["kmer_m"].get(r["kmer"], 0)
            self.assertEqual((int(r["occurrences"]), int(r["masked"])), (n, m), r)
            self.assertEqual(int(r["grank"]), self.rank[r["kmer"]])
            if n:
                self.assertAlmostEqual(float(r["relative"]), m / n / frac, places=12)
            flag = "high" if n >= 20 and m / n / frac > 1.5 else "low" if n >= 20 and m / n / frac < 1 / 1.5 else ""
            self.assertEqual(r["flag"], flag, r)
            high += flag == "high"
            low += flag == "low"
            motif = ",".join(x for x, ok in (("GT", r["kmer"].startswith("GT")), ("AG", r["kmer"].endswith("AG"))) if ok)
            self.assertEqual(r["splice_motif"], motif)
        self.assertEqual((s["by_kmer"]["flagged_high"], s["by_kmer"]["flagged_low"]), (high, low))
        for which, test in (("GT", lambda k: k.startswith("GT")), ("AG", lambda k: k.endswith("AG"))):
            occ = sum(v for k, v in a["kmer_n"].items() if test(k))
            msk = sum(v for k, v in a["kmer_m"].items() if test(k))
            self.assertEqual((s["by_kmer"]["splice_motifs"][which]["occurrences"],
                              s["by_kmer"]["splice_motifs"][which]["masked"]), (occ, msk))
        return s

    def test_random_masking(self):
        s = self.check("random", mask_random, ["--npmi", self.t("npmi.tsv")])
        # A centre masks 6 tokens: each masked 6-mer of an interior 6-span has exactly one
        # base hidden, the other five shown by its unmasked neighbours.
        by_hidden = s["leakage"]["masked_tokens_by_hidden_bases"]
        self.assertEqual(max(range(7), key=lambda h: by_hidden[h]), 1)

    def test_genemask_masking(self):
        s = self.check("genemask", lambda tokens, rng: mask_genemask(tokens, rng, self.rank),
                       ["--npmi", self.t("npmi.tsv")])
        # GeneMask prefers high-NPMI 6-mers: its top GRANK decile is masked more than the bottom;
        # its 11-token spans hide all six bases of tau.
        self.assertGreater(s["grank_deciles"][0]["lift"], s["grank_deciles"][-1]["lift"])
        self.assertGreater(s["leakage"]["masked_tokens_by_hidden_bases"][6], 0)

    def test_by_kmer_is_a_file_output_of_its_own(self):
        t = self.t
        with open(t("mine.tsv"), "w") as f:
            f.write("my table\n")
        p = run(["mask-stats", "--shards", t("shards"), "--masking", "random", "--by-kmer", t("mine.tsv")], check=False)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("is not an earlier output of `genemask mask-stats`", p.stderr)
        p = run(["mask-stats", "--shards", t("shards"), "--masking", "random", "--by-kmer",
                 t("shards", "by-kmer.tsv")], check=False)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("shards", p.stderr)
        with open(t("mine.tsv")) as f:
            self.assertEqual(f.read(), "my table\n")


if __name__ == "__main__":
    unittest.main()
