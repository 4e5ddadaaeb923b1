#!/usr/bin/env python3
"""End-to-end tests of `genemask finetune` on synthetic tasks (class 1 sequences carry a
planted TATAAA, class 2 of the 3-class task a CCAATC): outputs checked against
scikit-learn, an independent Python forward pass of the saved classifier, determinism,
model sources (random, a pretrain run, its HF export), regimes, and input errors."""
import itertools
import json
import math
import os
import random
import re
import shutil
import sys
import tempfile
import unittest

import numpy as np
from sklearn.metrics import f1_score, matthews_corrcoef, roc_auc_score

from test_cli import run, summary
from test_corpus import write_genome

HERE = os.path.dirname(os.path.abspath(__file__))
TINY = {"model_type": "bert", "vocab_size": 4101, "hidden_size": 32, "num_hidden_layers": 1,
        "num_attention_heads": 2, "intermediate_size": 64, "max_position_embeddings": 512}
MOTIFS = {1: "TATAAA", 2: "CCAATC"}
# fp32: the tests compare with fp32 references (auto, the default, is bf16 on CPUs with bf16
# instructions; test_runtime checks the default).
FAST = ["--threads", "1", "--precision", "fp32"]


def make_seq(rng, label, length):
    while True:
        s = [rng.choice("ACGT") for _ in range(length)]
        if not any(m in "".join(s) for m in MOTIFS.values()):
            break
    if label in MOTIFS:
        i = rng.randint(0, length - 6)
        s[i:i + 6] = MOTIFS[label]
    return "".join(s)


def kmers(seq):
    return " ".join(seq[i:i + 6] for i in range(len(seq) - 5))


def write_task(path, rows, released):
    """released: the paper's layout (quoted 6-mer text, TSV); else plain CSV of bases."""
    with open(path, "w") as f:
        if released:
            f.write('"sequence"\t"label"\n')
            f.writelines(f'"{kmers(s)}"\t"{y}"\n' for s, y in rows)
        else:
            f.write("sequence,label\n")
            f.writelines(f"{s},{y}\n" for s, y in rows)


def read_predictions(path):
    with open(path) as f:
        header = f.readline().rstrip("\n").split("\t")
        rows = [l.rstrip("\n").split("\t") for l in f]
    assert header[0] == "id" and all(r[0].startswith("line") for r in rows), (header, rows[:1])
    return header[1:], [r[1] for r in rows], np.array([[float(x) for x in r[2:]] for r in rows])


def token_ids(seq):
    """DNABERT-6 ids, independent of the C++ tokenizer: [CLS]=2, [SEP]=3, 6-mers from 5 in
    itertools.product('ATCG') order."""
    vocab = {"".join(p): 5 + i for i, p in enumerate(itertools.product("ATCG", repeat=6))}
    return [2] + [vocab[seq[i:i + 6]] for i in range(len(seq) - 5)][:510] + [3]


class Finetune(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="genemask-finetune-")
        rng = random.Random(7)
        t = lambda n: os.path.join(cls.tmp, n)
        train = [(make_seq(rng, i % 2, rng.randint(70, 100)), i % 2) for i in range(1100)]  # 550 per class
        test = [(make_seq(rng, i % 2, rng.randint(70, 100)), i % 2) for i in range(160)]
        cls.test_labels = [str(y) for _, y in test]
        cls.test_seqs = [s for s, _ in test]
        write_task(t("train.tsv"), train, True)
        write_task(t("train.csv"), train, False)
        write_task(t("test.tsv"), test, True)
        write_task(t("test.csv"), test, False)
        train3 = [(make_seq(rng, i % 3, 80), i % 3) for i in range(150)]
        test3 = [(make_seq(rng, i % 3, 80), i % 3) for i in range(90)]
        write_task(t("train3.csv"), train3, False)
        write_task(t("test3.csv"), test3, False)
        cls.test3_labels = [y for _, y in test3]
        with open(t("tiny.json"), "w") as f:
            json.dump(TINY, f)
        cls.paths = {n: t(n) for n in ["train.tsv", "train.csv", "test.tsv", "test.csv", "train3.csv", "test3.csv",
                                       "tiny.json"]}

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def finetune(self, out, *extra, model="random", train="train.tsv", test="test.tsv", check=True, ranks=None):
        args = ["finetune", "--model", model, "--train", self.paths.get(train, train),
                "--test", self.paths.get(test, test), "--out", os.path.join(self.tmp, out)]
        if model == "random":
            args += ["--config", self.paths["tiny.json"]]
        return run(args + list(extra) + FAST, check=check, ranks=ranks)

    def outputs(self, out):
        with open(os.path.join(self.tmp, out, "metrics.json")) as f:
            m = json.load(f)
        return m, read_predictions(os.path.join(self.tmp, out, "predictions.tsv"))

    def check_against_sklearn(self, m, probs, y):
        """metrics.json agrees with what a user computes from predictions.tsv."""
        classes = probs.shape[1]
        np.testing.assert_allclose(probs.sum(axis=1), 1.0, atol=1e-6)
        pred = probs.argmax(axis=1)
        self.assertEqual(m["accuracy"], float(np.mean(pred == y)))
        auc = roc_auc_score(y, probs[:, 1]) if classes == 2 else roc_auc_score(y, probs, multi_class="ovo",
                                                                                 average="macro")
        self.assertAlmostEqual(m["auc"], auc, delta=1e-9)
        self.assertAlmostEqual(m["f1"], f1_score(y, pred, average="macro", zero_division=0), delta=1e-9)
        self.assertAlmostEqual(m["mcc"], matthews_corrcoef(y, pred), delta=1e-9)

    def test_outputs_match_sklearn_and_formats_agree(self):
        s = summary(self.finetune("r10", "--shots", "10", "--seed", "3"))
        for k in ["command", "model", "train", "test", "shots", "seed", "n_train", "n_test", "classes", "accuracy", "auc",
                  "f1", "mcc", "epochs", "steps", "lr", "batch", "seconds", "train_examples_per_s"]:
            self.assertIn(k, s)
        self.assertEqual((s["command"], s["model"], s["n_train"], s["n_test"], s["classes"]), ("finetune", "random", 20, 160, 2))
        self.assertEqual((s["lr"], s["epochs"], s["batch"], s["steps"]), (4e-4, 20, 5, 80))  # small regime
        m, (header, labels, probs) = self.outputs("r10")
        self.assertEqual(header, ["label", "prob_0", "prob_1"])
        self.assertEqual(labels, self.test_labels)
        self.assertEqual(probs.shape, (160, 2))
        for k in ["accuracy", "auc", "f1", "mcc", "n_test", "n_train", "classes", "seed", "shots", "lr", "epochs",
                  "batch", "seconds"]:
            self.assertEqual(m[k], s[k], k)
        self.assertEqual(m["class_names"], ["0", "1"])
        self.assertEqual(m["model"], "random")
        self.check_against_sklearn(m, probs, np.array([int(l) for l in labels]))
        lines = m["train_lines"]
        self.assertEqual(len(lines), 20)
        self.assertEqual(lines, sorted(set(lines)))
        self.assertEqual(sum(1 for l in lines if (l - 2) % 2 == 1), 10)  # line L holds row L-2, label (L-2) % 2
        # The plain CSV of the same task gives the same shots and the same predictions.
        self.finetune("r10csv", "--shots", "10", "--seed", "3", train="train.csv", test="test.csv")
        m2, (_, _, probs2) = self.outputs("r10csv")
        self.assertEqual(m2["train_lines"], lines)
        np.testing.assert_array_equal(probs, probs2)

    def test_determinism_and_seeds(self):
        a, b, c = (os.path.join(self.tmp, x, "predictions.tsv") for x in ["d1", "d2", "d3"])
        self.finetune("d1", "--shots", "10", "--seed", "5", "--epochs", "3")
        self.finetune("d2", "--shots", "10", "--seed", "5", "--epochs", "3")
        self.finetune("d3", "--shots", "10", "--seed", "6", "--epochs", "3")
        with open(a) as f1, open(b) as f2, open(c) as f3:
            pa, pb, pc = f1.read(), f2.read(), f3.read()
        self.assertEqual(pa, pb)
        self.assertNotEqual(pa, pc)
        la, lc = self.outputs("d1")[0]["train_lines"], self.outputs("d3")[0]["train_lines"]
        self.assertNotEqual(la, lc)
        self.assertEqual(len(la), len(lc))

    def test_learnable_task_reaches_high_accuracy(self):
        # Over seeds 1-6 these settings gave accuracy 0.88-0.95 and AUC 0.96-0.995 (chance: 0.5).
        s = summary(self.finetune("learn", "--shots", "100", "--seed", "1", "--epochs", "15", "--lr", "1e-3",
                                  "--batch", "10"))
        self.assertGreaterEqual(s["accuracy"], 0.8, s)
        self.assertGreaterEqual(s["auc"], 0.93, s)
        self.assertEqual(s["n_train"], 200)
        self.assertEqual(s["steps"], 300)

    def test_three_classes(self):
        s = summary(self.finetune("three", "--shots", "20", "--epochs", "4", train="train3.csv", test="test3.csv"))
        self.assertEqual((s["classes"], s["n_train"], s["n_test"]), (3, 60, 90))
        m, (header, labels, probs) = self.outputs("three")
        self.assertEqual(header, ["label", "prob_0", "prob_1", "prob_2"])
        self.assertEqual(m["class_names"], ["0", "1", "2"])
        self.check_against_sklearn(m, probs, np.array(self.test3_labels))

    def test_regimes(self):
        # n >= 500: lr 5e-5, batch 15 (5 epochs; one here for time).
        s = summary(self.finetune("big", "--shots", "500", "--epochs", "1", "--eval-batch", "200"))
        self.assertEqual((s["lr"], s["batch"], s["n_train"], s["steps"]), (5e-5, 15, 1000, 67))
        self.assertEqual(s["regime"], "large")
        # A fixed shot file: n is its rows per class.
        with open(self.paths["train.csv"]) as f:
            head = f.readlines()[:13]  # header + 12 rows: 6 per class
        fixed = os.path.join(self.tmp, "fixed.csv")
        with open(fixed, "w") as f:
            f.writelines(head)
        s = summary(self.finetune("fixed", "--epochs", "2", "--warmup-fraction", "0.5", "--lr", "1e-3",
                                  train=fixed, test="test.csv"))
        self.assertEqual((s["n_train"], s["batch"], s["steps"], s["lr"], s["shots"]), (12, 5, 6, 1e-3, 0))
        m = self.outputs("fixed")[0]
        self.assertEqual(m["warmup_steps"], 3)
        self.assertEqual(m["train_lines"], list(range(2, 14)))

    def test_pretrained_sources_and_saved_classifier(self):
        import torch
        sys.path.insert(0, os.path.join(HERE, "..", "model"))
        import classifier_reference as ref
        fa = os.path.join(self.tmp, "g.fa")
        write_genome(fa, random.Random(3), records=1, length=(20000, 20000))
        shards = os.path.join(self.tmp, "shards")
        run(["shards", "--genome", fa, "--out", shards, "--max-tokens", "60", "--min-tokens", "20"])
        run_dir = os.path.join(self.tmp, "pre")
        run(["pretrain", "--shards", shards, "--masking", "random", "--model", self.paths["tiny.json"], "--out", run_dir,
             "--steps", "2", "--warmup", "1", "--batch-per-rank", "2", "--grad-accum", "1", "--eval-every", "0",
             "--checkpoint-every", "2", "--threads", "1"])
        hf = os.path.join(self.tmp, "pre-hf")
        run(["export-hf", "--run", run_dir, "--out", hf])
        saved = os.path.join(self.tmp, "saved")
        s = summary(self.finetune("from-run", "--shots", "10", "--epochs", "2", "--save-model", saved, model=run_dir))
        self.assertTrue(s["model"].endswith(os.path.join("checkpoints", "step-00000002")), s["model"])
        self.assertFalse(s["pooler_loaded"])
        s2 = summary(self.finetune("from-hf", "--shots", "10", "--epochs", "2", model=hf))
        self.assertEqual(s2["model"], hf)
        _, (_, _, p_run) = self.outputs("from-run")
        _, (_, _, p_hf) = self.outputs("from-hf")
        np.testing.assert_array_equal(p_run, p_hf)  # same weights, same seed
        # The saved classifier, run by an independent forward pass, gives predictions.tsv.
        with open(os.path.join(saved, "config.json")) as f:
            cfg = json.load(f)
        self.assertEqual(cfg["architectures"], ["BertForSequenceClassification"])
        self.assertEqual(cfg["id2label"], {"0": "0", "1": "1"})
        w = ref.load_safetensors(os.path.join(saved, "model.safetensors"))
        probs = []
        with torch.no_grad():
            for seq in self.test_seqs:
                ids = torch.tensor([token_ids(seq)])
                probs.append(torch.softmax(ref.logits(cfg, w, ids, torch.ones_like(ids)), -1)[0].numpy())
        self.assertLess(np.abs(np.array(probs) - p_run).max(), 1e-5)
        # Fine-tuning from a saved classifier takes its encoder and pooler.
        s3 = summary(self.finetune("from-saved", "--shots", "10", "--epochs", "1", model=saved))
        self.assertTrue(s3["pooler_loaded"])

    def expect_error(self, text, *args, **kw):
        out = kw.pop("out", "err")
        p = self.finetune(out, *args, check=False, **kw)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn(text, p.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.tmp, out, "metrics.json")))
        return p

    def test_model_with_fewer_positions_cuts_inputs_to_fit(self):
        # A config of 40 positions and sequences of 70-100 bases (65-95 6-mers): each input is
        # cut to 38 6-mers between [CLS] and [SEP], counted, instead of an index error in the
        # position table (a device-side assert on a GPU). With 600 positions, nothing is cut.
        for positions, cut in [(40, True), (600, False)]:
            cfg = os.path.join(self.tmp, f"pos{positions}.json")
            with open(cfg, "w") as f:
                json.dump(dict(TINY, max_position_embeddings=positions), f)
            p = run(["finetune", "--model", "random", "--config", cfg, "--train", self.paths["train3.csv"],
                     "--test", self.paths["test3.csv"], "--out", os.path.join(self.tmp, f"pos{positions}")] + FAST)
            s = summary(p)
            self.assertEqual(s["truncated"], (150 + 90) if cut else 0, s)
            # Said on stderr too, with the first row cut (the training table's first sequence
            # has more than 38 6-mers), not only counted in the summary.
            if cut:
                self.assertIn(f"note: 240 sequence(s) ({self.paths['train3.csv']}:", p.stderr)
                self.assertIn("have more than the model's 38 6-mers", p.stderr)
            else:
                self.assertNotIn("6-mers: fine-tuning and the test read their first", p.stderr)

    def test_rows_of_unknown_tokens_only_are_said(self):
        # A row of N (or of N broken every 5 bases) is all [UNK] 6-mers: it was learnt and scored
        # without a word. Counted against an independent check of "6 A/C/G/T in a row".
        rows = [("ACGTAC" * 14, 0), ("N" * 80, 1), ("ACGTANCGTAN" * 7 + "ACG", 0), ("TTGACC" * 14, 1),
                ("AAAAA" + "N" * 75, 0), ("ACGTAC" * 14, 1)]
        unknown = [seq for seq, _ in rows if not re.search("[ACGT]{6}", seq)]
        self.assertEqual(len(unknown), 3)
        tr = os.path.join(self.tmp, "unk-train.csv")
        te = os.path.join(self.tmp, "unk-test.csv")
        write_task(tr, rows, False)
        write_task(te, rows[:3], False)
        p = run(["finetune", "--model", "random", "--config", self.paths["tiny.json"], "--train", tr, "--test", te,
                 "--out", os.path.join(self.tmp, "unk")] + FAST)
        s = summary(p)
        self.assertEqual(s["unknown_only"], len(unknown) + 2, s)  # train (3) + test (rows 2 and 3)
        with open(os.path.join(self.tmp, "unk", "metrics.json")) as f:
            self.assertEqual(json.load(f)["unknown_only"], len(unknown) + 2)
        self.assertIn(f"warning: 5 sequence(s) ({tr}:3 the first) have no stretch of 6 A, C, G or T bases", p.stderr)
        s = summary(run(["finetune", "--model", "random", "--config", self.paths["tiny.json"], "--train",
                         self.paths["train3.csv"], "--test", self.paths["test3.csv"], "--out",
                         os.path.join(self.tmp, "unk-none")] + FAST))
        self.assertEqual(s["unknown_only"], 0)

    def test_tables_cut_short_are_counted_for_the_report(self):
        # A table whose last line has no line end was said on stderr only: a sweep's report
        # averaged its metrics without a word. metrics.json counts such tables
        # (unterminated_tables: training, test), which the sweep's records and report carry.
        def cut(name, src):
            path = os.path.join(self.tmp, name)
            with open(src) as f:
                text = f.read()
            self.assertTrue(text.endswith("\n"))
            with open(path, "w") as f:
                f.write(text[:-1])
            return path
        train, test = self.paths["train3.csv"], self.paths["test3.csv"]
        for name, tr, te, want in [("whole", train, test, 0), ("test-cut", train, cut("test-cut.csv", test), 1),
                                   ("both-cut", cut("train-cut.csv", train), cut("test-cut2.csv", test), 2)]:
            out = os.path.join(self.tmp, f"unterminated-{name}")
            p = run(["finetune", "--model", "random", "--config", self.paths["tiny.json"], "--train", tr, "--test", te,
                     "--out", out] + FAST)
            self.assertEqual(summary(p)["unterminated_tables"], want, name)
            with open(os.path.join(out, "metrics.json")) as f:
                self.assertEqual(json.load(f)["unterminated_tables"], want, name)
            self.assertEqual(p.stderr.count("the last line has no line end"), want, p.stderr)

    def test_a_sequence_under_two_labels_is_said_when_shots_are_drawn(self):
        # The sample takes such a sequence once, for one class: the table's contradiction was
        # hidden (the warning looked at the chosen rows only).
        rng = random.Random(11)
        rows = [(make_seq(rng, i % 2, 80), i % 2) for i in range(8)]
        rows.append((rows[0][0], 1))  # line 10: row 1's sequence (class 0) under class 1
        tr = os.path.join(self.tmp, "two-labels.csv")
        write_task(tr, rows, False)
        p = run(["finetune", "--model", "random", "--config", self.paths["tiny.json"], "--train", tr, "--test",
                 self.paths["test.csv"], "--out", os.path.join(self.tmp, "two-labels"), "--shots", "2",
                 "--epochs", "1"] + FAST)
        self.assertIn(f"warning: 1 row(s) of {tr} ({tr}:10 the first) repeat an earlier sequence under another "
                      "label: --shots draws such a sequence for one class at most", p.stderr)

    def test_a_test_table_without_a_class_is_refused_before_training(self):
        # The ROC AUC needs every class: it failed after the whole training, with nothing written.
        rng = random.Random(12)
        one = os.path.join(self.tmp, "one-class.csv")
        write_task(one, [(make_seq(rng, 0, 80), 0) for _ in range(5)], False)
        p = self.expect_error(f"{one}: has no row of class '1' of the training set {self.paths['train.csv']} "
                              "(classes: '0', '1'): the ROC AUC is undefined", train="train.csv", test=one)
        self.assertNotIn("epoch 1/", p.stderr)

    def test_bad_inputs(self):
        tr, te = self.paths["train.csv"], self.paths["test.csv"]
        bad = lambda name, text: (open(os.path.join(self.tmp, name), "w").write(text), os.path.join(self.tmp, name))[1]
        unknown = bad("unknown.csv", "sequence,label\nACGTACGTAC,0\nACGTACGTAA,7\n")
        self.expect_error(f"{unknown}:3: label '7' is not a class of the training set {tr} (classes: '0', '1')",
                          train=tr, test=unknown)
        kl = bad("klen.tsv", '"sequence"\t"label"\n"AAACGG AACGGA"\t"0"\n"AAACGG AACGG"\t"1"\n')
        self.expect_error(f"{kl}:3: bad sequence: token 2 'AACGG' has length 5, token 1 has length 6", train=kl, test=te)
        ov = bad("overlap.tsv", '"sequence"\t"label"\n"AAACGG ACGGAT"\t"0"\n')
        self.expect_error(f"{ov}:2: bad sequence: tokens 1 'AAACGG' and 2 'ACGGAT' do not overlap by 5 bases",
                          train=tr, test=ov)
        empty = bad("empty.csv", "")
        self.expect_error(f"{empty}:1: empty file", train=empty, test=te)
        one = bad("one.csv", "sequence,label\nACGTACGTAC,0\nACGTACGTAA,0\n")
        self.expect_error(f"{one}: every row has label '0': fine-tuning needs 2 or more classes", train=one, test=te)
        # NaN is refused for every floating-point option before anything runs (issue 31).
        self.expect_error("--lr: nan is not a finite number", "--lr", "nan", train=tr, test=te)
        self.expect_error("--dropout: nan is not a finite number", "--dropout", "nan", train=tr, test=te)
        # Each option named with its own value (the message named --lr's valid 0 for --epochs -1).
        for flag, value, text in [("--epochs", "-1", "--epochs -1 must be an integer >= 0"),
                                  ("--batch", "-5", "--batch -5 must be an integer >= 0"),
                                  ("--lr", "-0.1", "--lr -0.1 must be a number >= 0"),
                                  ("--eval-batch", "0", "--eval-batch: 0 is not positive")]:
            self.expect_error(text, flag, value, train=tr, test=te)
        # --out inside a new --save-model: refused up front, naming both (not "--save-model is
        # not empty", about a directory that was only made by this command's --out).
        saved = os.path.join(self.tmp, "nested-model")
        self.expect_error(f"--out {saved}/metrics lies inside --save-model {saved}, another output of this command",
                          "--save-model", saved, train=tr, test=te, out="nested-model/metrics")
        self.assertFalse(os.path.exists(saved))
        short = bad("short.csv", "sequence,label\nACGTACGTAC,0\nACGT,1\n")
        self.expect_error(f"{short}:3: sequence of 4 bases; at least 6 (one 6-mer) are needed", train=short, test=te)
        self.expect_error(f"{tr}: class '0' has 550 distinct sequences, fewer than the 600 shots asked for: "
                          "choose a smaller --shots", "--shots", "600", train=tr, test=te)
        noweights = os.path.join(self.tmp, "noweights")
        os.makedirs(noweights, exist_ok=True)
        shutil.copy(self.paths["tiny.json"], os.path.join(noweights, "config.json"))
        self.expect_error(f"{noweights}: no complete checkpoint (checkpoints/step-*/state.json) and no model.safetensors",
                          "--shots", "2", model=noweights)
        self.expect_error("finetune is a single-process command and was started on 2 MPI ranks", "--shots", "2",
                          ranks=2, out="mpi")
        p = run(["finetune", "--help"])
        self.assertIn("n < 500: lr 4e-4, 20 epochs, batch 5; n >= 500: lr 5e-5, 5 epochs, batch 15", " ".join(p.stdout.split()))


if __name__ == "__main__":
    unittest.main(verbosity=2)
