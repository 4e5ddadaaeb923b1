#!/usr/bin/env python3
"""`genemask predict` against transformers: a classifier saved by `finetune --save-model`,
run by AutoModelForSequenceClassification on the same token ids (from a vocabulary built
here, not genemask's tokenizer), with long sequences cut into windows as documented and
their probabilities averaged. The same output at 1, 2 and 4 ranks, from FASTA and from a
table, and finetune's own predictions for the short sequences."""
import itertools
import json
import os
import re
import random
import shutil
import tempfile
import unittest

import numpy as np
import torch

from test_cli import check_progress, run, summary

TINY = {"model_type": "bert", "vocab_size": 4101, "hidden_size": 32, "num_hidden_layers": 1,
        "num_attention_heads": 2, "intermediate_size": 64, "max_position_embeddings": 512,
        "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1}
VOCAB = {"".join(p): 5 + i for i, p in enumerate(itertools.product("ATCG", repeat=6))}


def seq_of(rng, label, n):
    s = [rng.choice("ACGT") for _ in range(n)]
    if label:
        for p in range(0, n - 6, 40):
            s[p:p + 6] = "TATAAA"
    return "".join(s)


def windows(n, width=510, stride=255):
    """Window starts as `predict --help` documents them."""
    starts = [0]
    while starts[-1] + width < n:
        starts.append(min(starts[-1] + stride, n - width))
    return starts


def read_tsv(path):
    with open(path) as f:
        header = f.readline().rstrip("\n").split("\t")
        rows = [l.rstrip("\n").split("\t") for l in f]
    return header, rows


class Predict(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="genemask-predict-")
        t = lambda n: os.path.join(cls.tmp, n)
        rng = random.Random(4)
        with open(t("train.csv"), "w") as f:
            f.write("sequence,label\n")
            for i in range(40):
                f.write(f"{seq_of(rng, i % 2, 90)},{'yes' if i % 2 else 'no'}\n")
        cls.short = [seq_of(rng, i % 2, rng.randint(60, 120)) for i in range(12)]
        with open(t("short.csv"), "w") as f:
            f.write("sequence,label\n")
            for i, s in enumerate(cls.short):
                f.write(f"{s},{'yes' if i % 2 else 'no'}\n")
        # Long ones: 600 bp (2 windows), 1300 bp (5), one exactly 515 bp (510 tokens: 1 window).
        cls.long = [seq_of(rng, 1, 600), seq_of(rng, 0, 1300), seq_of(rng, 1, 515)]
        cls.seqs = cls.short + cls.long
        cls.names = [f"s{i}" for i in range(len(cls.seqs))]
        with open(t("all.fa"), "w") as f:
            for n, s in zip(cls.names, cls.seqs):
                f.write(f">{n} description\n" + "\n".join(s[i:i + 60] for i in range(0, len(s), 60)) + "\n")
        with open(t("all.tsv"), "w") as f:
            f.write("sequence\n")
            for s in cls.seqs:
                f.write(s + "\n")
        with open(t("tiny.json"), "w") as f:
            json.dump(TINY, f)
        cls.model = t("clf")
        run(["finetune", "--model", "random", "--config", t("tiny.json"), "--train", t("train.csv"), "--test",
             t("short.csv"), "--out", t("ft"), "--epochs", "3", "--batch", "5", "--save-model", cls.model,
             "--threads", "1", "--precision", "fp32"])  # its predictions are compared in fp32

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def predict(self, name, *extra, inp="all.fa", ranks=None, check=True):
        out = os.path.join(self.tmp, name)
        p = run(["predict", "--model", self.model, "--input", os.path.join(self.tmp, inp), "--out", out,
                 "--threads", "1", "--batch", "4", "--precision", "fp32"] + list(extra), ranks=ranks, check=check)
        return p if not check else (summary(p), read_tsv(out))

    def test_matches_transformers_with_windows(self):
        from transformers import AutoModelForSequenceClassification
        s, (header, rows) = self.predict("p1.tsv")
        self.assertEqual(header, ["id", "windows", "prob_no", "prob_yes", "predicted"])
        self.assertEqual([r[0] for r in rows], self.names)
        self.assertEqual(s["long_sequences"], 2)
        m = AutoModelForSequenceClassification.from_pretrained(self.model).eval()
        for seq, r in zip(self.seqs, rows):
            ids = [VOCAB[seq[i:i + 6]] for i in range(len(seq) - 5)]
            starts = windows(len(ids))
            self.assertEqual(int(r[1]), len(starts))
            with torch.no_grad():
                probs = [torch.softmax(m(input_ids=torch.tensor([[2] + ids[a:a + 510] + [3]])).logits, -1)[0]
                         for a in starts]
            want = torch.stack(probs).mean(0).numpy()
            got = np.array([float(x) for x in r[2:4]])
            np.testing.assert_allclose(got, want, rtol=0, atol=1e-5)
            self.assertEqual(r[4], ["no", "yes"][int(np.argmax(got))])
        self.assertEqual([int(r[1]) for r in rows[-3:]], [2, 5, 1])

    def test_same_at_1_2_4_ranks_and_from_a_table(self):
        _, (_, one) = self.predict("r1.tsv")
        for ranks in (2, 4):
            s, (_, many) = self.predict(f"r{ranks}.tsv", ranks=ranks)
            self.assertEqual(s["ranks"], ranks)
            self.assertEqual([(r[0], r[1], r[4]) for r in many], [(r[0], r[1], r[4]) for r in one])
            # Other batch shapes on each rank: float rounding only.
            np.testing.assert_allclose(np.array([[float(x) for x in r[2:4]] for r in many]),
                                       np.array([[float(x) for x in r[2:4]] for r in one]), rtol=0, atol=1e-6)
        _, (_, tab) = self.predict("tab.tsv", inp="all.tsv")
        self.assertEqual([r[0] for r in tab], [f"line{i + 2}" for i in range(len(self.seqs))])
        np.testing.assert_allclose(np.array([[float(x) for x in r[2:4]] for r in tab]),
                                   np.array([[float(x) for x in r[2:4]] for r in one]), rtol=0, atol=1e-6)

    def test_progress_lines_of_predict_and_embed(self):
        # Rank 0's share of its windows after each batch, at most one line per --progress-interval
        # (here every batch), rising to 100%; --quiet prints none. The numbers are not changed by it.
        for cmd in ("predict", "embed"):
            with self.subTest(cmd):
                out = os.path.join(self.tmp, f"progress-{cmd}")
                args = [cmd, "--model", self.model, "--input", os.path.join(self.tmp, "all.fa"), "--out", out,
                        "--threads", "1", "--batch", "2", "--precision", "fp32"]
                check_progress(self, run(args + ["--progress-interval", "1e-9"], ranks=2).stderr, cmd)
                os.remove(out)
                p = run(args + ["--quiet"], ranks=2)
                self.assertNotIn(f"[genemask {cmd}]", p.stderr)
                os.remove(out)

    def test_short_sequences_match_finetunes_predictions(self):
        _, (_, rows) = self.predict("short.tsv", inp="short.csv")
        header, ft = read_tsv(os.path.join(self.tmp, "ft", "predictions.tsv"))
        self.assertEqual(header[:2], ["id", "label"])
        self.assertEqual([r[0] for r in rows], [r[0] for r in ft])  # both name rows line<N>
        # Both name a class's column by its label (finetune named it by the class's index:
        # prob_1 was P(label 2) of labels 1 and 2 there, P(label 1) in predict's output).
        self.assertEqual(header[2:], ["prob_no", "prob_yes"])
        np.testing.assert_allclose(np.array([[float(x) for x in r[2:4]] for r in rows]),
                                   np.array([[float(x) for x in r[2:4]] for r in ft]), rtol=0, atol=1e-6)

    def test_sequences_of_unknown_tokens_only_are_said(self):
        """A row whose every 6-mer holds an N (or another IUPAC code) is all [UNK]: its
        probabilities or embeddings are a constant of the model. Said once (rank 0), with the
        first such row, and counted in the summary; from an independent count here."""
        import re
        rows = [self.short[0], "NNNNNNNNNNNN", "ACGTANNNNNACGTA", "acgtac", "ACGTNACGTAC", "RYACGTKMACGTSW",
                self.short[1]]
        want = [i for i, r in enumerate(rows) if not re.search("[ACGTacgt]{6}", r)]
        self.assertEqual(want, [1, 2, 5])
        path = os.path.join(self.tmp, "unk.tsv")
        with open(path, "w") as f:
            f.write("sequence\n" + "".join(r + "\n" for r in rows))
        for ranks in (None, 2):
            p = self.predict(f"unk{ranks}.tsv", inp="unk.tsv", ranks=ranks, check=False)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertEqual(summary(p)["unknown_only_sequences"], len(want))
            said = [l for l in p.stderr.splitlines() if "6-mer of A, C, G and T alone" in l]
            self.assertEqual(len(said), 1, p.stderr)
            self.assertIn(f"warning: 3 of the 7 sequences ({path}:{want[0] + 2} the first)", said[0])
            self.assertIn("their probabilities say nothing of their bases", said[0])
        fa = os.path.join(self.tmp, "unk.fa")
        with open(fa, "w") as f:
            f.write("".join(f">r{i}\n{r}\n" for i, r in enumerate(rows)))
        p = run(["embed", "--model", self.model, "--input", fa, "--out", os.path.join(self.tmp, "unk.h5"),
                 "--threads", "1", "--precision", "fp32"])  # a classifier's encoder
        self.assertEqual(summary(p)["unknown_only_sequences"], len(want))
        self.assertIn(f"(record 'r1' of {fa} the first)", p.stderr)
        self.assertIn("their embeddings say nothing", p.stderr)
        # Nothing said when every sequence has a known 6-mer.
        s, _ = self.predict("known.tsv", inp="short.csv")
        self.assertEqual(s["unknown_only_sequences"], 0)
        self.assertEqual(s["unknown_only_windows"], 0)
        # A long sequence with a run of N as long as a window: that window is all [UNK] and
        # averaged in with the others; said and counted (the windows by the documented rule).
        runs = [self.long[1][:300] + "N" * 1000 + self.long[1][300:900], self.long[0]]
        want_w = 0
        for r in runs:
            n = len(r) - 5
            want_w += sum(not re.search("[ACGT]{6}", r[a:a + min(510, n - a) + 5]) for a in windows(n)) \
                if len(windows(n)) > 1 else 0
        self.assertEqual(want_w, 2)
        with open(os.path.join(self.tmp, "nrun.tsv"), "w") as f:
            f.write("sequence\n" + "".join(r + "\n" for r in runs))
        for ranks in (None, 2):
            p = self.predict(f"nrun{ranks}.tsv", inp="nrun.tsv", ranks=ranks, check=False)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertEqual(summary(p)["unknown_only_windows"], want_w)
            self.assertEqual(summary(p)["unknown_only_sequences"], 0)
            said = [l for l in p.stderr.splitlines() if "window(s) of long sequences" in l]
            self.assertEqual(len(said), 1, p.stderr)
            self.assertIn(f"{want_w} window(s) of long sequences have tokens that are all [UNK]", said[0])

    def test_a_table_cut_short_is_listed_in_the_summary(self):
        """A table whose last line has no line end (a download or copy stopped inside a row) is
        scored as it is: said on stderr, and listed in the summary line beside the numbers
        (unterminated_inputs), at 1 and 2 ranks; a whole table lists nothing. embed likewise."""
        with open(os.path.join(self.tmp, "short.csv")) as f:
            whole = f.read()
        self.assertTrue(whole.endswith("\n"))
        cut = os.path.join(self.tmp, "short-cut.csv")
        with open(cut, "w") as f:
            f.write(whole[:-2])  # cut inside the last row (its label, which predict ignores)
        for ranks in (None, 2):
            p = self.predict(f"cut{ranks}.tsv", inp="short-cut.csv", ranks=ranks, check=False)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertEqual(summary(p)["unterminated_inputs"], [cut])
            self.assertIn(f"{cut}:{len(self.short) + 1}: the last line has no line end", p.stderr)
            self.assertIn("the summary lists it: unterminated_inputs", p.stderr)
        s, _ = self.predict("whole.tsv", inp="short.csv")
        self.assertNotIn("unterminated_inputs", s)
        p = run(["embed", "--model", self.model, "--input", cut, "--out", os.path.join(self.tmp, "cut.h5"),
                 "--threads", "1", "--precision", "fp32"])
        self.assertEqual(summary(p)["unterminated_inputs"], [cut])

    def test_embed_reads_the_encoder_of_a_classifier_and_of_a_bare_bertmodel(self):
        """embed reads the encoder only: a classifier (finetune --save-model) and a bare
        BertModel saved by transformers (names without "bert.") give transformers' [CLS] and
        mean states. Both were refused ("unexpected tensor 'classifier.bias'")."""
        import h5py
        from transformers import AutoModel
        enc = AutoModel.from_pretrained(self.model).eval()  # the classifier's encoder and pooler
        bare = os.path.join(self.tmp, "bare")
        enc.save_pretrained(bare)
        shutil.copy(os.path.join(self.model, "vocab.txt"), bare)
        seqs = self.short[:5]
        with torch.no_grad():
            want_cls, want_mean = [], []
            for seq in seqs:
                h = enc(input_ids=torch.tensor([[2] + [VOCAB[seq[i:i + 6]] for i in range(len(seq) - 5)] + [3]]))
                want_cls.append(h.last_hidden_state[0, 0].numpy())
                want_mean.append(h.last_hidden_state[0, 1:-1].mean(0).numpy())
        fa = os.path.join(self.tmp, "five.fa")
        with open(fa, "w") as f:
            f.write("".join(f">s{i}\n{q}\n" for i, q in enumerate(seqs)))
        for name, model in [("clf", self.model), ("bare", bare)]:
            out = os.path.join(self.tmp, f"emb-{name}.h5")
            run(["embed", "--model", model, "--input", fa, "--out", out, "--threads", "1", "--precision", "fp32"])
            with h5py.File(out, "r") as h:
                np.testing.assert_allclose(h["cls"][...], np.array(want_cls), rtol=0, atol=1e-5)
                np.testing.assert_allclose(h["mean"][...], np.array(want_mean), rtol=0, atol=1e-5)

    def test_a_tokenizer_json_in_place_of_vocab_txt_is_held_to_dnabert_ids(self):
        """transformers' save_pretrained writes tokenizer.json (a fast tokenizer) and no vocab.txt:
        its vocabulary is checked as vocab.txt is (it was never read, and a model of other ids
        ran with DNABERT-6's)."""
        from transformers import AutoTokenizer
        fast = os.path.join(self.tmp, "fast")
        shutil.copytree(self.model, fast)
        os.remove(os.path.join(fast, ".genemask.json"))  # a model directory from elsewhere
        os.remove(os.path.join(fast, "vocab.txt"))
        AutoTokenizer.from_pretrained(self.model).save_pretrained(fast)  # read from vocab.txt, written anew
        for name in ("vocab.txt",):
            if os.path.exists(os.path.join(fast, name)):
                os.remove(os.path.join(fast, name))
        self.assertTrue(os.path.exists(os.path.join(fast, "tokenizer.json")))
        _, want = self.predict("tok-want.tsv")
        out = os.path.join(self.tmp, "tok-fast.tsv")
        p = run(["predict", "--model", fast, "--input", os.path.join(self.tmp, "all.fa"), "--out", out, "--threads", "1",
                 "--batch", "4", "--precision", "fp32"])
        self.assertNotIn("has no vocab.txt", p.stderr)
        self.assertEqual(read_tsv(out), want)
        # Two ids swapped, a token missing, one too many: refused, naming tokenizer.json.
        with open(os.path.join(fast, "tokenizer.json")) as f:
            good = json.load(f)
        def edited(change):
            j = json.loads(json.dumps(good))
            change(j["model"]["vocab"])
            with open(os.path.join(fast, "tokenizer.json"), "w") as f:
                json.dump(j, f)
        def swap(v):
            v["AAAAAA"], v["AAAAAT"] = v["AAAAAT"], v["AAAAAA"]
        for change, want_text in [
                (swap, "gives 'AAAAAA' the id 6, DNABERT-6 gives it 5"),
                (lambda v: v.pop("GGGGGG"), "has no token 'GGGGGG' (DNABERT-6's id 4100)"),
                (lambda v: v.update(NNNNNN=4101), "has 4102 tokens; DNABERT-6's (genemask's ids) has 4101")]:
            edited(change)
            p = run(["predict", "--model", fast, "--input", os.path.join(self.tmp, "all.fa"), "--out",
                     os.path.join(self.tmp, "tok-bad.tsv"), "--threads", "1"], check=False)
            self.assertEqual(p.returncode, 1, p.stderr)
            self.assertIn(os.path.join(fast, "tokenizer.json") + ": its vocabulary (model.vocab) " + want_text, p.stderr)
            self.assertFalse(os.path.exists(os.path.join(self.tmp, "tok-bad.tsv")))
        # With a right vocab.txt beside it, a wrong tokenizer.json is still refused: transformers'
        # AutoTokenizer reads tokenizer.json first, and would tokenize otherwise than genemask.
        shutil.copy(os.path.join(self.model, "vocab.txt"), os.path.join(fast, "vocab.txt"))
        edited(swap)
        p = run(["predict", "--model", fast, "--input", os.path.join(self.tmp, "all.fa"), "--out",
                 os.path.join(self.tmp, "tok-bad.tsv"), "--threads", "1"], check=False)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn(os.path.join(fast, "tokenizer.json") + ": its vocabulary (model.vocab) gives 'AAAAAA' the id 6",
                      p.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "tok-bad.tsv")))
        edited(lambda v: None)  # both right: runs, as from vocab.txt alone
        run(["predict", "--model", fast, "--input", os.path.join(self.tmp, "all.fa"), "--out", out + ".2", "--threads",
             "1", "--batch", "4", "--precision", "fp32"])
        self.assertEqual(read_tsv(out + ".2"), want)

    def test_bad_input(self):
        p = self.predict("bad.tsv", "--stride", "600", check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("--stride 600 is longer than a window (510 tokens)", p.stderr)
        bad = os.path.join(self.tmp, "short-seq.tsv")
        with open(bad, "w") as f:
            f.write("sequence\nACGTACGTAC\nACG\n")
        p = self.predict("bad2.tsv", inp="short-seq.tsv", check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("short-seq.tsv:3", p.stderr)
        self.assertIn("at least 6", p.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "bad2.tsv")))
        p = self.predict("bad3.tsv", "--precision", "bad", check=False)
        self.assertIn("--precision", p.stderr)
        self.assertIn("bad", p.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
