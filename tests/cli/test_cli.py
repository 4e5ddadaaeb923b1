#!/usr/bin/env python3
"""End-to-end tests of the genemask binary: run as users do, check outputs against
independent references (a plain Python counter, h5py, jellyfish)."""
import gzip
import json
import math
import os
import random
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import unittest

import h5py
import numpy as np

BIN = os.environ.get("GENEMASK_BIN", "build/src/cli/genemask")
MPIEXEC = os.environ.get("MPIEXEC", "mpiexec")
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
CODE = {"A": 0, "C": 1, "G": 2, "T": 3}


def mpiexec_flags():
    """The launcher's flags: MPIEXEC_FLAGS (split as a shell would; set and empty: none), else
    --oversubscribe where MPIEXEC is Open MPI's (its --version names Open MPI, OpenRTE or
    PRRTE), which otherwise refuses more ranks than cores; MPICH's, Cray's and other
    launchers get none."""
    global _MPIEXEC_FLAGS
    if _MPIEXEC_FLAGS is None:
        if "MPIEXEC_FLAGS" in os.environ:
            _MPIEXEC_FLAGS = shlex.split(os.environ["MPIEXEC_FLAGS"])
        else:
            try:
                p = subprocess.run([MPIEXEC, "--version"], capture_output=True, text=True, timeout=60, env=ENV)
                text = (p.stdout + p.stderr).lower()
            except (OSError, subprocess.TimeoutExpired):
                text = ""
            ompi = any(s in text for s in ("open mpi", "openrte", "prte", "prrte"))
            _MPIEXEC_FLAGS = ["--oversubscribe"] if ompi else []
    return list(_MPIEXEC_FLAGS)


_MPIEXEC_FLAGS = None


def mpiexec(ranks=None):
    """The start of a launch command line: MPIEXEC [-n RANKS] MPIEXEC_FLAGS."""
    return [MPIEXEC] + (["-n", str(ranks)] if ranks else []) + mpiexec_flags()


def run(args, cwd=None, ranks=None, check=True, env=None):
    """env: variables added to ENV for this run; ranks: under mpiexec(ranks)."""
    cmd = (mpiexec(ranks) if ranks else []) + [os.path.abspath(BIN)] + args
    p = subprocess.run(cmd, cwd=cwd, env=dict(ENV, **(env or {})), capture_output=True, text=True)
    if check and p.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stderr}")
    return p


def summary(p):
    return json.loads(p.stdout.strip().splitlines()[-1])


def check_progress(test, stderr, cmd, least=3):
    """The `[genemask CMD]` progress lines of a run with a tiny --progress-interval: at least
    `least`, never falling, the last at 100%, then `done in`."""
    shares = [float(m) for m in re.findall(rf"^\[genemask {cmd}\]\s+([0-9.]+)%  elapsed", stderr, re.M)]
    test.assertGreaterEqual(len(shares), least, stderr)
    test.assertEqual(shares, sorted(shares), stderr)
    test.assertEqual(shares[-1], 100.0, stderr)
    test.assertRegex(stderr, rf"\[genemask {cmd}\] done in [0-9.]+ s")


def random_genome(rng, records=4, length=(2000, 40000)):
    out, seqs = [], []
    for r in range(records):
        n = rng.randint(*length)
        s = []
        lower = False
        while len(s) < n:
            x = rng.random()
            if x < 0.01:
                lower = not lower
            if x < 0.004:
                s.extend("N" * rng.randint(1, 30))
                continue
            c = rng.choice("ACGT") if x > 0.006 else rng.choice("RYKM")
            s.append(c.lower() if lower else c)
        s = "".join(s[:n])
        seqs.append(s.upper())
        w = rng.choice([50, 60, 61, 80])
        out.append(f">chr{r + 1} test record\n" + "".join(s[i:i + w] + "\n" for i in range(0, len(s), w)))
    return "".join(out), seqs


def python_counts(seqs, kmax):
    """Independent reference: count every k-mer of every ACGT-only window."""
    counts = {k: np.zeros(4 ** k, dtype=np.uint64) for k in range(1, kmax + 1)}
    for s in seqs:
        for piece in s.replace("R", "N").replace("Y", "N").replace("K", "N").replace("M", "N").split("N"):
            codes = [CODE[c] for c in piece]
            for k in range(1, kmax + 1):
                mask = 4 ** k
                v = 0
                for i, c in enumerate(codes):
                    v = (v * 4 + c) % mask
                    if i >= k - 1:
                        counts[k][v] += 1
    return counts


class Genemask(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="genemask-cli-")
        rng = random.Random(12345)
        cls.fasta, cls.seqs = random_genome(rng)
        cls.fa = os.path.join(cls.tmp, "g.fa")
        with open(cls.fa, "w") as f:
            f.write(cls.fasta)
        with gzip.open(cls.fa + ".gz", "wt") as f:
            f.write(cls.fasta)
        with open(os.path.join(cls.tmp, "g.bgz.fa.gz"), "wb") as out:
            subprocess.run(["bgzip", "-c", cls.fa], stdout=out, check=True)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def count(self, genome, ranks, extra=()):
        d = tempfile.mkdtemp(dir=self.tmp)
        p = run(["count", "--genome", genome, "--out", "counts.h5", "--quiet", *extra], cwd=d, ranks=ranks)
        return os.path.join(d, "counts.h5"), summary(p)

    def test_help_for_every_subcommand(self):
        subs = ["count", "npmi", "pmi-vocab", "motifs", "shards", "mask-stats", "vocab", "pretrain", "export-hf", "embed"]
        for sub in subs:
            p = run([sub, "--help"])
            self.assertIn("--", p.stdout, sub)
            self.assertIn(sub, p.stdout)
        p = run(["--help"])
        for sub in subs:
            self.assertIn(sub, p.stdout)
        p = run(["no-such-command"], check=False)
        self.assertNotEqual(p.returncode, 0)

    def test_counts_identical_across_ranks_and_formats_and_match_python(self):
        files = {}
        for name in ["g.fa", "g.fa.gz", "g.bgz.fa.gz"]:
            for ranks in [1, 2, 4]:
                path, s = self.count(os.path.join(self.tmp, name), ranks)
                self.assertEqual(s["ranks"], ranks)
                with open(path, "rb") as f:
                    files[(name, ranks)] = f.read()
        for name in ["g.fa", "g.fa.gz", "g.bgz.fa.gz"]:
            for ranks in [2, 4]:
                self.assertEqual(files[(name, 1)], files[(name, ranks)], f"{name}: 1 vs {ranks} ranks differ")
        ref = python_counts(self.seqs, 10)
        path, s = self.count(self.fa, 2)
        with h5py.File(path, "r") as h:
            self.assertEqual(h.attrs["format"], "genemask-counts")
            self.assertEqual(int(h.attrs["kmax"]), 10)
            for k in range(1, 11):
                got = h[f"counts/k{k}"][...]
                self.assertEqual(got.dtype, np.uint64)
                np.testing.assert_array_equal(got, ref[k], err_msg=f"k={k}")
                self.assertEqual(int(h[f"counts/k{k}"].attrs["total"]), int(ref[k].sum()))
            names = [n.decode() if isinstance(n, bytes) else n for n in h["records/name"][...]]
            self.assertEqual(names, [f"chr{i + 1}" for i in range(len(self.seqs))])
            np.testing.assert_array_equal(h["records/length"][...], [len(s) for s in self.seqs])

    def test_presence15_matches_python(self):
        path, _ = self.count(self.fa, 2, ["--presence15", "--kmax", "6"])
        present = set()
        for s in self.seqs:
            for i in range(len(s) - 14):
                w = s[i:i + 15]
                if all(c in CODE for c in w):
                    v = 0
                    for c in w:
                        v = v * 4 + CODE[c]
                    present.add(v)
        with h5py.File(path, "r") as h:
            bits = h["presence/k15"][...]
        self.assertEqual(len(bits), 4 ** 15 // 64)
        got = np.nonzero(np.unpackbits(bits.view(np.uint8), bitorder="little"))[0]
        self.assertEqual(set(got.tolist()), present)

    def test_agrees_with_jellyfish(self):
        if shutil.which("jellyfish") is None:
            self.fail("jellyfish is not installed (scripts/install-deps.sh installs it)")
        path, _ = self.count(self.fa, 2)
        with h5py.File(path, "r") as h:
            ours = {k: h[f"counts/k{k}"][...] for k in range(1, 11)}
        for k in [1, 4, 6, 10]:
            jf = os.path.join(self.tmp, f"k{k}.jf")
            subprocess.run(["jellyfish", "count", "-m", str(k), "-s", "1M", "-t", "2", "-o", jf, self.fa], check=True)
            dump = subprocess.run(["jellyfish", "dump", "-c", jf], check=True, capture_output=True, text=True).stdout
            theirs = np.zeros(4 ** k, dtype=np.uint64)
            for line in dump.splitlines():
                kmer, n = line.split()
                v = 0
                for c in kmer:
                    v = v * 4 + CODE[c]
                theirs[v] = int(n)
            np.testing.assert_array_equal(ours[k], theirs, err_msg=f"k={k} differs from jellyfish")

    def test_npmi_matches_python_reference(self):
        path, _ = self.count(self.fa, 1, ["--kmax", "6"])
        out = os.path.join(self.tmp, "npmi.tsv")
        p = run(["npmi", "--counts", path, "--out", out, "--min-count", "20"])
        s = summary(p)
        self.assertEqual(s["kmers"], 4096)
        # Most k-mers below --min-count: the ranking says little, and is said to.
        with h5py.File(path, "r") as h:
            below = int((h["counts/k6"][...] < 20).sum())
        self.assertEqual(s["below_min_count"], below)
        warned = f"warning: {below} of the 4096 6-mers are below --min-count 20" in p.stderr
        self.assertEqual(warned, below * 2 > 4096, p.stderr)
        p = run(["npmi", "--counts", path, "--out", os.path.join(self.tmp, "npmi-high.tsv"), "--min-count", "1000000"])
        self.assertIn("warning: 4096 of the 4096 6-mers are below --min-count 1000000", p.stderr)
        with h5py.File(path, "r") as h:
            cnt = {k: h[f"counts/k{k}"][...].astype(float) for k in range(1, 7)}
        logp = {k: np.log(np.where(cnt[k] > 0, cnt[k], np.nan) / cnt[k].sum()) for k in range(1, 7)}

        def sub(code, k, i, j):  # code of bases [i, j)
            return (code >> (2 * (k - j))) & (4 ** (j - i) - 1)

        def pmi(code, k):  # enumerate every segmentation except the identity
            best = math.inf
            for cuts in range(1, 2 ** (k - 1)):
                bounds = [0] + [p + 1 for p in range(k - 1) if cuts >> p & 1] + [k]
                total = sum(logp[b - a][sub(code, k, a, b)] for a, b in zip(bounds, bounds[1:]))
                best = min(best, logp[k][code] - total)
            return best

        with open(out) as f:
            rows = [line.rstrip("\n").split("\t") for line in f]
        self.assertEqual(rows[0], ["rank", "kmer", "count", "pmi", "npmi", "below_min_count"])
        rows = rows[1:]
        prev = math.inf
        for r in rows[:300]:
            code = 0
            for c in r[1]:
                code = code * 4 + CODE[c]
            f = cnt[6][code]
            if r[5] == "1":
                break
            p = pmi(code, 6)
            self.assertAlmostEqual(float(r[3]), p, places=10)
            self.assertAlmostEqual(float(r[4]), p * math.log(f) / (math.log(20) + math.log(f)), places=10)
            self.assertLessEqual(float(r[4]), prev)
            prev = float(r[4])
        flagged = [r for r in rows if r[5] == "1"]
        self.assertTrue(all(int(r[2]) < 20 for r in flagged))
        self.assertTrue(all(int(r[2]) >= 20 for r in rows if r[5] == "0"))

    def test_pmi_vocab_and_motifs(self):
        path, _ = self.count(self.fa, 2)
        out = os.path.join(self.tmp, "vocab.tsv")
        p = run(["pmi-vocab", "--counts", path, "--out", out, "--min-count", "50", "--size", "500"])
        s = summary(p)
        self.assertEqual(s["size"], 500)
        self.assertEqual(sum(s["length_histogram"].values()), 500)
        self.assertIn("length\tk-mers in vocabulary", p.stderr)
        npmi = os.path.join(self.tmp, "n.tsv")
        run(["npmi", "--counts", path, "--out", npmi])
        p = run(["motifs", "--npmi", npmi, "nTATAAAr", "ksCTGGGm"])
        lines = p.stdout.splitlines()
        self.assertEqual(lines[0], "motif\tcore\tranks\tkmers")
        with open(npmi) as f:
            table = [l.split("\t") for l in f.read().splitlines()[1:]]
        self.assertFalse([r for r in table if r[4] == "-0"])  # an NPMI of 0 is written 0, never -0
        rank = {r[1]: int(r[0]) for r in table}
        # A k-mer below npmi's --min-count is shown marked (its rank is code order, not NPMI).
        shown = {r[1]: r[0] if r[5] == "0" else f"({r[0]}: {'never seen' if r[2] == '0' else 'below min count'})"
                 for r in table}
        self.assertEqual(lines[1].split("\t")[2], shown["TATAAA"])
        five = sorted(rank[k] for k in rank if "CTGGG" in k)[:5]
        by_rank = {v: k for k, v in rank.items()}
        self.assertEqual(lines[2].split("\t")[2], ", ".join(shown[by_rank[r]] for r in five))
        # A k-mer below npmi's --min-count has no NPMI: its rank (code order after the ranked
        # ones) is marked, and its count is in the summary.
        with open(npmi) as f:
            count = {l.split("\t")[1]: int(l.split("\t")[2]) for l in f.read().splitlines()[1:]}
        npmi2 = os.path.join(self.tmp, "n2.tsv")
        run(["npmi", "--counts", path, "--out", npmi2, "--min-count", str(count["TATAAA"] + 1)])
        with open(npmi2) as f:
            rank2 = {l.split("\t")[1]: int(l.split("\t")[0]) for l in f.read().splitlines()[1:]}
        p = run(["motifs", "--npmi", npmi2, "nTATAAAr"])
        why = "never seen" if count["TATAAA"] == 0 else "below min count"
        self.assertEqual(p.stdout.splitlines()[1].split("\t")[2], f"({rank2['TATAAA']}: {why})")
        self.assertIn("1 of the ranks shown are of k-mers below npmi's --min-count", p.stderr)
        hit = summary(p)["motifs"][0]["hits"][0]
        self.assertEqual((hit["kmer"], hit["count"], hit["below_min_count"]), ("TATAAA", count["TATAAA"], True))
        self.assertEqual(summary(p)["unranked_hits"], 1)
        self.assertGreaterEqual(count["TATAAA"], 2)
        npmi1 = os.path.join(self.tmp, "n1.tsv")
        run(["npmi", "--counts", path, "--out", npmi1, "--min-count", "2"])
        p = run(["motifs", "--npmi", npmi1, "nTATAAAr"])
        self.assertEqual(summary(p)["unranked_hits"], 0)
        self.assertNotIn("note:", p.stderr)
        bad = run(["motifs", "--npmi", npmi, "TAJAAA"], check=False)
        self.assertNotEqual(bad.returncode, 0)
        self.assertIn("'J' is not an IUPAC nucleotide code", bad.stderr)
        # Each motif as typed: CLI11's list syntax ran "[TATA,AAA]" as two motifs and
        # "[AC[GT]]" as "AC[GT]"; a bad motif anywhere leaves no partial table.
        for motif, want in [("[TATA,AAA]", "motif '[TATA,AAA]': ',' is not an IUPAC nucleotide code"),
                            ("[AC[GT]]", "motif '[AC[GT]]': use one pair of brackets to mark the core"),
                            ("[]", "motif '[]' has no bases")]:
            bad = run(["motifs", "--npmi", npmi, "nTATAAAr", motif], check=False)
            self.assertEqual(bad.returncode, 1, bad.stderr)
            self.assertIn(want, bad.stderr)
            self.assertEqual(bad.stdout, "")
        self.assertEqual(run(["motifs", "--npmi", npmi, "[TATA]"]).stdout.splitlines()[1].split("\t")[:2], ["[TATA]", "TATA"])
        # A usage error exits 2, as for every subcommand's option errors (extras, required).
        for args, want, code in [(["--tpo", "3", "TATA"], "The following argument was not expected: --tpo", 2),
                                 ([], "MOTIF (one or more) is required", 2)]:
            bad = run(["motifs", "--npmi", npmi, *args], check=False)
            self.assertEqual(bad.returncode, code, bad.stderr)
            self.assertIn(want, bad.stderr)

    def test_values_in_brackets_reach_the_command_whole_or_are_refused(self):
        # CLI11 reads "[a,b]" given to a list option as the list a, b: overlap ran two training
        # tables for one argument. Such a value is refused, in both spellings; a scalar option
        # (--out) holds it whole, and a path written ./[a,b] is a path.
        d = tempfile.mkdtemp(dir=self.tmp)
        for name in ["a", "b", "[a,b]", "t.csv"]:
            with open(os.path.join(d, name), "w") as f:
                f.write("sequence,label\nACGTACGTAC,1\n")
        for args in (["--train", "[a,b]"], ["--train=[a,b]"], ["--train", "a", "[a,b]"]):
            p = run(["overlap", "--test", "t.csv", *args, "--out", "o"], cwd=d, check=False)
            self.assertEqual(p.returncode, 2, p.stderr)
            self.assertIn("'[a,b]': a value in brackets is read as a list of its comma-separated parts; give the values "
                          "without brackets, each after its option, or a path as ./[a,b] (see genemask overlap --help)",
                          p.stderr)
            self.assertFalse(os.path.exists(os.path.join(d, "o")))
        p = run(["overlap", "--test", "t.csv", "--train", "./[a,b]", "--out", "o"], cwd=d, check=False)
        self.assertNotIn("in brackets", p.stderr)
        counts, _ = self.count(self.fa, 2)
        for out in (["--out", "[n]"], ["--out=[m]"]):
            run(["npmi", "--counts", counts, *out], cwd=d)
        self.assertTrue(os.path.isfile(os.path.join(d, "[n]")) and os.path.isfile(os.path.join(d, "[m]")))

    def test_bad_input_fails_cleanly_without_output(self):
        d = tempfile.mkdtemp(dir=self.tmp)
        bad = os.path.join(d, "bad.fa")
        with open(bad, "w") as f:
            f.write(">a\nACGT\n>b\nAC\n" + "ACGTACGTAC\n" * 5000 + ">a\nTT\n")
        for ranks in [1, 2]:
            p = run(["count", "--genome", bad, "--out", "c.h5", "--quiet"], cwd=d, ranks=ranks, check=False)
            self.assertNotEqual(p.returncode, 0)
            self.assertIn(f"{bad}:5005: duplicate record name 'a' (first seen on line 1)", p.stderr)
            self.assertEqual([f for f in os.listdir(d) if f.startswith("c.h5")], [])
        with open(bad, "w") as f:
            f.write("ID   X standard; DNA\nACGT\n")
        p = run(["count", "--genome", bad, "--out", "c.h5"], cwd=d, check=False)
        self.assertIn(f"{bad}:1: not a FASTA file", p.stderr)
        p = run(["count", "--genome", self.fa, "--out", "/nonexistent/dir/c.h5"], check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("cannot write output /nonexistent/dir/c.h5", p.stderr)
        p = run(["npmi", "--counts", self.fa, "--out", os.path.join(d, "n.tsv")], check=False)
        self.assertIn("cannot open as an HDF5 file", p.stderr)
        p = run(["count", "--genome", self.fa], check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("--out is required", p.stderr)

    def test_stale_fai_is_reported(self):
        d = tempfile.mkdtemp(dir=self.tmp)
        fa = os.path.join(d, "g.fa")
        shutil.copy(self.fa, fa)
        with open(fa + ".fai", "w") as f:
            f.write("chr1\t5\t20\t60\t61\n")
        p = run(["count", "--genome", fa, "--out", os.path.join(d, "c.h5")], check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("the index is stale", p.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
