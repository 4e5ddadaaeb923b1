#!/usr/bin/env python3
"""Hostile input, one table per subcommand (issue 14's regressions). Good inputs are made
with the binary itself (count, npmi, shards, a tiny pretrain run, export-hf, a tiny
classifier), then damaged copies are fed back. For every row the command must:

1. fail cleanly, never by a signal or a crash: exit 1, or for an option-parsing error
   CLI11's own non-zero code below 128;
2. say so in exactly one stderr line (progress lines, which start with "[", aside) that
   starts with "genemask: error: " and names the offending file and field, line or value;
3. print no raw control bytes (only "\\n") and nothing that is not UTF-8;
4. leave nothing half-written: no --out that did not exist before, no "*.tmp.*" file.
"""
import fnmatch
import hashlib
import json
import os
import random
import re
import shutil
import subprocess
import tempfile
import unittest
import zipfile

import h5py
import numpy as np

from test_cli import BIN, ENV, run
from test_corpus import write_genome

TINY = {"model_type": "bert", "vocab_size": 4101, "hidden_size": 32, "num_hidden_layers": 2,
        "num_attention_heads": 2, "intermediate_size": 64, "max_position_embeddings": 512}
FAST = ["--threads", "1"]


def seq(rng, n):
    return "".join(rng.choice("ACGT") for _ in range(n))


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b)
    return h.hexdigest()


class Row:
    """One hostile input: argv, what the error line must contain (str: a substring; a
    compiled pattern: re.search), the --out it must not leave behind, and whether it is an
    option-parsing (CLI11) error rather than a runtime one."""

    def __init__(self, name, argv, expect, out=None, usage=False):
        self.name, self.argv, self.expect, self.out, self.usage = name, argv, expect, out, usage


class BadInput(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="genemask-bad-input-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, ignore_errors=True)  # also when setUpClass fails
        t = cls.t
        rng = random.Random(14)
        cls.fa = t("g.fa")
        cls.seqs = write_genome(cls.fa, rng, records=3, length=(18000, 22000))
        run(["count", "--genome", cls.fa, "--out", t("counts.h5"), "--quiet"])
        run(["npmi", "--counts", t("counts.h5"), "--out", t("npmi.tsv")])
        run(["shards", "--genome", cls.fa, "--out", t("shards"), "--max-tokens", "60", "--min-tokens", "20"])
        with open(t("tiny.json"), "w") as f:
            json.dump(TINY, f)
        run(["pretrain", "--shards", t("shards"), "--model", t("tiny.json"), "--masking", "random", "--out", t("run"),
             "--steps", "2", "--warmup", "1", "--batch-per-rank", "2", "--grad-accum", "1", "--eval-every", "0",
             *FAST])
        run(["export-hf", "--run", t("run"), "--out", t("hf")])
        with open(t("train.csv"), "w") as f:
            f.write("sequence,label\n" + "".join(f"{seq(rng, 80)},{i % 2}\n" for i in range(20)))
        with open(t("test.csv"), "w") as f:
            f.write("sequence,label\n" + "".join(f"{seq(rng, 80)},{i % 2}\n" for i in range(8)))
        run(["finetune", "--model", t("hf"), "--train", t("train.csv"), "--test", t("test.csv"), "--out", t("ft"),
             "--epochs", "1", "--save-model", t("clf"), *FAST])
        with open(t("v.vcf"), "w") as f:
            f.write("##fileformat=VCFv4.2\n#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO\n")
            f.write(f"chr1\t500\tv1\t{cls.seqs[0][499]}\t{'A' if cls.seqs[0][499] != 'A' else 'C'}\t.\t.\t.\n")
        cls.make_bad_inputs()

    @classmethod
    def t(cls, *names):
        return os.path.join(cls.tmp, *names)

    # ---- damaged copies of the good inputs -------------------------------------------

    @classmethod
    def make_bad_inputs(cls):
        t = cls.t
        good = cls.seqs[0][:600]
        lines = [good[i:i + 60] for i in range(0, len(good), 60)]
        body = "\n".join(lines) + "\n"

        def fasta(name, data):
            with open(t(name), "wb") as f:
                f.write(data)

        # Line 12 is the first line after the good 10-line record.
        fasta("esc-header.fa", (">chr1\n" + body).encode() + b">chr2 \x1b[31mred\x1b[0m\x00x\n" + body.encode())
        fasta("nul-seq.fa", (">chr1\n" + body).encode() + b"ACGTAC\x00GTACGT\n")
        garbage = bytes(random.Random(2).randrange(256) for _ in range(4096))
        fasta("garbage.fa", (">chr1\n" + body).encode() + b"\x00\xff\x1b" + garbage)
        # Not control bytes but not UTF-8 either: the message must escape them.
        fasta("dup-latin1.fa", b">chr\xff\xfe\n" + body.encode() + b">chr\xff\xfe\n" + body.encode())
        fasta("empty.fa", b"")

        shutil.copy(t("counts.h5"), t("no-k3.h5"))
        with h5py.File(t("no-k3.h5"), "r+") as h:
            del h["counts/k3"]
        shutil.copy(t("counts.h5"), t("huge-k1.h5"))
        with h5py.File(t("huge-k1.h5"), "r+") as h:
            k1 = h["counts/k1"][...]
            k1[0] = np.uint64(2 ** 63)
            h["counts/k1"][...] = k1

        with open(t("npmi.tsv")) as f:
            rows = f.read().splitlines(keepends=True)
        fields = rows[4].split("\t")  # awk 'NR==5{$2="AAAAAA"}1'
        fields[1] = "AAAAAA"
        rows[4] = "\t".join(fields)
        with open(t("dup-npmi.tsv"), "w") as f:
            f.writelines(rows)

        n1 = len(cls.seqs[0])
        with open(t("other-assembly.gff3"), "w") as f:
            f.write("##gff-version 3\n")
            f.write("scaffold_7\t.\tgene\t100\t900\t.\t+\t.\tID=g1\n")
            f.write("scaffold_8\t.\tgene\t100\t900\t.\t-\t.\tID=g2\n")
        with open(t("past-end.gff3"), "w") as f:
            f.write("##gff-version 3\n")
            f.write("chr1\t.\tgene\t100\t900\t.\t+\t.\tID=g1\n")
            f.write(f"chr1\t.\tgene\t{n1 - 50}\t{n1 + 100}\t.\t+\t.\tID=g2\n")

        cls.bad_token_shard = cls.damage_shards("shards-bad-token", cls.put_bad_token)
        cls.bad_offsets_shard = cls.damage_shards("shards-bad-offsets", cls.put_bad_offsets)
        cls.flipped_shard = cls.damage_shards("shards-flipped", cls.flip_bytes, update_manifest=False)

        cls.make_model_dirs()

        with open(t("nul.tsv"), "wb") as f:
            f.write(b"sequence\tlabel\n" + f"{seq(random.Random(3), 80)}\t0\n".encode())
            f.write(b"ACGTACGTAC\x00GTACGTTTGA\t1\n")
        with open(t("nul-kmers.tsv"), "wb") as f:
            f.write(b"sequence\tlabel\n" + b"ACGTAC CGTACG GTAC\x00A TACGTT\t1\n")

        cls.make_plans()
        run(["sweep", "--plan", t("plan.yaml"), "--out", t("sweep"), "--simulate", "0", "--progress-every", "0"])
        with open(t("sweep", "results.jsonl"), "rb") as f:
            res = f.read().splitlines(keepends=True)
        assert len(res) >= 3, res
        res[1] = b'{"job": "tiny|t|10|2", "status": \x1b[2J\x00 garbage\n'
        with open(t("results-garbage.jsonl"), "wb") as f:
            f.writelines(res)

    @classmethod
    def damage_shards(cls, name, damage, update_manifest=True):
        """A copy of the shard set with its first train shard damaged; with update_manifest,
        the manifest's SHA-256 is made to match (a crafted corpus, not a damaged copy)."""
        d = cls.t(name)
        shutil.copytree(cls.t("shards"), d)
        with open(os.path.join(d, "manifest.json")) as f:
            manifest = json.load(f)
        entry = next(s for s in manifest["shards"] if s["split"] == "train")
        path = os.path.join(d, entry["file"])
        damage(path)
        if update_manifest:
            entry["sha256"] = sha256(path)
            with open(os.path.join(d, "manifest.json"), "w") as f:
                json.dump(manifest, f, indent=2)
        return path

    @staticmethod
    def put_bad_token(path):
        # In every sample, so that a training run reads one in its first batch.
        with h5py.File(path, "r+") as h:
            tok = h["tokens"][...]
            tok[h["offsets"][:-1]] = 4101
            h["tokens"][...] = tok

    @staticmethod
    def put_bad_offsets(path):
        with h5py.File(path, "r+") as h:
            off = h["offsets"][...]
            off[2] = off[1]
            h["offsets"][...] = off

    @staticmethod
    def flip_bytes(path):
        with open(path, "r+b") as f:
            data = bytearray(f.read())
            mid = len(data) // 2
            for i in range(mid, mid + 200):
                data[i] ^= 0xFF
            f.seek(0)
            f.write(data)

    @classmethod
    def make_model_dirs(cls):
        t = cls.t

        def copy(name, edit_config=None):
            d = t(name)
            shutil.copytree(t("hf"), d)
            if edit_config:
                with open(os.path.join(d, "config.json")) as f:
                    cfg = json.load(f)
                cfg.update(edit_config)
                with open(os.path.join(d, "config.json"), "w") as f:
                    json.dump(cfg, f)
            return d

        copy("hf-layers", {"num_hidden_layers": 1000000})
        copy("hf-hidden", {"hidden_size": 1e9})
        copy("hf-positions", {"max_position_embeddings": 1000000000000})
        d = copy("hf-vocab")
        with open(os.path.join(d, "vocab.txt"), "w") as f:
            f.write("[PAD]\n[UNK]\n")

        import torch
        from safetensors.torch import load_file
        d = copy("hf-cut-bin")
        torch.save(load_file(os.path.join(d, "model.safetensors")), os.path.join(d, "pytorch_model.bin"))
        os.remove(os.path.join(d, "model.safetensors"))
        src = os.path.join(d, "pytorch_model.bin")
        with zipfile.ZipFile(src) as z:
            entries = [(i, z.read(i.filename)) for i in z.infolist()]
        cut = next(i.filename for i, data in entries if i.filename.endswith("/data/0") and len(data) > 64)
        with zipfile.ZipFile(src + ".new", "w", zipfile.ZIP_STORED) as z:
            for info, data in entries:
                z.writestr(info, data[:64] if info.filename == cut else data)
        os.replace(src + ".new", src)

    @classmethod
    def make_plans(cls):
        t = cls.t
        base = ("models:\n  - {name: %s, path: random, config: tiny.json}\n"
                "tasks:\n  - {name: t, train: train.csv, test: test.csv}\n"
                "shots: [10]\n"
                "seeds: %s\n")
        with open(t("plan.yaml"), "w") as f:
            f.write(base % ("tiny", "3"))
        with open(t("plan-seeds.yaml"), "w") as f:
            f.write(base % ("tiny", "1000000000000"))
        with open(t("plan-long-name.yaml"), "w") as f:
            f.write(base % ("m" * 300, "2"))
        laughs = ["a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
        for i in range(1, 10):
            laughs.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]")
        with open(t("plan-laughs.yaml"), "w") as f:
            f.write("\n".join(laughs) + "\n" + base % ("tiny", "*a9"))

    # ---- the check every row gets ----------------------------------------------------

    def leftovers(self):
        found = []
        for root, dirs, files in os.walk(self.tmp):
            found += [os.path.join(root, n) for n in dirs + files if fnmatch.fnmatch(n, "*.tmp.*")]
        return found

    def check_row(self, row):
        out_existed = row.out is not None and os.path.lexists(row.out)
        cmd = [os.path.abspath(BIN)] + [str(a) for a in row.argv]
        p = subprocess.run(cmd, env=ENV, capture_output=True, timeout=300)
        raw = p.stderr
        where = f"\n$ {' '.join(cmd)}\nexit {p.returncode}\nstderr: {raw[-3000:]!r}"
        if row.usage:
            self.assertTrue(0 < p.returncode < 128, "usage error: want a non-zero exit below 128" + where)
        else:
            self.assertEqual(p.returncode, 1, where)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            self.fail(f"stderr is not UTF-8 ({e})" + where)
        bad = sorted({c for c in text if (ord(c) < 0x20 and c != "\n") or ord(c) == 0x7f})
        self.assertFalse(bad, f"raw control bytes {bad!r} in stderr" + where)
        lines = [l for l in text.split("\n") if l.strip() and not l.startswith("[")]
        self.assertEqual(len(lines), 1, "want exactly one error line" + where)
        line = lines[0]
        self.assertTrue(line.startswith("genemask: error: "), where)
        for e in row.expect:
            if isinstance(e, re.Pattern):
                self.assertRegex(line, e, where)
            else:
                self.assertIn(e, line, where)
        if row.out is not None and not out_existed and os.path.lexists(row.out):
            left = [os.path.relpath(os.path.join(r, n), row.out) for r, ds, fs in os.walk(row.out) for n in ds + fs]
            self.fail(f"{row.out} was left behind (holding {left})" + where)
        self.assertEqual(self.leftovers(), [], "temporary files left behind" + where)

    def check_table(self, rows):
        for row in rows:
            with self.subTest(row.name):
                self.check_row(row)

    # ---- one table per subcommand ----------------------------------------------------

    def test_count(self):
        t = self.t

        def count(fa, out):
            return ["count", "--genome", t(fa), "--out", out, "--quiet"]

        self.check_table([
            Row("ESC and NUL in a header", count("esc-header.fa", t("c1.h5")),
                [t("esc-header.fa") + ":12:", "byte 0x1b", "header"], t("c1.h5")),
            Row("NUL in a sequence", count("nul-seq.fa", t("c2.h5")),
                [t("nul-seq.fa") + ":12:", "invalid base byte 0x00"], t("c2.h5")),
            Row("binary garbage after a record", count("garbage.fa", t("c3.h5")),
                [t("garbage.fa") + ":12:", "byte 0x00"], t("c3.h5")),
            Row("non-UTF-8 header bytes in a duplicate name", count("dup-latin1.fa", t("c4.h5")),
                [t("dup-latin1.fa") + ":12:", "duplicate record name 'chr\\xff\\xfe'"], t("c4.h5")),
            Row("empty FASTA", count("empty.fa", t("c5.h5")), [t("empty.fa"), "empty"], t("c5.h5")),
            Row("--out in a directory that does not exist", count("g.fa", t("no-such-dir", "counts.h5")),
                [t("no-such-dir")], t("no-such-dir")),
        ])

    def test_npmi_pmi_vocab_motifs(self):
        t = self.t
        damaged = re.compile(r"overflow|damaged")
        self.check_table([
            Row("npmi: /counts/k3 deleted", ["npmi", "--counts", t("no-k3.h5"), "--out", t("n1.tsv")],
                [t("no-k3.h5"), "/counts/k3"], t("n1.tsv")),
            Row("npmi: a count of 2^63", ["npmi", "--counts", t("huge-k1.h5"), "--out", t("n2.tsv")],
                [t("huge-k1.h5"), "/counts/k1", damaged], t("n2.tsv")),
            Row("pmi-vocab: /counts/k3 deleted", ["pmi-vocab", "--counts", t("no-k3.h5"), "--out", t("v1.tsv")],
                [t("no-k3.h5"), "/counts/k3"], t("v1.tsv")),
            Row("pmi-vocab: a count of 2^63", ["pmi-vocab", "--counts", t("huge-k1.h5"), "--out", t("v2.tsv")],
                [t("huge-k1.h5"), "/counts/k1", damaged], t("v2.tsv")),
            Row("pmi-vocab: --kmin 8 --kmax 3",
                ["pmi-vocab", "--counts", t("counts.h5"), "--out", t("v3.tsv"), "--kmin", "8", "--kmax", "3"],
                ["kmin 8", "kmax 3"], t("v3.tsv")),
            Row("motifs: a k-mer listed twice", ["motifs", "--npmi", t("dup-npmi.tsv"), "nTATAAAr"],
                [t("dup-npmi.tsv") + ":", "AAAAAA", "twice"]),
        ])

    def test_shards(self):
        t = self.t
        self.check_table([
            Row("genes on sequences the genome lacks",
                ["shards", "--genome", self.fa, "--out", t("s1"), "--genes", t("other-assembly.gff3")],
                [t("other-assembly.gff3"), "none of its 2 genes lies on a sequence of the genome", "scaffold_7"],
                t("s1")),
            Row("a gene past its chromosome's end",
                ["shards", "--genome", self.fa, "--out", t("s2"), "--genes", t("past-end.gff3")],
                [t("past-end.gff3") + ":3:", "past the end", str(len(self.seqs[0]) + 100)], t("s2")),
        ])

    def test_mask_stats(self):
        t = self.t

        def ms(shards, *extra):
            return ["mask-stats", "--shards", t(shards), "--masking", "random", *extra]

        self.check_table([
            Row("token id 4101", ms("shards-bad-token"), [self.bad_token_shard, "sample", "4101"]),
            Row("offsets not increasing", ms("shards-bad-offsets"), [self.bad_offsets_shard, "sample 1", "offsets"]),
            Row("200 flipped bytes", ms("shards-flipped"), [self.flipped_shard, "SHA-256"]),
            Row("a k-mer listed twice in --npmi",
                ["mask-stats", "--shards", t("shards"), "--masking", "genemask", "--npmi", t("dup-npmi.tsv")],
                [t("dup-npmi.tsv") + ":", "AAAAAA", "twice"]),
        ])

    def test_pretrain(self):
        t = self.t

        def pretrain(shards, out, *extra, masking="random"):
            return ["pretrain", "--shards", t(shards), "--model", t("tiny.json"), "--masking", masking,
                    "--out", t(out), "--steps", "2", "--warmup", "1", "--batch-per-rank", "2", "--grad-accum", "1",
                    "--eval-every", "0", *FAST, *extra]

        self.check_table([
            Row("token id 4101", pretrain("shards-bad-token", "p1"), [self.bad_token_shard, "sample", "4101"],
                t("p1")),
            Row("token id 4101, --verify", pretrain("shards-bad-token", "p2", "--verify"),
                [self.bad_token_shard, "sample", "4101"], t("p2")),
            Row("offsets not increasing", pretrain("shards-bad-offsets", "p3"),
                [self.bad_offsets_shard, "sample 1", "offsets"], t("p3")),
            Row("200 flipped bytes, --verify", pretrain("shards-flipped", "p4", "--verify"),
                [self.flipped_shard, "SHA-256"], t("p4")),
            Row("--keep-checkpoints 0", pretrain("shards", "p5", "--keep-checkpoints", "0"),
                ["--keep-checkpoints", "0"], t("p5")),
            Row("--lr nan", pretrain("shards", "p6", "--lr", "nan"), ["--lr", "nan"], t("p6")),
            Row("a k-mer listed twice in --npmi",
                pretrain("shards", "p7", "--npmi", t("dup-npmi.tsv"), masking="genemask"),
                [t("dup-npmi.tsv") + ":", "AAAAAA", "twice"], t("p7")),
        ])

    def model_rows(self, argv):
        """The damaged model directories, for a command given as argv(model_dir, n)."""
        t = self.t
        return [
            Row("pytorch_model.bin with a data record cut to 64 bytes", argv("hf-cut-bin", 1),
                [t("hf-cut-bin", "pytorch_model.bin"), "64"]),
            Row("num_hidden_layers 1000000", argv("hf-layers", 2),
                [t("hf-layers", "config.json"), "num_hidden_layers", "1000000"]),
            Row("hidden_size 1e9 (a float)", argv("hf-hidden", 3),
                [t("hf-hidden", "config.json"), "hidden_size", "1000000000"]),
            Row("max_position_embeddings 10^12", argv("hf-positions", 4),
                [t("hf-positions", "config.json"), "max_position_embeddings", "1000000000000"]),
            Row("a 2-line vocab.txt", argv("hf-vocab", 5), [t("hf-vocab", "vocab.txt"), "2 tokens"]),
        ]

    def finetune(self, model, out, train="train.csv"):
        t = self.t
        return ["finetune", "--model", t(model), "--train", t(train), "--test", t("test.csv"), "--out", t(out),
                "--epochs", "1", *FAST]

    def test_finetune(self):
        t = self.t
        rows = self.model_rows(lambda m, n: self.finetune(m, f"f{n}"))
        for r, n in zip(rows, range(1, 6)):
            r.out = t(f"f{n}")
        rows += [
            Row("NUL in a task table's sequence", self.finetune("hf", "f6", train="nul.tsv"),
                # "byte 0x00" is how binary bytes are named elsewhere (FASTA, count).
                [t("nul.tsv") + ":3:", re.compile(r"(\\x00|byte 0x00) at position 11 is not a base")], t("f6")),
            Row("NUL in a 6-mer text table", self.finetune("hf", "f7", train="nul-kmers.tsv"),
                [t("nul-kmers.tsv") + ":2:", "'GTAC\\x00A'", "is not a base"], t("f7")),
        ]
        self.check_table(rows)

    def test_embed(self):
        t = self.t
        rows = self.model_rows(lambda m, n: ["embed", "--model", t(m), "--input", t("test.csv"),
                                             "--out", t(f"e{n}.h5"), *FAST])
        for r, n in zip(rows, range(1, 6)):
            r.out = t(f"e{n}.h5")
        self.check_table(rows)

    def test_predict(self):
        t = self.t
        self.check_table([
            Row("NUL in a task table's sequence",
                ["predict", "--model", t("clf"), "--input", t("nul.tsv"), "--out", t("pr1.tsv"), *FAST],
                [t("nul.tsv") + ":3:", re.compile(r"(\\x00|byte 0x00) at position 11 is not a base")], t("pr1.tsv")),
        ])

    def test_sweep(self):
        t = self.t

        def sweep(plan, out):
            return ["sweep", "--plan", t(plan), "--out", t(out), "--simulate", "0", "--progress-every", "0"]

        self.check_table([
            Row("billion laughs", sweep("plan-laughs.yaml", "w1"),
                [t("plan-laughs.yaml") + ":", "expands to more than"], t("w1")),
            Row("seeds: 10^12", sweep("plan-seeds.yaml", "w2"),
                [t("plan-seeds.yaml"), "seeds", "1000000000000"], t("w2")),
            Row("a model name of 300 characters", sweep("plan-long-name.yaml", "w3"),
                [t("plan-long-name.yaml"), "models[0].name", "file-name limit"], t("w3")),
        ])

    def test_report(self):
        t = self.t
        self.check_table([
            Row("a garbage middle line", ["report", "--results", t("results-garbage.jsonl"), "--out", t("r1"),
                                          "--no-png"],
                [t("results-garbage.jsonl") + ":2:", "not valid JSON"], t("r1")),
        ])

    def test_variants(self):
        t = self.t
        self.check_table([
            Row("--flank -5", ["variants", "--model", t("clf"), "--variants", t("v.vcf"), "--genome", self.fa,
                               "--flank", "-5", "--out", t("va1")],
                ["--flank", "-5"], t("va1"), usage=True),
        ])


if __name__ == "__main__":
    unittest.main()
