#!/usr/bin/env python3
"""End-to-end tests of `genemask variants`: a tiny classifier fine-tuned with
`genemask finetune --save-model`, variants on a generated genome (VCF: SNVs, a
multi-allelic line, indels, a symbolic allele, a window off the chromosome) or as a TSV of
sequence pairs. Probabilities against an independent forward pass in plain
torch.nn.functional (tests/model/classifier_reference.py), windows cut in Python, delta and
ranking and the top-N overlap recomputed in Python; the REF mismatch error."""
import itertools
import json
import os
import random
import re
import shutil
import tempfile
import unittest

import numpy as np
import torch

import classifier_reference as ref
from test_cli import run, summary
from test_corpus import write_genome

TINY = {"model_type": "bert", "vocab_size": 4101, "hidden_size": 32, "num_hidden_layers": 2,
        "num_attention_heads": 2, "intermediate_size": 64, "max_position_embeddings": 512}
VOCAB = {"".join(p): 5 + i for i, p in enumerate(itertools.product("ATCG", repeat=6))}


def token_ids(seq):
    """DNABERT-6 ids, independent of the C++ tokenizer; a k-mer with N is [UNK] = 1."""
    return [2] + [VOCAB.get(seq[i:i + 6], 1) for i in range(len(seq) - 5)][:510] + [3]


def text(path):
    with open(path) as f:
        return f.read()


def read_tsv(path):
    lines = text(path).rstrip("\n").split("\n")
    header = lines[0].split("\t")
    return [dict(zip(header, l.split("\t"))) for l in lines[1:]]


class Variants(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="genemask-variants-")
        t = cls.t = staticmethod(lambda n: os.path.join(cls.tmp, n))
        rng = random.Random(9)
        with open(t("tiny.json"), "w") as f:
            json.dump(TINY, f)

        def seq(label):
            s = [rng.choice("ACGT") for _ in range(rng.randint(60, 90))]
            if label:
                i = rng.randrange(len(s) - 6)
                s[i:i + 6] = "TATAAA"
            return "".join(s)

        for name, n in [("train.csv", 200), ("test.csv", 20)]:
            with open(t(name), "w") as f:
                f.write("sequence,label\n")
                for i in range(n):
                    f.write(f"{seq(i % 2)},{['neg', 'prom'][i % 2]}\n")
        run(["finetune", "--model", "random", "--config", t("tiny.json"), "--train", t("train.csv"), "--test",
             t("test.csv"), "--out", t("ft"), "--epochs", "12", "--batch", "10", "--lr", "2e-3", "--threads", "2", "--save-model", t("clf")])
        cls.cfg, cls.w = ref.load(t("clf"))

        cls.genome = write_genome(t("g.fa"), rng, records=2, length=(3000, 5000))
        lines = ["##fileformat=VCFv4.2", "#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO"]
        cls.expected = []  # (line, id, chrom, pos, ref, alt) per allele scored with --flank 40
        cls.sites = []
        for i in range(40):
            r = rng.randrange(2)
            g = cls.genome[r]
            while True:
                p = rng.randrange(60, len(g) - 60)
                if "N" not in g[p - 45:p + 45]:
                    break
            chrom = f"chr{r + 1}" if i % 3 else str(r + 1)  # "1" matches chr1
            kind = i % 8
            if kind == 0:
                refa, alts = g[p], [b for b in "ACGT" if b != g[p]][:2]  # multi-allelic
            elif kind == 1:
                refa, alts = g[p:p + 3], [g[p]]  # deletion
            elif kind == 2:
                refa, alts = g[p], [g[p] + "TATAAA"]  # insertion of the motif
            elif kind == 3:
                refa, alts = g[p], ["<DEL>"]  # symbolic: skipped
            else:
                refa, alts = g[p], [rng.choice([b for b in "ACGT" if b != g[p]])]
            lines.append(f"{chrom}\t{p + 1}\tv{i}\t{refa}\t{','.join(alts)}\t.\t.\t.")
            for a in alts:
                if a != "<DEL>":
                    cls.expected.append((len(lines), f"v{i}", chrom, p + 1, refa, a, r))
        # a variant 10 bases from the start of chr2: off the chromosome for --flank 40
        lines.append(f"chr2\t11\tedge\t{cls.genome[1][10]}\t{'A' if cls.genome[1][10] != 'A' else 'C'}")
        with open(t("v.vcf"), "w") as f:
            f.write("\n".join(lines) + "\n")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def window(self, e, before, after):
        _, _, _, pos, refa, alt, r = e
        g, p = self.genome[r], pos - 1
        left, right = g[p - before:p], g[p + len(refa):p + len(refa) + after]
        self.assertEqual(g[p:p + len(refa)], refa)
        return left + refa + right, left + alt + right

    def prob(self, seqs, cls_index=1):
        out = []
        with torch.no_grad():
            for s in seqs:
                ids = torch.tensor([token_ids(s)])
                logits = ref.logits(self.cfg, self.w, ids, torch.ones_like(ids))
                out.append(torch.softmax(logits.double(), -1)[0, cls_index].item())
        return np.array(out)

    def check_ranking(self, rows):
        d = np.array([float(r["delta"]) for r in rows])
        self.assertEqual([int(r["rank"]) for r in rows], list(range(1, len(rows) + 1)))
        np.testing.assert_array_equal(d, np.array([float(r["p_alt"]) - float(r["p_ref"]) for r in rows]))
        self.assertTrue(np.all(np.diff(np.abs(d)) <= 0))
        self.assertGreater(np.abs(d).max(), 1e-3)  # the model reacts to some variants

    def test_vcf_probabilities_match_python_forward(self):
        p = run(["variants", "--model", self.t("clf"), "--variants", self.t("v.vcf"), "--genome", self.t("g.fa"),
                 "--flank", "40", "--out", self.t("out1"), "--threads", "2", "--batch", "7",
                 "--precision", "fp32"])  # compared with an fp32 forward
        s = summary(p)
        self.assertEqual(s["n"], len(self.expected))
        self.assertEqual(s["off_chromosome"], 1)
        self.assertEqual(s["skipped_symbolic"], 5)
        self.assertEqual(s["class"], "prom")
        rows = read_tsv(self.t("out1/variants.tsv"))
        self.assertEqual(list(rows[0].keys()), ["id", "chrom", "pos", "ref", "alt", "p_ref", "p_alt", "delta", "rank"])
        self.check_ranking(rows)
        got = {(r["id"], r["alt"]): r for r in rows}
        self.assertEqual(len(got), len(self.expected))
        refs, alts = zip(*[self.window(e, 40, 40) for e in self.expected])
        self.assertTrue(all(len(x) == 81 for x, e in zip(refs, self.expected) if len(e[4]) == 1))
        pr, pa = self.prob(refs), self.prob(alts)
        for e, a, b in zip(self.expected, pr, pa):
            r = got[(e[1], e[5])]
            self.assertEqual((r["chrom"], int(r["pos"]), r["ref"]), (e[2], e[3], e[4]))
            self.assertAlmostEqual(float(r["p_ref"]), a, delta=1e-5)
            self.assertAlmostEqual(float(r["p_alt"]), b, delta=1e-5)
        # ties by input order: the expected order is a stable sort of input order by |delta|
        order = sorted(range(len(rows)), key=lambda i: -abs(float(rows[i]["delta"])))
        self.assertEqual(order, list(range(len(rows))))

        # --class by index 0 is the complement of class 1; an explicit window
        run(["variants", "--model", self.t("clf"), "--variants", self.t("v.vcf"), "--genome", self.t("g.fa"),
             "--window", "-30:20", "--class", "0", "--out", self.t("out2"), "--precision", "fp32"])
        rows2 = read_tsv(self.t("out2/variants.tsv"))
        got2 = {(r["id"], r["alt"]): r for r in rows2}
        refs2, _ = zip(*[self.window(e, 30, 20) for e in self.expected])
        for e, a in zip(self.expected, self.prob(refs2, 0)):
            self.assertAlmostEqual(float(got2[(e[1], e[5])]["p_ref"]), a, delta=1e-5)
        self.check_ranking(rows2)

    def test_tsv_input_and_compare(self):
        refs, alts = zip(*[self.window(e, 40, 40) for e in self.expected])
        with open(self.t("pairs.tsv"), "w") as f:
            f.write("id\tref_sequence\talt_sequence\n")
            for i, (a, b) in enumerate(zip(refs, alts)):
                f.write(f"p{i}\t{a.lower() if i % 2 else a}\t{b}\n")
        run(["variants", "--model", self.t("clf"), "--variants", self.t("pairs.tsv"), "--out", self.t("out3"),
             "--precision", "fp32"])
        rows = read_tsv(self.t("out3/variants.tsv"))
        self.check_ranking(rows)
        pr, pa = self.prob(refs), self.prob(alts)
        for r in rows:
            i = int(r["id"][1:])
            self.assertAlmostEqual(float(r["p_ref"]), pr[i], delta=1e-5)
            self.assertAlmostEqual(float(r["p_alt"]), pa[i], delta=1e-5)
            self.assertEqual(r["chrom"], "")

        # another ranking of the same pairs (by id, with a delta column only) -> top-N overlap
        rng = random.Random(4)
        other_delta = {f"p{i}": rng.uniform(-1, 1) for i in range(len(refs))}
        with open(self.t("other.tsv"), "w") as f:
            f.write("id\tdelta\n")
            f.writelines(f"{k}\t{v}\n" for k, v in other_delta.items())
        p = run(["variants", "--model", self.t("clf"), "--variants", self.t("pairs.tsv"), "--out", self.t("out4"),
                 "--compare", self.t("other.tsv"), "--top", "5,10,20,1000"])
        self.assertIn(f"--top 1000: left out, more than the {len(refs)} variants of", p.stderr)
        mine = [r["id"] for r in read_tsv(self.t("out4/variants.tsv"))]
        theirs = sorted(other_delta, key=lambda k: -abs(other_delta[k]))
        cmp = read_tsv(self.t("out4/compare.tsv"))
        self.assertEqual([int(r["n"]) for r in cmp], [5, 10, 20])  # 1000 > number of variants: left out
        for r in cmp:
            n = int(r["n"])
            shared = len(set(mine[:n]) & set(theirs[:n]))
            self.assertEqual(int(r["shared"]), shared)
            self.assertAlmostEqual(float(r["overlap"]), shared / n, places=12)
        self.assertEqual(summary(p)["top_overlap"][0]["n"], 5)
        # The same ranking gzipped, with a byte-order mark and CRLF line ends (as a spreadsheet
        # saves it), read as every table is: the same overlaps. An empty one is refused.
        import gzip
        with gzip.open(self.t("other.tsv.gz"), "wb") as f:
            f.write(("\ufeffid\tdelta\r\n" + "".join(f"{k}\t{v}\r\n" for k, v in other_delta.items())).encode())
        run(["variants", "--model", self.t("clf"), "--variants", self.t("pairs.tsv"), "--out", self.t("out4gz"),
             "--compare", self.t("other.tsv.gz"), "--top", "5,10,20"])
        self.assertEqual(read_tsv(self.t("out4gz/compare.tsv")), cmp)
        open(self.t("empty.tsv"), "w").close()
        p = run(["variants", "--model", self.t("clf"), "--variants", self.t("pairs.tsv"), "--out", self.t("out-empty"),
                 "--compare", self.t("empty.tsv")], check=False)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn(self.t("empty.tsv") + ":1: empty file: expected a header", p.stderr)
        self.assertFalse(os.path.exists(self.t("out-empty")))
        # A ranking that names an id twice (it counted twice in a top N), or shares no variant
        # (every overlap 0, exit 0): refused, naming the file.
        with open(self.t("dup.tsv"), "w") as f:
            f.write("id\tdelta\np0\t0.5\np1\t0.4\np0\t0.3\n")
        with open(self.t("none.tsv"), "w") as f:
            f.write("id\tdelta\nzz1\t0.5\nzz2\t0.4\n")
        for other, want in [("dup.tsv", "dup.tsv:4: id 'p0' is also on line 2: a ranking lists each variant once"),
                            ("none.tsv", "none.tsv: has no variant in common with " + self.t("pairs.tsv") +
                             " (matched by id): is it a ranking of these variants?")]:
            p = run(["variants", "--model", self.t("clf"), "--variants", self.t("pairs.tsv"), "--out",
                     self.t("out-" + other), "--compare", self.t(other)], check=False)
            self.assertEqual(p.returncode, 1, p.stderr)
            self.assertIn(want, p.stderr)
            self.assertFalse(os.path.exists(self.t("out-" + other)))

    def test_compare_by_site_with_itself_is_full(self):
        run(["variants", "--model", self.t("clf"), "--variants", self.t("v.vcf"), "--genome", self.t("g.fa"),
             "--flank", "40", "--out", self.t("out5")])
        # the same ranking with "chr" stripped and rows shuffled: matched by site, overlap 1
        rows = read_tsv(self.t("out5/variants.tsv"))
        random.Random(1).shuffle(rows)
        with open(self.t("same.tsv"), "w") as f:
            f.write("chrom\tpos\tref\talt\trank\n")
            f.writelines(f"{r['chrom'].replace('chr', '')}\t{r['pos']}\t{r['ref']}\t{r['alt']}\t{r['rank']}\n"
                         for r in rows)
        p = run(["variants", "--model", self.t("clf"), "--variants", self.t("v.vcf"), "--genome", self.t("g.fa"),
                 "--flank", "40", "--out", self.t("out6"), "--compare", self.t("same.tsv"), "--top", "3,10"])
        j = json.loads(text(self.t("out6/summary.json")))
        self.assertEqual(j["compare"]["matched_by"], "chrom:pos:ref:alt")
        self.assertEqual([x["overlap"] for x in j["compare"]["top"]], [1.0, 1.0])

    def test_compare_matches_chromosomes_as_the_genome_does_and_ids_must_be_unique(self):
        # chrM and MT are one record to the genome lookup: a ranking of the same variants that
        # names the record chrM where the VCF says MT (alleles in lower case) is the same ranking
        # (its site keys were "M" and "MT": overlap 0.5 without a word).
        with open(self.t("mt.fa"), "w") as f:
            f.write(f">chrM\n{self.genome[0]}\n>chr2\n{self.genome[1]}\n")
        with open(self.t("v.vcf")) as f:
            vcf = [l.split("\t") for l in f.read().splitlines()]
        with open(self.t("mt.vcf"), "w") as f:
            f.writelines("\t".join(["MT" if l[0] in ("chr1", "1") else l[0]] + l[1:]) + "\n" for l in vcf)
        run(["variants", "--model", self.t("clf"), "--variants", self.t("mt.vcf"), "--genome", self.t("mt.fa"),
             "--flank", "40", "--out", self.t("out7")])
        rows = read_tsv(self.t("out7/variants.tsv"))
        self.assertIn("MT", {r["chrom"] for r in rows})
        with open(self.t("mt.tsv"), "w") as f:
            f.write("chrom\tpos\tref\talt\trank\n")
            f.writelines(f"{'chrM' if r['chrom'] == 'MT' else r['chrom']}\t{r['pos']}\t{r['ref'].lower()}\t"
                         f"{r['alt']}\t{r['rank']}\n" for r in rows)
        p = run(["variants", "--model", self.t("clf"), "--variants", self.t("mt.vcf"), "--genome", self.t("mt.fa"),
                 "--flank", "40", "--out", self.t("out8"), "--compare", self.t("mt.tsv"), "--top", "3,10"])
        j = json.loads(text(self.t("out8/summary.json")))
        self.assertEqual(j["compare"]["in_both"], len(rows))
        self.assertEqual([x["overlap"] for x in j["compare"]["top"]], [1.0, 1.0])
        self.assertNotIn("note:", p.stderr)
        # A ranking with fewer variants: matched, and the rest said.
        with open(self.t("part.tsv"), "w") as f:
            f.write("chrom\tpos\tref\talt\trank\n")
            f.writelines(f"{r['chrom']}\t{r['pos']}\t{r['ref']}\t{r['alt']}\t{r['rank']}\n" for r in rows[:4])
        p = run(["variants", "--model", self.t("clf"), "--variants", self.t("mt.vcf"), "--genome", self.t("mt.fa"),
                 "--flank", "40", "--out", self.t("out9"), "--compare", self.t("part.tsv"), "--top", "3"])
        self.assertIn(f"note: 4 of the {len(rows)} variants here and of the 4 in", p.stderr)
        # Matched by id (the other ranking has no site columns): a repeated id (the alleles of a
        # multi-allelic record share one) or '.' (a VCF's missing id) matched every variant that
        # shares it.
        with open(self.t("ids.tsv"), "w") as f:
            f.write("id\tdelta\n" + "".join(f"v{i}\t{0.1 * i}\n" for i in range(40)))
        g = self.genome[0]
        with open(self.t("pairs3.tsv"), "w") as f:
            f.write("id\tref_sequence\talt_sequence\n")
            f.writelines(f"p{i}\t{g[100 * i:100 * i + 81]}\t{g[100 * i:100 * i + 40]}T{g[100 * i + 41:100 * i + 81]}\n"
                         for i in range(1, 4))
        with open(self.t("dots.tsv"), "w") as f:
            f.write("id\tdelta\np1\t0.3\n.\t0.2\n")
        for variants, other, want in [
                (self.t("v.vcf"), "ids.tsv", re.compile(re.escape(self.t("v.vcf")) + r": variant id 'v(0|8|16|24|32)' "
                                                        r"is repeated: the rankings are matched by id here \(the other "
                                                        r"ranking has no site columns\), and an id must name one variant")),
                (self.t("pairs3.tsv"), "dots.tsv", f"{self.t('dots.tsv')}: variant id '.' is missing: the rankings are "
                                                   "matched by id here (the variants are a TSV)")]:
            p = run(["variants", "--model", self.t("clf"), "--variants", variants, "--out", self.t("e-" + other),
                     "--compare", self.t(other), *(["--genome", self.t("g.fa"), "--flank", "40"]
                                                   if variants.endswith(".vcf") else [])], check=False)
            self.assertEqual(p.returncode, 1, p.stderr)
            if isinstance(want, str):
                self.assertIn(want, p.stderr)
            else:
                self.assertRegex(p.stderr, want)
            self.assertFalse(os.path.exists(self.t("e-" + other)))

    def test_the_other_rankings_numbers_are_plain_decimals(self):
        # stod read "0xc" as 12 (a reversed ranking compared as the same) and " 1" as 1; a pos of
        # "0100" was a site apart from 100.
        run(["variants", "--model", self.t("clf"), "--variants", self.t("v.vcf"), "--genome", self.t("g.fa"),
             "--flank", "40", "--out", self.t("out10")])
        rows = read_tsv(self.t("out10/variants.tsv"))
        for name, rank, pos, want in [("hex.tsv", lambda r: hex(int(r["rank"])), lambda r: r["pos"], "'0x"),
                                      ("pad.tsv", lambda r: " " + r["rank"], lambda r: r["pos"], "' "),
                                      ("zero.tsv", lambda r: r["rank"], lambda r: "0" + r["pos"], "pos '0")]:
            with open(self.t(name), "w") as f:
                f.write("chrom\tpos\tref\talt\trank\n")
                f.writelines(f"{r['chrom']}\t{pos(r)}\t{r['ref']}\t{r['alt']}\t{rank(r)}\n" for r in rows)
            p = run(["variants", "--model", self.t("clf"), "--variants", self.t("v.vcf"), "--genome", self.t("g.fa"),
                     "--flank", "40", "--out", self.t("e-" + name), "--compare", self.t(name)], check=False)
            self.assertEqual(p.returncode, 1, p.stderr)
            self.assertIn(self.t(name) + ":2: ", p.stderr)
            self.assertIn(want, p.stderr)
            self.assertFalse(os.path.exists(self.t("e-" + name)))

    def test_numbers_are_whole_fields(self):
        g = self.genome[0]
        other = "C" if g[49] != "C" else "G"
        # --window with a fraction or trailing text ran as -35:35; a POS with a sign or a space was
        # read (and "-18446744073709551416" wrapped to 200).
        # "-034:035" was read as -34:35, and --top 010 as 10 (every integer option refuses 010).
        for window in ["-35.9:35", "-35:35abc", " -35:35", "-35:+35x", "-034:035", "-34:035", "-0:5"]:
            p = run(["variants", "--model", self.t("clf"), "--variants", self.t("v.vcf"), "--genome", self.t("g.fa"),
                     "--window", window, "--out", self.t("e-w")], check=False)
            self.assertEqual(p.returncode, 1, p.stderr)
            self.assertIn(f"--window '{window}' must be A:B, decimal integers with A <= 0 <= B", p.stderr)
            self.assertFalse(os.path.exists(self.t("e-w")))
        for top in ["010", "10,0x10", "5,+5", "1e3", "0"]:
            p = run(["variants", "--model", self.t("clf"), "--variants", self.t("v.vcf"), "--genome", self.t("g.fa"),
                     "--flank", "10", "--top", top, "--out", self.t("e-t")], check=False)
            self.assertNotEqual(p.returncode, 0, p.stderr)  # an option's check: CLI11's usage status
            self.assertIn("is not a positive integer (in '" + top + "')", p.stderr)
            self.assertFalse(os.path.exists(self.t("e-t")))
        # --top without --compare did nothing, and --top 3,3 gave the N=3 row twice.
        for top, want in [("5", "--top: applies to the overlap with --compare R.tsv, which is not given"),
                          ("3,10,3", "3 appears twice (in '3,10,3'): give each N once")]:
            p = run(["variants", "--model", self.t("clf"), "--variants", self.t("v.vcf"), "--genome", self.t("g.fa"),
                     "--flank", "10", "--top", top, "--out", self.t("e-t")], check=False)
            self.assertNotEqual(p.returncode, 0, p.stderr)
            self.assertIn(want, p.stderr)
            self.assertFalse(os.path.exists(self.t("e-t")))
        for pos in ["+50", " 50", "-18446744073709551566", "50.0"]:
            with open(self.t("pos.vcf"), "w") as f:
                f.write(f"#CHROM\tPOS\tID\tREF\tALT\nchr1\t{pos}\t.\t{g[49]}\t{other}\n")
            p = run(["variants", "--model", self.t("clf"), "--variants", self.t("pos.vcf"), "--genome", self.t("g.fa"),
                     "--flank", "10", "--out", self.t("e-pos")], check=False)
            self.assertEqual(p.returncode, 1, p.stderr)
            self.assertIn(f"pos.vcf:2: POS '{pos}' is not a 1-based position (decimal digits only)", p.stderr)
            self.assertFalse(os.path.exists(self.t("e-pos")))

    def test_errors(self):
        g = self.genome[0]
        wrong = "A" if g[99] != "A" else "C"
        with open(self.t("bad.vcf"), "w") as f:
            f.write(f"#CHROM\tPOS\tID\tREF\tALT\nchr1\t50\t.\t{g[49]}\tT\nchr1\t100\t.\t{wrong}\tG\n")
        p = run(["variants", "--model", self.t("clf"), "--variants", self.t("bad.vcf"), "--genome", self.t("g.fa"),
                 "--flank", "10", "--out", self.t("e1")], check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn(f"bad.vcf:3: REF '{wrong}' does not match the genome '{g[99]}' at chr1:100", p.stderr)
        self.assertFalse(os.path.exists(self.t("e1/variants.tsv")))
        # The same variant twice (scored and ranked twice), and an ALT that is the REF.
        other = "C" if g[49] != "C" else "G"
        at60 = "A" if g[59] != "A" else "C"
        for name, body, want in [
                ("dup.vcf", f"chr1\t50\t.\t{g[49]}\t{other}\nchr1\t60\t.\t{g[59]}\t{at60}\n"
                            f"chr1\t50\tx\t{g[49].lower()}\t{other}\n",
                 f"dup.vcf:4: variant chr1:50:{g[49]}>{other} is also on line 2: list each variant once"),
                # "1" resolves to the record chr1: the same variant (it was scored and ranked twice).
                ("alias.vcf", f"1\t50\t.\t{g[49]}\t{other}\nchr1\t50\tx\t{g[49]}\t{other}\n",
                 f"alias.vcf:3: variant chr1:50:{g[49]}>{other} is also on line 2 (as 1:50): '1' and 'chr1' are both "
                 "the genome's record 'chr1'; list each variant once"),
                ("same.vcf", f"chr1\t50\t.\t{g[49]}\t{g[49]}\n",
                 f"same.vcf:2: ALT allele '{g[49]}' is the REF: not a variant"),
                # Nothing to score, said by its reason (it blamed --flank/--window for each).
                ("symbolic.vcf", f"chr1\t50\t.\t{g[49]}\t<DEL>\nchr1\t60\t.\t{g[59]}\t*\n",
                 "symbolic.vcf: no variant to score: of its 2 data line(s), 2 ALT allele(s) are symbolic (<DEL>, *, "
                 "., breakends), which are skipped, and 0 variant(s) have a window running off their chromosome"),
                ("header-only.vcf", "", "header-only.vcf: no variant to score: the VCF has no data lines (header only)")]:
            with open(self.t(name), "w") as f:
                f.write("#CHROM\tPOS\tID\tREF\tALT\n" + body)
            p = run(["variants", "--model", self.t("clf"), "--variants", self.t(name), "--genome", self.t("g.fa"),
                     "--flank", "10", "--out", self.t("e-" + name)], check=False)
            self.assertEqual(p.returncode, 1, p.stderr)
            self.assertIn(want, p.stderr)
            self.assertFalse(os.path.exists(self.t("e-" + name)))
        p = run(["variants", "--model", self.t("clf"), "--variants", self.t("v.vcf"), "--out", self.t("e2"),
                 "--flank", "10"], check=False)
        self.assertIn("--genome", p.stderr)
        p = run(["variants", "--model", self.t("clf"), "--variants", self.t("v.vcf"), "--genome", self.t("g.fa"),
                 "--out", self.t("e3"), "--flank", "10", "--class", "nope"], check=False)
        self.assertIn("'prom'", p.stderr)
        # Labels that are numbers: "1" is the label of class 0 and the index of class 1 (label
        # "2"): refused, naming both readings; #N is always index N.
        shutil.copytree(self.t("clf"), self.t("clf12"))
        os.remove(os.path.join(self.t("clf12"), ".genemask.json"))  # a model directory from elsewhere
        with open(os.path.join(self.t("clf12"), "config.json")) as f:
            cfg = json.load(f)
        cfg.update(id2label={"0": "1", "1": "2"}, label2id={"1": 0, "2": 1})
        with open(os.path.join(self.t("clf12"), "config.json"), "w") as f:
            json.dump(cfg, f)
        base = ["variants", "--model", self.t("clf12"), "--variants", self.t("v.vcf"), "--genome", self.t("g.fa"),
                "--flank", "10", "--precision", "fp32"]
        p = run(base + ["--out", self.t("e5"), "--class", "1"], check=False)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("--class '1' is both the label of class 0 and the index of class 1 (label '2')", p.stderr)
        self.assertIn("give --class '#1' for index 1, or '#0' for the label '1'", p.stderr)
        self.assertFalse(os.path.exists(self.t("e5")))
        for i, (arg, cls, index) in enumerate([(None, "2", 1), ("#1", "2", 1), ("#0", "1", 0), ("2", "2", 1),
                                               ("0", "1", 0)]):
            s = summary(run(base + ["--out", self.t(f"cls{i}")] + (["--class", arg] if arg else [])))
            self.assertEqual((s["class"], s["class_index"]), (cls, index), arg)
        for bad in ["#2", "#", "#x", "3"]:
            p = run(base + ["--out", self.t("e6"), "--class", bad], check=False)
            self.assertIn(f"--class '{bad}' is neither a class of", p.stderr)
        # a model without a classifier head (the pretraining-style export) is refused
        os.makedirs(self.t("noclf"), exist_ok=True)
        p = run(["variants", "--model", self.t("noclf"), "--variants", self.t("v.vcf"), "--genome", self.t("g.fa"),
                 "--out", self.t("e4"), "--flank", "10"], check=False)
        self.assertIn("config.json", p.stderr)
        self.assertIn("--compare", run(["variants", "--help"]).stdout)
        # A negative flank says so (it used to read "needs exactly one of --flank N and --window").
        p = run(["variants", "--model", self.t("clf"), "--variants", self.t("v.vcf"), "--genome", self.t("g.fa"),
                 "--out", self.t("e5"), "--flank", "-5"], check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("--flank", p.stderr)
        self.assertIn("-5", p.stderr)
        self.assertNotIn("exactly one of", p.stderr)


if __name__ == "__main__":
    unittest.main()
