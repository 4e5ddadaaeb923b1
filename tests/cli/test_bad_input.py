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
import socket
import signal
import stat
import subprocess
import tempfile
import unittest
import zipfile

import h5py
import numpy as np

from test_cli import BIN, ENV, mpiexec, run, summary
from test_corpus import write_genome

TINY = {"model_type": "bert", "vocab_size": 4101, "hidden_size": 32, "num_hidden_layers": 2,
        "num_attention_heads": 2, "intermediate_size": 64, "max_position_embeddings": 512}
FAST = ["--threads", "1"]


def seq(rng, n):
    return "".join(rng.choice("ACGT") for _ in range(n))


def make_classifier(t, rng):
    """Labelled tables t("train.csv") (20 rows) and t("test.csv") (8), and the classifier
    t("clf") fine-tuned on them from the model t("hf") (run directory t("ft"))."""
    with open(t("train.csv"), "w") as f:
        f.write("sequence,label\n" + "".join(f"{seq(rng, 80)},{i % 2}\n" for i in range(20)))
    with open(t("test.csv"), "w") as f:
        f.write("sequence,label\n" + "".join(f"{seq(rng, 80)},{i % 2}\n" for i in range(8)))
    run(["finetune", "--model", t("hf"), "--train", t("train.csv"), "--test", t("test.csv"), "--out", t("ft"),
         "--epochs", "1", "--save-model", t("clf"), *FAST])


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b)
    return h.hexdigest()


def digest(path):
    """The bytes of a file, or of a directory tree (names, and the bytes of every file),
    hashed: what a command must leave as it was. A symlink is hashed as its target name."""
    h = hashlib.sha256()
    if os.path.islink(path):
        h.update(b"link:" + os.readlink(path).encode())
    elif os.path.isdir(path):
        for root, dirs, files in sorted(os.walk(path)):
            dirs.sort()
            for n in sorted(files):
                f = os.path.join(root, n)
                h.update(os.path.relpath(f, path).encode() + b"\0")
                h.update(b"link:" + os.readlink(f).encode() if os.path.islink(f) else sha256(f).encode())
            h.update(b"dirs:" + "/".join(dirs).encode())
    elif os.path.exists(path):
        h.update(sha256(path).encode())
    else:
        h.update(b"missing")
    return h.hexdigest()


class Row:
    """One hostile input: argv, what the error line must contain (str: a substring; a
    compiled pattern: re.search), the --out it must not leave behind, whether it is an
    option-parsing (CLI11) error rather than a runtime one, and the files and directories
    whose bytes the command must leave as they were (the user's data)."""

    def __init__(self, name, argv, expect, out=None, usage=False, keep=()):
        self.name, self.argv, self.expect, self.out, self.usage = name, argv, expect, out, usage
        self.keep = list(keep)


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
        make_classifier(t, rng)
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
        # Two names that differ as bytes and are written alike (a byte that is not UTF-8 as \xNN).
        fasta("alike-latin1.fa", b">chr\xff\n" + body.encode() + b">chr\\xff\n" + body.encode())
        fasta("bom-genome.fa", b"\xef\xbb\xbf>chr1\n" + body.encode())
        fasta("empty.fa", b"")

        fasta("five-bases.fa", b">s\nACGTA\n")
        run(["count", "--genome", t("five-bases.fa"), "--out", t("five-bases.h5"), "--kmax", "6", "--quiet"])
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
        # AAAAAA again on the row after its own: listed twice, the rows otherwise in rank order.
        at = next(i for i, r in enumerate(rows) if r.split("\t")[1] == "AAAAAA") + 1
        assert at < len(rows)
        fields = rows[at].split("\t")
        fields[1] = "AAAAAA"
        rows[at] = "\t".join(fields)
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
        cls.make_data_loss_inputs()
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
            # Without the export's marker: these damaged directories stand for models from
            # elsewhere (save_pretrained), whose files genemask checks field by field; an edited
            # export is refused by its marker's SHA-256 first (test_bad_input_silent.py).
            d = t(name)
            shutil.copytree(t("hf"), d)
            os.remove(os.path.join(d, ".genemask.json"))
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
    def make_data_loss_inputs(cls):
        """Copies of the good inputs that the data-loss rows aim at (so that a regression
        destroys a copy, not the fixtures of the other tests), and other spellings of them."""
        t = cls.t
        for src, dst in [("g.fa", "own.fa"), ("counts.h5", "own.h5"), ("test.csv", "own-test.csv"),
                         ("train.csv", "own-train.csv")]:
            shutil.copy(t(src), t(dst))
        for src, dst in [("shards", "own-shards"), ("run", "own-run"), ("hf", "own-hf"), ("clf", "own-clf")]:
            shutil.copytree(t(src), t(dst), symlinks=True)
        os.symlink(t("own.fa"), t("link.fa"))
        os.link(t("own.fa"), t("hard.fa"))
        os.mkfifo(t("fifo"))
        os.symlink("/dev/null", t("null-link"))
        # A user's directory: files and a subdirectory, no genemask marker.
        os.makedirs(t("user-dir", "sub"))
        for name, text in [("notes.txt", "mine\n"), ("config.json", "{}\n"), ("sub/data.csv", "a,b\n")]:
            with open(t("user-dir", name), "w") as f:
                f.write(text)
        # A directory that holds a file named as genemask names its shard files.
        os.makedirs(t("user-shards"))
        with open(t("user-shards", "train-r00000-00000.h5"), "w") as f:
            f.write("my own file\n")
        with open(t("a-file"), "w") as f:
            f.write("a file, not a directory\n")
        # A sweep whose --plan is DIR/plan.json, the file the sweep writes.
        os.makedirs(t("plan-inside"))
        plan = {"models": [{"name": "tiny", "path": "random", "config": t("tiny.json")}],
                "tasks": [{"name": "t", "train": t("train.csv"), "test": t("test.csv")}],
                "shots": [10], "seeds": 2}
        with open(t("plan-inside", "plan.json"), "w") as f:
            json.dump(plan, f, indent=1)
        cls.checkpoint = sorted(os.listdir(t("own-run", "checkpoints")))[-1]
        with open(t("tss.bed"), "w") as f:  # TSSs for a small promoter task
            f.write("".join(f"chr1\t{p}\t{p + 1}\tP{p}\t900\t+\n" for p in range(200, 15000, 97)))

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
            found += [os.path.join(root, n) for n in dirs + files
                      if fnmatch.fnmatch(n, "*.tmp.*") or n in (".genemask-staging", ".genemask.lock")]
        return found

    def check_row(self, row, launcher=(), cwd=None):
        out_existed = row.out is not None and os.path.lexists(row.out)
        kept = {k: digest(k) for k in row.keep}
        before = set(self.leftovers())  # a lock a test planted on purpose is not a leftover
        cmd = list(launcher) + [os.path.abspath(BIN)] + [str(a) for a in row.argv]
        p = subprocess.run(cmd, env=ENV, capture_output=True, timeout=300, cwd=cwd)
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
        self.assertEqual([f for f in self.leftovers() if f not in before], [],
                         "temporary files left behind" + where)
        for k, d in kept.items():
            self.assertEqual(digest(k), d, f"{k} was changed" + where)

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
            Row("two names that outputs write alike", count("alike-latin1.fa", t("c6.h5")),
                [t("alike-latin1.fa") + ":12:", "duplicate record name 'chr\\xff' (first seen on line 1)",
                 "written alike"], t("c6.h5")),
            Row("shards of two names that outputs write alike",
                ["shards", "--genome", t("alike-latin1.fa"), "--out", t("s6")],
                [t("alike-latin1.fa") + ":12:", "duplicate record name", "written alike"], t("s6")),
            Row("a genome with a byte-order mark", count("bom-genome.fa", t("c7.h5")),
                [t("bom-genome.fa") + ":1:", "starts with a UTF-8 byte-order mark before '>'"], t("c7.h5")),
            Row("empty FASTA", count("empty.fa", t("c5.h5")), [t("empty.fa"), "empty"], t("c5.h5")),
            Row("--out in a directory that does not exist", count("g.fa", t("no-such-dir", "counts.h5")),
                [t("no-such-dir")], t("no-such-dir")),
            # An unset shell variable: refused before the count (it failed after it, with a
            # library message).
            Row("an empty --out", count("g.fa", ""), ["--out is empty: an empty name names nothing; give a file name"]),
            Row("--kmax given twice", count("g.fa", t("c9.h5")) + ["--kmax", "4", "--kmax", "5"],
                ["--kmax: given 2 times; give it once"], t("c9.h5"), usage=True),
            # 0 or less printed a line at every update (sweep's --progress-interval 0 means none,
            # as its older --progress-every 0 did).
            Row("--progress-interval 0", count("g.fa", t("c8.h5"))[:-1] + ["--progress-interval", "0"],
                ["--progress-interval", "0"], t("c8.h5"), usage=True),
            Row("an empty --out directory", ["shards", "--genome", t("g.fa"), "--out", ""],
                ["--out is empty: an empty name names nothing; give a directory name"]),
        ])

    def test_npmi_pmi_vocab_motifs(self):
        t = self.t
        damaged = re.compile(r"overflow|damaged")
        self.check_table([
            Row("npmi: /counts/k3 deleted", ["npmi", "--counts", t("no-k3.h5"), "--out", t("n1.tsv")],
                [t("no-k3.h5"), "/counts/k3"], t("n1.tsv")),
            Row("npmi: a count of 2^63", ["npmi", "--counts", t("huge-k1.h5"), "--out", t("n2.tsv")],
                [t("huge-k1.h5"), "/counts/k1", damaged], t("n2.tsv")),
            # Every PMI undefined: the "ranking" was the 6-mers in code order, all nan.
            Row("npmi: a genome with no 6-mer", ["npmi", "--counts", t("five-bases.h5"), "--out", t("n3.tsv")],
                [t("five-bases.h5") + ": holds no 6-mer: no stretch of 6 A/C/G/T bases was counted, so there is "
                 "nothing to rank; count a longer genome, or rank a shorter --k"], t("n3.tsv")),
            Row("pmi-vocab: /counts/k3 deleted", ["pmi-vocab", "--counts", t("no-k3.h5"), "--out", t("v1.tsv")],
                [t("no-k3.h5"), "/counts/k3"], t("v1.tsv")),
            Row("pmi-vocab: a count of 2^63", ["pmi-vocab", "--counts", t("huge-k1.h5"), "--out", t("v2.tsv")],
                [t("huge-k1.h5"), "/counts/k1", damaged], t("v2.tsv")),
            Row("pmi-vocab: --kmin 8 --kmax 3",
                ["pmi-vocab", "--counts", t("counts.h5"), "--out", t("v3.tsv"), "--kmin", "8", "--kmax", "3"],
                ["kmin 8", "kmax 3"], t("v3.tsv")),
            # A vocabulary of 11- or 12-mers was written, and refused by every reader after.
            Row("pmi-vocab: --kmax 11",
                ["pmi-vocab", "--counts", t("counts.h5"), "--out", t("v4.tsv"), "--kmax", "11"],
                ["--kmax", "Value 11 not in range 2 to 10"], t("v4.tsv"), usage=True),
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
            # A corpus with no training sample (pretrain refused it later), and a shard file per
            # token (hundreds of thousands of files).
            Row("--valid-fraction 1", ["shards", "--genome", self.fa, "--out", t("s3"), "--valid-fraction", "1"],
                ["--valid-fraction", "must be >= 0 and < 1 (1 leaves no training sample)"], t("s3"), usage=True),
            Row("--shard-tokens 1", ["shards", "--genome", self.fa, "--out", t("s4"), "--shard-tokens", "1"],
                ["--shard-tokens", "1 not in range 512"], t("s4"), usage=True),
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
            # No sample: every figure undefined (it printed a masked fraction of 0).
            Row("--samples 0", ms("shards", "--samples", "0"), ["--samples", "Value 0 not in range 1"], usage=True),
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
            Row("--lr nan", pretrain("shards", "p6", "--lr", "nan"), ["--lr", "nan is not a finite number"], t("p6"),
                usage=True),
            Row("a k-mer listed twice in --npmi",
                pretrain("shards", "p7", "--npmi", t("dup-npmi.tsv"), masking="genemask"),
                [t("dup-npmi.tsv") + ":", "AAAAAA", "twice"], t("p7")),
            # A table the masking does not read was ignored without a word.
            Row("--npmi with --masking random", pretrain("shards", "p8", "--npmi", t("npmi.tsv")),
                ["--npmi is read by --masking genemask only, and the masking is random"], t("p8")),
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
                # Zero bytes in a table are refused before the row is split (what a download
                # that reserved the file's size and stopped leaves), naming where they start.
                [t("nul.tsv") + ":3:", "1 zero byte(s) from byte 11 of the line"], t("f6")),
            Row("NUL in a 6-mer text table", self.finetune("hf", "f7", train="nul-kmers.tsv"),
                [t("nul-kmers.tsv") + ":2:", "1 zero byte(s) from byte 19 of the line"], t("f7")),
            # --gpu was ignored on the CPU, and not checked at all.
            Row("--gpu 1 on the CPU", self.finetune("hf", "f8") + ["--gpu", "1"],
                ["--gpu", "chooses a GPU for --device cuda; the device is cpu"], t("f8"), usage=True),
            Row("--gpu -3", self.finetune("hf", "f9") + ["--gpu", "-3"], ["--gpu", "-3"], t("f9"), usage=True),
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
                [t("nul.tsv") + ":3:", "1 zero byte(s) from byte 11 of the line"], t("pr1.tsv")),
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
            Row("--progress-interval -1", ["sweep", "--plan", t("plan-seeds.yaml"), "--out", t("w4"), "--simulate",
                                           "0", "--progress-interval", "-1"],
                ["--progress-interval", "-1"], t("w4"), usage=True),
            # The older name is the same option, named in the error as --help names it first.
            Row("--progress-every -1", ["sweep", "--plan", t("plan-seeds.yaml"), "--out", t("w4"), "--simulate", "0",
                                        "--progress-every", "-1"],
                ["--progress-interval", "-1"], t("w4"), usage=True),
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
            Row("--gpu 0 on the CPU", ["variants", "--model", t("clf"), "--variants", t("v.vcf"), "--genome", self.fa,
                                       "--gpu", "0", "--out", t("va2")],
                ["--gpu", "chooses a GPU for --device cuda; the device is cpu"], t("va2"), usage=True),
        ])


    # ---- issue 21: the user's data -----------------------------------------------------

    def test_outputs_never_replace_inputs(self):
        t = self.t
        ck = t("own-run", "checkpoints", self.checkpoint)

        def row(name, argv, expect, keep, out=None):
            return Row(name, argv, expect, out=out, keep=keep)

        self.check_table([
            row("count --out = --genome", ["count", "--genome", t("own.fa"), "--out", t("own.fa"), "--quiet"],
                ["--out " + t("own.fa"), "--genome " + t("own.fa"), "never writes over its inputs"], [t("own.fa")]),
            row("count --out = --genome spelled ./", ["count", "--genome", t("own.fa"), "--out", t(".", "own.fa")],
                ["--genome " + t("own.fa"), "never writes over its inputs"], [t("own.fa")]),
            row("count --genome through a symlink", ["count", "--genome", t("link.fa"), "--out", t("own.fa")],
                ["--out " + t("own.fa"), "--genome " + t("link.fa")], [t("own.fa"), t("link.fa")]),
            row("count --out a hard link of --genome", ["count", "--genome", t("own.fa"), "--out", t("hard.fa")],
                ["--out " + t("hard.fa"), "--genome " + t("own.fa")], [t("own.fa")]),
            row("npmi --out = --counts", ["npmi", "--counts", t("own.h5"), "--out", t("own.h5")],
                ["--out " + t("own.h5"), "--counts " + t("own.h5")], [t("own.h5")]),
            row("pmi-vocab --out = --counts", ["pmi-vocab", "--counts", t("own.h5"), "--out", t("own.h5")],
                ["--out " + t("own.h5"), "--counts " + t("own.h5")], [t("own.h5")]),
            row("shards --out = --genome (a file)", ["shards", "--genome", t("own.fa"), "--out", t("own.fa")],
                ["--out " + t("own.fa"), "not a directory"], [t("own.fa")]),
            row("pretrain --out = --shards",
                ["pretrain", "--shards", t("own-shards"), "--masking", "random", "--model", t("tiny.json"),
                 "--out", t("own-shards"), "--steps", "1", *FAST],
                ["--out " + t("own-shards"), "--shards " + t("own-shards")], [t("own-shards")]),
            row("pretrain --out inside --shards",
                ["pretrain", "--shards", t("own-shards"), "--masking", "random", "--model", t("tiny.json"),
                 "--out", t("own-shards", "run"), "--steps", "1", *FAST],
                ["--out " + t("own-shards", "run"), "lies inside", "--shards " + t("own-shards")], [t("own-shards")],
                out=t("own-shards", "run")),
            row("export-hf --out = --run", ["export-hf", "--run", t("own-run"), "--out", t("own-run")],
                ["--out " + t("own-run"), "--run " + t("own-run")], [t("own-run")]),
            row("export-hf --out = a checkpoint of --run", ["export-hf", "--run", t("own-run"), "--out", ck],
                ["--out " + ck, "lies inside", "--run " + t("own-run")], [t("own-run")]),
            row("embed --out = --input", ["embed", "--model", t("own-hf"), "--input", t("own-test.csv"),
                                          "--out", t("own-test.csv"), *FAST],
                ["--out " + t("own-test.csv"), "--input " + t("own-test.csv")], [t("own-test.csv")]),
            row("predict --out = --input", ["predict", "--model", t("own-clf"), "--input", t("own-test.csv"),
                                            "--out", t("own-test.csv"), *FAST],
                ["--out " + t("own-test.csv"), "--input " + t("own-test.csv")], [t("own-test.csv")]),
            row("finetune --save-model = --model",
                ["finetune", "--model", t("own-hf"), "--train", t("own-train.csv"), "--test", t("own-test.csv"),
                 "--out", t("dl-ft1"), "--save-model", t("own-hf"), "--epochs", "1", *FAST],
                ["--save-model " + t("own-hf"), "--model " + t("own-hf")], [t("own-hf")], out=t("dl-ft1")),
            row("finetune --out inside --model",
                ["finetune", "--model", t("own-hf"), "--train", t("own-train.csv"), "--test", t("own-test.csv"),
                 "--out", t("own-hf", "ft"), "--epochs", "1", *FAST],
                ["--out " + t("own-hf", "ft"), "lies inside", "--model " + t("own-hf")], [t("own-hf")],
                out=t("own-hf", "ft")),
            row("overlap --filtered = --test",
                ["overlap", "--test", t("own-test.csv"), "--train", t("own-train.csv"), "--k", "6", "--out", t("dl-ov1"),
                 "--drop-above", "0.5", "--filtered", t("own-test.csv")],
                ["--filtered " + t("own-test.csv"), "--test " + t("own-test.csv")], [t("own-test.csv")],
                out=t("dl-ov1")),
            row("overlap --filtered = --train",
                ["overlap", "--test", t("own-test.csv"), "--train", t("own-train.csv"), "--k", "6", "--out", t("dl-ov2"),
                 "--drop-above", "0.5", "--filtered", t("own-train.csv")],
                ["--filtered " + t("own-train.csv"), "--train " + t("own-train.csv")], [t("own-train.csv")],
                out=t("dl-ov2")),
            row("sweep --plan DIR/plan.json --out DIR",
                ["sweep", "--plan", t("plan-inside", "plan.json"), "--out", t("plan-inside"), "--simulate", "0",
                 "--progress-every", "0"],
                [t("plan-inside", "plan.json"), "--plan", "never writes over its inputs"], [t("plan-inside")]),
        ])

    def test_directories_genemask_did_not_write(self):
        t = self.t
        tiny_pretrain = ["--masking", "random", "--model", t("tiny.json"), "--steps", "1", "--warmup", "1",
                         "--batch-per-rank", "2", "--grad-accum", "1", "--eval-every", "0", *FAST]
        self.check_table([
            Row("export-hf --out a user's directory", ["export-hf", "--run", t("run"), "--out", t("user-dir")],
                ["--out " + t("user-dir"), "is not empty", "no .genemask.json"], keep=[t("user-dir")]),
            Row("export-hf --out a user's directory, --force",
                ["export-hf", "--run", t("run"), "--out", t("user-dir"), "--force"],
                ["--out " + t("user-dir"), "is not empty"], keep=[t("user-dir")]),
            Row("export-hf --out an existing file", ["export-hf", "--run", t("run"), "--out", t("a-file")],
                ["--out " + t("a-file"), "not a directory"], keep=[t("a-file")]),
            Row("export-hf --out an earlier export, no --force", ["export-hf", "--run", t("run"), "--out", t("hf")],
                ["--out " + t("hf"), "earlier output of `genemask export-hf`", "--force"], keep=[t("hf")]),
            Row("export-hf --out a finetune's --save-model, --force",
                ["export-hf", "--run", t("run"), "--out", t("clf"), "--force"],
                ["--out " + t("clf"), "`genemask finetune --save-model`"], keep=[t("clf")]),
            Row("shards --out a directory with a user file named like a shard",
                ["shards", "--genome", self.fa, "--out", t("user-shards")],
                ["--out " + t("user-shards"), "is not empty", "train-r00000-00000.h5"], keep=[t("user-shards")]),
            Row("shards --out an earlier shard set, no --force", ["shards", "--genome", self.fa, "--out", t("shards")],
                ["--out " + t("shards"), "earlier output of `genemask shards`", "--force"], keep=[t("shards")]),
            Row("pretrain --out a user's directory",
                ["pretrain", "--shards", t("shards"), "--out", t("user-dir"), *tiny_pretrain],
                ["--out " + t("user-dir"), "is not empty", "not a `genemask pretrain` directory"],
                keep=[t("user-dir")]),
            Row("sweep --out a user's directory",
                ["sweep", "--plan", t("plan.yaml"), "--out", t("user-dir"), "--simulate", "0"],
                ["--out " + t("user-dir"), "is not empty", "not a `genemask sweep` directory"], keep=[t("user-dir")]),
            Row("finetune --out a user's directory", self.finetune("hf", "user-dir"),
                ["--out " + t("user-dir"), "is not empty"], keep=[t("user-dir")]),
            Row("report --out a pretraining run", ["report", "--results", t("sweep", "results.jsonl"), "--out", t("run"),
                                                   "--no-png"],
                ["--out " + t("run"), "`genemask pretrain`"], keep=[t("run")]),
        ])

    def test_devices_fifos_and_sockets_are_not_outputs(self):
        t = self.t
        self.check_table([
            Row("count --out a FIFO", ["count", "--genome", self.fa, "--out", t("fifo"), "--quiet"],
                ["--out " + t("fifo"), "FIFO", "never writes to devices"]),
            Row("count --out a symlink to /dev/null", ["count", "--genome", self.fa, "--out", t("null-link"), "--quiet"],
                ["--out " + t("null-link"), "character device"], keep=[t("null-link")]),
            Row("npmi --out a FIFO", ["npmi", "--counts", t("counts.h5"), "--out", t("fifo")],
                ["--out " + t("fifo"), "FIFO"]),
            Row("embed --out a symlink to /dev/null",
                ["embed", "--model", t("hf"), "--input", t("test.csv"), "--out", t("null-link"), *FAST],
                ["--out " + t("null-link"), "character device"], keep=[t("null-link")]),
            Row("export-hf --out /dev", ["export-hf", "--run", t("run"), "--out", "/dev/null"],
                ["--out /dev/null", "character device"]),
        ])
        self.assertTrue(stat.S_ISCHR(os.stat("/dev/null").st_mode))
        self.assertTrue(stat.S_ISFIFO(os.stat(t("fifo")).st_mode))

    def test_replacing_an_earlier_output_needs_force_and_spares_user_files(self):
        t = self.t
        out = t("rep-hf")
        run(["export-hf", "--run", t("run"), "--out", out])
        marker = json.load(open(os.path.join(out, ".genemask.json")))
        self.assertEqual(marker["command"], "export-hf")
        self.assertTrue(marker["complete"])
        self.assertIn("model.safetensors", marker["entries"])
        with open(os.path.join(out, "README.user"), "w") as f:
            f.write("my notes\n")
        before = sha256(os.path.join(out, "model.safetensors"))
        p = run(["export-hf", "--run", t("run"), "--out", out], check=False)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("--force", p.stderr)
        run(["export-hf", "--run", t("run"), "--out", out, "--force"])
        self.assertEqual(sha256(os.path.join(out, "model.safetensors")), before)  # the same checkpoint again
        with open(os.path.join(out, "README.user")) as f:
            self.assertEqual(f.read(), "my notes\n")  # not listed in the marker: never removed
        self.assertEqual(self.leftovers(), [])

        # A shard set rebuilt with --force: the old files go, a user's file stays, and a
        # user's file in the way of a new shard is refused, not replaced.
        sh = t("rep-shards")
        args = ["shards", "--genome", self.fa, "--max-tokens", "60", "--min-tokens", "20"]
        run(args + ["--out", sh, "--seed", "1"])
        with open(os.path.join(sh, "notes.txt"), "w") as f:
            f.write("keep me\n")
        run(args + ["--out", sh, "--seed", "2", "--force"])
        m = json.load(open(os.path.join(sh, "manifest.json")))
        self.assertEqual(m["seed"], 2)
        listed = {x["file"] for x in m["shards"]}
        on_disk = {n for n in os.listdir(sh) if n.endswith(".h5")}
        self.assertEqual(on_disk, listed)
        self.assertTrue(os.path.exists(os.path.join(sh, "notes.txt")))

    def test_one_writer_per_output_directory(self):
        """A second writer of a directory that a first one is writing stops at once and
        names the first; the first finishes with a consistent set of files."""
        t = self.t
        cases = [
            ("finetune", lambda out, seed: ["finetune", "--model", t("hf"), "--train", t("train.csv"), "--test",
                                            t("test.csv"), "--out", out, "--epochs", "1", "--seed", str(seed), *FAST],
             "metrics.json"),
            ("export-hf", lambda out, seed: ["export-hf", "--run", t("run"), "--out", out], "config.json"),
            ("dataset promoter", lambda out, seed: ["dataset", "promoter", "--genome", self.fa, "--tss", t("tss.bed"),
                                                    "--out", out, "--seed", str(seed), "--shots", "5"],
             "summary.json"),
        ]
        for name, argv, held in cases:
            with self.subTest(name):
                out = t(f"conc-{name.replace(' ', '-')}")
                first = subprocess.Popen([os.path.abspath(BIN)] + argv(out, 1), env=dict(
                    ENV, GENEMASK_TEST_HOLD_TEMP="4", GENEMASK_TEST_HOLD_TEMP_MATCH=held), stderr=subprocess.PIPE,
                    stdout=subprocess.PIPE, text=True)
                line = first.stderr.readline()
                while line and not line.startswith("genemask: holding"):
                    line = first.stderr.readline()
                self.assertTrue(line.startswith("genemask: holding"), line)
                second = run(argv(out, 2), check=False)
                self.assertEqual(second.returncode, 1, second.stderr)
                self.assertRegex(second.stderr, rf"{re.escape(out)}: is in use by another genemask {name} "
                                                rf"\(host [^,]+, pid {first.pid}\)")
                first.stderr.read()
                self.assertEqual(first.wait(timeout=120), 0)
                if name == "finetune":
                    self.assertEqual(json.load(open(os.path.join(out, "metrics.json")))["seed"], 1)
                if name == "dataset promoter":  # one build's split: every few-shot row is a training row
                    self.assertEqual(json.load(open(os.path.join(out, "summary.json")))["options"]["seed"], 1)
                    with open(os.path.join(out, "train.tsv")) as f:
                        train = {l.split("\t")[0] for l in f.read().splitlines()[1:]}
                    with open(os.path.join(out, "fewshot", "5", "train.tsv")) as f:
                        shots = [l.split("\t")[0].strip('"').split(" ") for l in f.read().splitlines()[1:]]
                    self.assertTrue(all(k[0] + "".join(x[-1] for x in k[1:]) in train for k in shots))
                self.assertFalse(os.path.exists(os.path.join(out, ".genemask.lock")))
        self.assertEqual(self.leftovers(), [])

    def test_a_cut_short_publication_is_refused_by_readers(self):
        """kill -9 while the marker still says "incomplete": the files are in place, but
        readers refuse the directory and say what to do; --force replaces it."""
        t = self.t
        out = t("cut-hf")
        p = subprocess.Popen([os.path.abspath(BIN), "export-hf", "--run", t("run"), "--out", out],
                             env=dict(ENV, GENEMASK_TEST_HOLD_TEMP="3", GENEMASK_TEST_HOLD_TEMP_MATCH=".genemask.json"),
                             stderr=subprocess.PIPE, text=True)
        holds = 0
        while holds < 2:  # the first hold writes "incomplete", the second would write "complete"
            line = p.stderr.readline()
            self.assertTrue(line, "export-hf ended before its second marker")
            holds += line.startswith("genemask: holding")
        p.kill()
        p.wait()
        p.stderr.close()
        self.assertFalse(json.load(open(os.path.join(out, ".genemask.json")))["complete"])
        self.assertTrue(os.path.exists(os.path.join(out, "model.safetensors")))
        r = run(["embed", "--model", out, "--input", t("test.csv"), "--out", t("cut-emb.h5"), *FAST], check=False)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn(f"{out}: is an incomplete output of `genemask export-hf`", r.stderr)
        run(["export-hf", "--run", t("run"), "--out", out])  # incomplete: replaced without --force
        self.assertTrue(json.load(open(os.path.join(out, ".genemask.json")))["complete"])


    def test_ranks_must_agree_before_starting(self):
        """Ranks given other arguments (MPMD), or a file that one rank lacks or sees with
        other content: one error line from rank 0 naming the ranks, every rank exits, no
        rank waits forever in a collective, and nothing is written."""
        t = self.t
        d0, d1, d2 = t("mpmd-0"), t("mpmd-1"), t("mpmd-2")
        for d in (d0, d1, d2):
            os.makedirs(d, exist_ok=True)
        shutil.copy(self.fa, os.path.join(d0, "g.fa"))
        with open(os.path.join(d2, "g.fa"), "w") as f:
            f.write(">other\nACGTACGTAC\n")

        def mpmd(argv0, argv1, wdir0=None, wdir1=None):
            cmd = mpiexec()
            for i, (argv, wdir) in enumerate([(argv0, wdir0), (argv1, wdir1)]):
                cmd += ([":"] if i else []) + ["-n", "1"] + (["--wdir", wdir] if wdir else [])
                cmd += [os.path.abspath(BIN)] + argv
            return subprocess.run(cmd, env=ENV, capture_output=True, text=True, timeout=120)

        host = socket.gethostname()
        cases = [
            ("another --genome", mpmd(["count", "--genome", self.fa, "--out", t("mp1.h5")],
                                      ["count", "--genome", t("own.fa"), "--out", t("mp1.h5")]),
             ["rank 1 was started with other arguments than rank 0", "--genome " + self.fa,
              "--genome " + t("own.fa"), "same command line"], t("mp1.h5")),
            ("another --kmax", mpmd(["count", "--genome", self.fa, "--out", t("mp2.h5"), "--kmax", "8"],
                                    ["count", "--genome", self.fa, "--out", t("mp2.h5"), "--kmax", "6"]),
             ["rank 1 was started with other arguments", "--kmax 8", "--kmax 6"], t("mp2.h5")),
            ("a file rank 1 lacks", mpmd(["count", "--genome", "g.fa", "--out", "c.h5"],
                                         ["count", "--genome", "g.fa", "--out", "c.h5"], d0, d1),
             [f"rank 1 on {host}: --genome: File does not exist: g.fa"], os.path.join(d0, "c.h5")),
            ("another file behind the same name", mpmd(["shards", "--genome", "g.fa", "--out", "s"],
                                                       ["shards", "--genome", "g.fa", "--out", "s"], d0, d2),
             ["rank 1 sees g.fa differently from rank 0", f"rank 1 on {host}: 18 bytes",
              "same inputs"], os.path.join(d0, "s")),
        ]
        for name, p, expect, out in cases:
            with self.subTest(name):
                where = f"\nexit {p.returncode}\nstderr: {p.stderr[-3000:]}"
                self.assertNotEqual(p.returncode, 0, where)
                lines = [l for l in p.stderr.splitlines() if l.startswith("genemask")]
                self.assertEqual(len(lines), 1, "want one error line, from rank 0" + where)
                self.assertTrue(lines[0].startswith("genemask: error: "), where)
                for e in expect:
                    self.assertIn(e, lines[0], where)
                self.assertFalse(os.path.exists(out), out + where)
        self.assertFalse(os.path.exists(os.path.join(d2, "s")))
        self.assertEqual(self.leftovers(), [])

    def test_a_name_as_long_as_the_file_system_allows(self):
        # 250 bytes: legal, but "NAME.tmp.HOST.PID" is not; the temporary gets a hashed name.
        t = self.t
        out = t("n" * 246 + ".tsv")
        p = run(["npmi", "--counts", t("counts.h5"), "--out", out])
        self.assertEqual(summary(p)["out"], out)
        with open(t("npmi.tsv")) as a, open(out) as b:
            self.assertEqual(a.read(), b.read())
        self.assertEqual(self.leftovers(), [])

    def test_a_name_that_is_not_utf8(self):
        # Latin-1 bytes in --out are a legal file name: the output is written under exactly
        # that name, and the JSON that names it (the summary line, summary.json, the marker)
        # carries it escaped as \xNN instead of failing after the work was done.
        t = self.t
        out = os.fsencode(t("np")) + b"\xe9\xff.tsv"
        p = subprocess.run([BIN, "npmi", "--counts", t("counts.h5"), "--out", out], env=ENV, capture_output=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(json.loads(p.stdout.decode().strip().splitlines()[-1])["out"], t("np") + "\\xe9\\xff.tsv")
        with open(t("npmi.tsv"), "rb") as a, open(out, "rb") as b:
            self.assertEqual(a.read(), b.read())
        d = os.fsencode(t("rep")) + b"\xff"
        p = subprocess.run([BIN, "overlap", "--test", t("test.csv"), "--train", t("train.csv"), "--out", d],
                           env=ENV, capture_output=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(os.path.join(d, b"summary.json"), "rb") as f:
            self.assertTrue(json.loads(f.read())["command_line"].endswith(t("rep") + "\\xff"))
        with open(os.path.join(d, b".genemask.json"), "rb") as f:
            json.loads(f.read())
        self.assertEqual(self.leftovers(), [])


if __name__ == "__main__":
    unittest.main()
