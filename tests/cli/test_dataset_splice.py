#!/usr/bin/env python3
"""End-to-end tests of `genemask dataset splice` on a generated genome and annotation: the
donor/acceptor windows and the drop counts against an independent Python implementation of
the site rules, brute-force checks of every non-splice window, GTF == GFF3(.gz), determinism
by seed, the few-shot layout, and input errors."""
import collections
import gzip
import json
import os
import random
import re
import shutil
import tempfile
import unittest

from test_cli import run, summary

W = 40
H = W // 2
COMP = str.maketrans("ACGT", "TGCA")


def rc(s):
    return s.translate(COMP)[::-1]


def make_case(seed=5):
    """Genome (name -> upper-case sequence), transcripts [(id, chrom, strand, exons)], with
    exons 0-based half-open. Genes do not overlap; some have an exon-skipping isoform."""
    rng = random.Random(seed)
    lengths = {"chr1": 14000, "chr2": 11000, "chr3": 9000}
    genome = {c: [rng.choice("ACGT") for _ in range(n)] for c, n in lengths.items()}
    transcripts, plain_plus = [], []  # plain_plus: + genes, one isoform, >= 3 exons, no N
    g = 0
    for chrom, n in lengths.items():
        pos = 2 if chrom == "chr1" else rng.randint(50, 300)
        first = True
        while True:
            k = rng.randint(1, 5)
            exons, p = [], pos
            for e in range(k):
                L = 8 if (first and e == 0 and chrom == "chr1") else rng.randint(50, 200)
                exons.append((p, p + L))
                p += L + (rng.choice([41, 44, 60]) if rng.random() < 0.2 else rng.randint(100, 600))
            if exons[-1][1] > n - 300:
                break
            strand = "+" if (first and chrom == "chr1") else rng.choice("+-")
            first = False
            g += 1
            gid = f"G{g}"
            iso = k >= 3 and rng.random() < 0.4
            transcripts.append((f"{gid}.1", chrom, strand, exons, gid))
            if iso:
                skip = rng.randint(1, k - 2)
                transcripts.append((f"{gid}.2", chrom, strand, exons[:skip] + exons[skip + 1:], gid))
            elif k >= 2 and rng.random() < 0.3:  # an N near the end of a (non-last) exon
                e = rng.randint(0, k - 2)
                q = exons[e][1] - rng.randint(1, 15)
                genome[chrom][q] = "N"
            elif strand == "+" and k >= 3 and exons[0][1] > 100:
                plain_plus.append((chrom, exons))
            pos = exons[-1][1] + rng.randint(100, 500)
        # A last gene whose last exon starts 10 bases before the end: its acceptor runs off.
        s = n - 10
        transcripts.append((f"E{chrom}", chrom, "+", [(s - 300, s - 200), (s, n)], f"E{chrom}"))
    # A same-label duplicate (donor context copied onto another donor) and an ambiguous
    # pair (donor context copied onto an acceptor).
    assert len(plain_plus) >= 3, "generator: too few plain + genes"
    (ca, ea), (cb, eb), (cc, ec) = plain_plus[:3]
    d0, d1, acc = ea[0][1], ea[1][1], ec[1][0]
    assert all(len(genome[c]) == n for c, n in lengths.items())
    genome[cb][eb[0][1] - H:eb[0][1] + H] = genome[ca][d0 - H:d0 + H]
    genome[cc][acc - H:acc + H] = genome[ca][d1 - H:d1 + H]
    assert all(len(genome[c]) == n for c, n in lengths.items())
    return {c: "".join(s) for c, s in genome.items()}, transcripts


def write_inputs(d, genome, transcripts, seqid=lambda c: c):
    with open(os.path.join(d, "g.fa"), "w") as f:
        for c, s in genome.items():
            f.write(f">{c} generated\n" + "".join(s[i:i + 70] + "\n" for i in range(0, len(s), 70)))
    rng = random.Random(1)
    gtf, gff = [], ["##gff-version 3"]
    for tid, chrom, strand, exons, gid in transcripts:
        gff.append(f"{seqid(chrom)}\tsim\tmRNA\t{exons[0][0] + 1}\t{exons[-1][1]}\t.\t{strand}\t.\tID={tid};Parent={gid}")
        for s, e in rng.sample(exons, len(exons)):  # exon lines in any order
            gtf.append(f'{seqid(chrom)}\tsim\texon\t{s + 1}\t{e}\t.\t{strand}\t.\tgene_id "{gid}"; transcript_id "{tid}";')
            gff.append(f"{seqid(chrom)}\tsim\texon\t{s + 1}\t{e}\t.\t{strand}\t.\tParent={tid}")
    with open(os.path.join(d, "a.gtf"), "w") as f:
        f.write("\n".join(gtf) + "\n")
    with gzip.open(os.path.join(d, "a.gff3.gz"), "wt") as f:
        f.write("\n".join(gff) + "\n")


def expected_sites(genome, transcripts):
    """The site rules, written independently: returns (rows {seq: label} after the
    duplicate rules, drop counts)."""
    sites = set()
    for tid, chrom, strand, exons, _ in transcripts:
        ex = sorted(exons)
        for (_, a), (b, _) in zip(ex, ex[1:]):
            if strand == "+":
                sites.add((chrom, a, "+", "1"))
                sites.add((chrom, b, "+", "0"))
            else:
                sites.add((chrom, b, "-", "1"))
                sites.add((chrom, a, "-", "0"))
    drops = collections.Counter()
    windows = []
    for chrom, x, strand, label in sorted(sites):
        seq = genome[chrom]
        if x - H < 0 or x + H > len(seq):
            drops["off_chromosome"] += 1
            continue
        w = seq[x - H:x + H]
        if set(w) - set("ACGT"):
            drops["contains_n"] += 1
            continue
        windows.append((rc(w) if strand == "-" else w, label))
    labels = collections.defaultdict(list)
    for w, y in windows:
        labels[w].append(y)
    rows = {}
    for w, ys in labels.items():
        if len(set(ys)) > 1:
            drops["ambiguous"] += len(ys)
        else:
            rows[w] = ys[0]
            drops["duplicate"] += len(ys) - 1
    return rows, drops, len(sites)


def read_rows(out):
    rows = []
    for name in ("train.tsv", "test.tsv"):
        with open(os.path.join(out, name)) as f:
            assert f.readline() == "sequence\tlabel\tid\n"
            rows += [tuple(l.rstrip("\n").split("\t")) for l in f]
    return rows


def files_of(d):
    """The files under d by relative path, less the output marker (.genemask.json), which
    records the command line and the time of writing."""
    assert os.path.isfile(os.path.join(d, ".genemask.json")), d
    out = {}
    for root, _, names in os.walk(d):
        for n in names:
            if n == ".genemask.json" and root == d:
                continue
            p = os.path.join(root, n)
            with open(p, "rb") as f:
                out[os.path.relpath(p, d)] = f.read()
    return out


class DatasetSplice(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="gm-splice-")
        cls.genome, cls.transcripts = make_case()
        write_inputs(cls.tmp, cls.genome, cls.transcripts)
        cls.args = ["dataset", "splice", "--genome", os.path.join(cls.tmp, "g.fa"), "--window", str(W), "--seed", "7",
                    "--negatives-per-site", "1", "--shots", "5"]
        cls.out = os.path.join(cls.tmp, "out")
        cls.p = run(cls.args + ["--annotation", os.path.join(cls.tmp, "a.gtf"), "--out", cls.out])
        cls.s = summary(cls.p)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp)

    def test_sites_match_python(self):
        want, drops, n_sites = expected_sites(self.genome, self.transcripts)
        self.assertGreater(drops["ambiguous"], 0)  # the generator planted both cases
        self.assertGreater(drops["duplicate"], 0)
        self.assertGreater(drops["contains_n"], 0)
        self.assertGreaterEqual(drops["off_chromosome"], 4)  # chr1's first donor, three last acceptors
        got = [(s, y) for s, y, _ in read_rows(self.out) if y in ("0", "1")]
        self.assertEqual(len(got), len(set(got)))
        self.assertEqual(dict(got), want)
        self.assertEqual(self.s["donor_sites"] + self.s["acceptor_sites"], n_sites)
        dropped = self.s["dropped"]
        for reason in ("off_chromosome", "contains_n", "ambiguous"):
            self.assertEqual(dropped.get(reason, 0), drops[reason], reason)
        counts = collections.Counter(y for _, y in want.items())
        for y in ("0", "1"):
            self.assertEqual(self.s["classes"][y]["total"], counts[y])
        self.assertIn("class 0:", self.p.stderr)

    def test_non_splice_windows_hold_no_site(self):
        by_id = {(t[0], t[1]): t for t in self.transcripts}
        bounds = collections.defaultdict(set)
        for _, chrom, _, exons, _ in self.transcripts:
            for s, e in exons:
                bounds[chrom].update((s, e))
        neg = [(s, i) for s, y, i in read_rows(self.out) if y == "2"]
        self.assertGreater(len(neg), 50)
        for seq, ident in neg:
            m = re.fullmatch(r"(\w+):(\d+)-(\d+)\(([+-])\):(.+)", ident)
            self.assertIsNotNone(m, ident)
            chrom, p, q, strand, tid = m[1], int(m[2]), int(m[3]), m[4], m[5]
            self.assertEqual(q - p, W)
            t = by_id[(tid, chrom)]
            self.assertEqual(t[2], strand)
            ex = sorted(t[3])
            self.assertTrue(any(a <= p and q <= b for (_, a), (b, _) in zip(ex, ex[1:])), ident)
            self.assertFalse([x for x in bounds[chrom] if p <= x <= q], ident)
            w = self.genome[chrom][p:q]
            self.assertEqual(seq, rc(w) if strand == "-" else w)
        # R = 1: each distinct intron gives min(2, positions available) windows; the
        # non-splice windows lost are exactly the duplicates beyond the sites' own.
        introns = set()
        for _, chrom, strand, exons, _ in self.transcripts:
            ex = sorted(exons)
            introns.update((chrom, a, b, strand) for (_, a), (b, _) in zip(ex, ex[1:]))
        drawn = 0
        for chrom, a, b, _ in introns:
            room = sum(1 for p in range(a, b - W + 1) if not [x for x in bounds[chrom] if p <= x <= p + W])
            drawn += min(2, room)
        _, drops, _ = expected_sites(self.genome, self.transcripts)
        neg_dups = self.s["dropped"].get("duplicate", 0) - drops["duplicate"]
        self.assertGreaterEqual(neg_dups, 0)
        self.assertEqual(len(neg) + neg_dups, drawn)

    def test_layouts_and_fewshot(self):
        rows = read_rows(self.out)
        self.assertEqual(len(rows), self.s["train"] + self.s["test"])
        self.assertTrue(all(len(s) == W for s, _, _ in rows))
        with open(os.path.join(self.out, "fewshot", "5", "train.tsv")) as f:
            self.assertEqual(f.readline().strip(), '"sequence"\t"label"')
            labels = collections.Counter(l.rstrip("\n").split("\t")[1].strip('"') for l in f)
        self.assertEqual(labels, {"0": 5, "1": 5, "2": 5})
        with open(os.path.join(self.out, "summary.json")) as f:
            js = json.load(f)
        self.assertEqual(js["options"]["settings"]["labels"], "0=acceptor,1=donor,2=non-splice")

    def test_gff3_gz_gives_identical_outputs(self):
        out2 = os.path.join(self.tmp, "out-gff3")
        run(self.args + ["--annotation", os.path.join(self.tmp, "a.gff3.gz"), "--out", out2])
        a, b = files_of(self.out), files_of(out2)
        self.assertEqual(sorted(a), sorted(b))
        for name in a:
            if name == "summary.json":
                ja, jb = json.loads(a[name]), json.loads(b[name])
                ja["inputs"].pop("annotation"), jb["inputs"].pop("annotation")
                ja.pop("out", None), jb.pop("out", None)
                self.assertEqual(ja, jb)
            else:
                self.assertEqual(a[name], b[name], name)

    def test_cds_only_annotation_with_exon_feature(self):
        # The same GFF3 with its exon lines renamed CDS (an annotation without exon lines):
        # the default stops with a message that points to --exon-feature CDS; with it, the
        # outputs equal those of the exon file.
        with gzip.open(os.path.join(self.tmp, "a.gff3.gz"), "rt") as f:
            text = f.read()
        cds = os.path.join(self.tmp, "cds-only.gff3")
        with open(cds, "w") as f:
            f.write(text.replace("\tsim\texon\t", "\tsim\tCDS\t"))
        p = run(self.args + ["--annotation", cds, "--out", os.path.join(self.tmp, "cds-default")], check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn(f"{cds}: no features of type 'exon' found, but", p.stderr)
        self.assertIn("use --exon-feature CDS", p.stderr)
        out2 = os.path.join(self.tmp, "out-cds")
        run(self.args + ["--annotation", cds, "--exon-feature", "CDS", "--out", out2])
        a, b = files_of(self.out), files_of(out2)
        ja, jb = json.loads(a.pop("summary.json")), json.loads(b.pop("summary.json"))
        self.assertEqual(jb["inputs"]["exon_feature"], "CDS")
        self.assertEqual(a, b)

    def test_deterministic_by_seed(self):
        out2, out3 = os.path.join(self.tmp, "same"), os.path.join(self.tmp, "other")
        run(self.args + ["--annotation", os.path.join(self.tmp, "a.gtf"), "--out", out2])
        a, b = files_of(self.out), files_of(out2)
        a.pop("summary.json"), b.pop("summary.json")
        self.assertEqual(a, b)
        args = [x if x != "7" else "8" for x in self.args]
        run(args + ["--annotation", os.path.join(self.tmp, "a.gtf"), "--out", out3])
        site = lambda d: sorted((s, y) for s, y, _ in read_rows(d) if y != "2")
        neg = lambda d: sorted(s for s, y, _ in read_rows(d) if y == "2")
        self.assertEqual(site(self.out), site(out3))
        self.assertNotEqual(neg(self.out), neg(out3))

    def test_max_per_class(self):
        out2 = os.path.join(self.tmp, "capped")
        s2 = summary(run(self.args + ["--annotation", os.path.join(self.tmp, "a.gtf"), "--out", out2,
                                      "--max-per-class", "10"]))
        for y in ("0", "1", "2"):
            self.assertEqual(s2["classes"][y]["total"], 10)
        over = sum(self.s["classes"][y]["total"] - 10 for y in ("0", "1", "2"))
        self.assertEqual(s2["dropped"]["over_max_per_class"], over)
        full = set((s, y) for s, y, _ in read_rows(self.out))
        self.assertTrue(set((s, y) for s, y, _ in read_rows(out2)) <= full)

    def test_errors(self):
        d = self.tmp
        with open(os.path.join(d, "bad.gtf"), "w") as f:
            f.write('chr1\ts\texon\t101\t200\t.\t+\t.\tgene_id "G"; transcript_id "T";\n'
                    'chr1\ts\texon\t301\t400\t.\t+\t.\tgene_id "G";\n')
        p = run(["dataset", "splice", "--genome", os.path.join(d, "g.fa"), "--annotation", os.path.join(d, "bad.gtf"),
                 "--out", os.path.join(d, "e1")], check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn(os.path.join(d, "bad.gtf") + ":2: GTF exon line without a transcript_id attribute", p.stderr)
        with open(os.path.join(d, "unk.gtf"), "w") as f:
            f.write('chr1\ts\texon\t101\t200\t.\t+\t.\ttranscript_id "T";\n'
                    'chrZ\ts\texon\t101\t200\t.\t+\t.\ttranscript_id "U";\n')
        p = run(["dataset", "splice", "--genome", os.path.join(d, "g.fa"), "--annotation", os.path.join(d, "unk.gtf"),
                 "--out", os.path.join(d, "e2")], check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn(os.path.join(d, "unk.gtf") + ":2: transcript 'U': sequence 'chrZ' is not in the genome", p.stderr)
        self.assertFalse(os.path.exists(os.path.join(d, "e2", "train.tsv")))
        p = run(["dataset", "splice", "--genome", os.path.join(d, "g.fa"), "--annotation", os.path.join(d, "unk.gtf"),
                 "--out", os.path.join(d, "e3"), "--skip-unknown-chromosomes", "--window", "41"], check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("--window must be even", p.stderr)
        # A CDS file read with a feature type it does not have names the type it looked for.
        with open(os.path.join(d, "cds.gtf"), "w") as f:
            f.write('chr1\ts\tCDS\t101\t200\t.\t+\t0\ttranscript_id "T";\n')
        p = run(["dataset", "splice", "--genome", os.path.join(d, "g.fa"), "--annotation", os.path.join(d, "cds.gtf"),
                 "--out", os.path.join(d, "e4"), "--exon-feature", "five_prime_UTR"], check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn(os.path.join(d, "cds.gtf") + ": no features of type 'five_prime_UTR' found", p.stderr)
        p = run(["dataset", "splice", "--genome", os.path.join(d, "g.fa"), "--annotation", os.path.join(d, "cds.gtf"),
                 "--out", os.path.join(d, "e5"), "--exon-feature", ""], check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("--exon-feature must be a GTF/GFF3 feature type such as exon or CDS, got ''", p.stderr)


if __name__ == "__main__":
    unittest.main()
