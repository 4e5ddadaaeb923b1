"""Masker and Tokenizer behaviour checked against closed forms and brute-force references:
the specials are never masked, labels follow Hugging Face's convention, BERT's 80/10/10
rule, the paper's masked fraction, the spans of each strategy, determinism, and the GIL
released in the C++ calls."""
import threading
import time

import numpy as np
import pytest

import genemask

RNG = np.random.default_rng(5)


def random_batch(rows=64, lo=50, hi=300):
    seqs = ["".join(RNG.choice(list("ACGT"), size=int(RNG.integers(lo, hi)))) for _ in range(rows)]
    return genemask.Tokenizer().batch(seqs)


def test_specials_and_padding_are_never_masked():
    ids, att = random_batch()
    masked, labels = genemask.Masker("random", seed=3).mask(ids, att)
    special = (ids == genemask.CLS) | (ids == genemask.SEP) | (ids == genemask.PAD)
    assert special.sum() > 0
    np.testing.assert_array_equal(masked[special], ids[special])
    assert (labels[special] == -100).all()
    # labels: the original id where masked, -100 elsewhere; unmasked positions are unchanged
    sel = labels != -100
    np.testing.assert_array_equal(labels[sel], ids[sel])
    np.testing.assert_array_equal(masked[~sel], ids[~sel])


def test_random_strategy_masks_six_token_spans_at_the_papers_rate():
    ids, att = random_batch(rows=400, lo=400, hi=515)
    masker = genemask.Masker("random", seed=1)
    assert masker.rate == pytest.approx(0.025)
    masked, labels = masker.mask(ids, att)
    sel = labels != -100
    real = (att == 1) & (ids >= 5)
    frac = sel.sum() / real.sum()
    # closed form away from the edges: P(token masked) = 1 - (1 - p)^6 = 0.1413
    assert frac == pytest.approx(1 - (1 - 0.025) ** 6, abs=0.01)
    # every run of masked tokens is made of whole 6-token spans [c-2, c+3]: at least 6 long unless clipped
    for r in range(ids.shape[0]):
        n = int(att[r].sum()) - 2
        row = sel[r, 1:n + 1]
        edges = np.flatnonzero(np.diff(np.concatenate([[0], row.astype(np.int8), [0]])))
        for a, b in zip(edges[::2], edges[1::2]):
            if a > 2 and b < n - 3:
                assert b - a >= 6, (r, a, b)
    # BERT's rule on the masked tokens: 80% [MASK], 10% random, 10% unchanged
    mask_tok = (masked == genemask.MASK) & sel
    unchanged = (masked == ids) & sel
    assert mask_tok.sum() / sel.sum() == pytest.approx(0.8, abs=0.02)
    assert unchanged.sum() / sel.sum() == pytest.approx(0.1 + 0.1 / 4096, abs=0.015)


def test_genemask_masks_about_the_papers_fraction(work):
    ids, att = random_batch(rows=300, lo=400, hi=515)
    masker = genemask.Masker("genemask", npmi=genemask.NpmiTable.load(work["npmi"]), seed=2)
    assert masker.rate == pytest.approx(0.0176)
    _, labels = masker.mask(ids, att)
    frac = (labels != -100).sum() / ((att == 1) & (ids >= 5)).sum()
    assert 0.10 < frac < 0.20


def test_the_same_seed_and_sample_give_the_same_mask():
    ids, att = random_batch(rows=8)
    a = genemask.Masker("random", seed=9)
    b = genemask.Masker("random", seed=9)
    x1, y1 = a.mask(ids, att)
    x2, y2 = b.mask(ids, att)
    np.testing.assert_array_equal(x1, x2)
    np.testing.assert_array_equal(y1, y2)
    # rows are numbered on between calls: the second call masks like sample_index 8..15
    x3, _ = a.mask(ids, att)
    x4, _ = b.mask(ids, att, sample_index=np.arange(8, 16))
    np.testing.assert_array_equal(x3, x4)
    assert not np.array_equal(x1, x3)
    # a row's mask does not depend on the batch around it (or on its padding)
    one, one_labels = genemask.Masker("random", seed=9).mask(ids[3:4, : int(att[3].sum())], sample_index=[3])
    np.testing.assert_array_equal(one[0], x1[3, : int(att[3].sum())])


def test_attention_mask_defaults_to_the_tokens_before_padding_and_torch_in_torch_out():
    torch = pytest.importorskip("torch")
    ids, att = random_batch(rows=6)
    x1, y1 = genemask.Masker("random", seed=4).mask(ids, att)
    x2, y2 = genemask.Masker("random", seed=4).mask(ids)
    np.testing.assert_array_equal(x1, x2)
    tx, ty = genemask.Masker("random", seed=4).mask(torch.from_numpy(ids), torch.from_numpy(att))
    assert isinstance(tx, torch.Tensor) and tx.dtype == torch.int64
    np.testing.assert_array_equal(tx.numpy(), x1)
    np.testing.assert_array_equal(ty.numpy(), y1)
    # one row, 1-D
    r, lab = genemask.Masker("random", seed=4).mask(ids[0])
    assert r.shape == ids[0].shape and lab.shape == ids[0].shape


def test_tokenizer_matches_a_python_reference():
    order = "ATCG"
    ref = {"".join(p): 5 + i for i, p in enumerate(__import__("itertools").product(order, repeat=6))}
    tok = genemask.Tokenizer()
    s = "acgtNACGTTGCAAGTCCGTRAGT"
    want = [2] + [ref.get(s[i:i + 6].upper(), 1) for i in range(len(s) - 5)] + [3]
    assert tok.encode(s).tolist() == want
    # Fewer than 6 bases hold no 6-mer: refused, as the CLI refuses them (it was [CLS] [SEP]).
    for short in ["ACGTA", ""]:
        with pytest.raises(ValueError, match=f"a sequence of {len(short)} bases: at least 6 \\(one 6-mer\\)"):
            tok.encode(short)
    with pytest.raises(ValueError, match="sequence 1: a sequence of 3 bases"):
        tok.batch(["ACGTACGT", "ACG"])
    ids, att = tok.batch(["ACGTACGTAC", "ACGTAC"], max_length=8)
    assert ids.shape == (2, 8) and att[1].tolist() == [1, 1, 1, 0, 0, 0, 0, 0]
    with pytest.raises(ValueError, match="max_length"):
        tok.batch(["A" * 20], max_length=8)
    cut, _ = tok.batch(["A" * 20], max_length=8, truncation=True)
    assert cut[0, 0] == genemask.CLS and cut[0, -1] == genemask.SEP
    # A row holds one 6-mer at least: max_length 2 gave [CLS] [SEP] rows, and no error.
    for length, special in [(2, True), (0, False)]:
        with pytest.raises(ValueError, match=f"max_length must be at least {3 if special else 1}"):
            tok.batch(["A" * 20], max_length=length, truncation=True, add_special_tokens=special)
    assert tok.convert_ids_to_tokens([0, 4, 5, 4100]) == ["[PAD]", "[MASK]", "AAAAAA", "GGGGGG"]


def test_masking_releases_the_gil():
    """While one thread masks a large batch, another thread keeps running Python."""
    ids, att = random_batch(rows=6000, lo=500, hi=515)
    masker = genemask.Masker("random", seed=0)
    t0 = time.perf_counter()
    masker.mask(ids, att)
    call = time.perf_counter() - t0
    done = threading.Event()

    def work():
        for _ in range(3):
            masker.mask(ids, att)
        done.set()

    th = threading.Thread(target=work)
    gaps, last = [], time.perf_counter()
    th.start()
    while not done.is_set():
        time.sleep(0.001)
        now = time.perf_counter()
        gaps.append(now - last)
        last = now
    th.join()
    # Holding the GIL, the main thread would stall for a whole call, three times (three gaps
    # >= call); only the argument checks and the wrapping of the outputs hold it. The third
    # largest gap leaves room for two stalls of a busy machine's scheduler.
    third = sorted(gaps)[-3]
    assert third < 0.5 * call, (sorted(gaps)[-3:], call)


def test_unk_tokens_in_a_span_stay_unlabelled():
    """An [UNK] 6-mer (a sequence with N) in a span is left as it is and unlabelled, as
    transformers' collator leaves special tokens; the spans themselves do not depend on the
    tokens for random masking, so every other position is chosen as in the same row without N."""
    tok = genemask.Tokenizer()
    base = ["".join(RNG.choice(list("ACGT"), size=400)) for _ in range(40)]
    with_n = [s[:100] + "N" + s[101:250] + "NN" + s[252:] for s in base]
    ids_n, att_n = tok.batch(with_n)
    ids, att = tok.batch(base)
    unk = ids_n == genemask.UNK
    assert unk.sum() == 40 * (6 + 7)
    masker = genemask.Masker("random", seed=9, rate=0.2)
    rows = np.arange(40)  # the same sample indices for both calls (a call goes on from the last by default)
    masked_n, labels_n = masker.mask(ids_n, att_n, sample_index=rows)
    _, labels = masker.mask(ids, att, sample_index=rows)
    assert (masked_n[unk] == genemask.UNK).all() and (labels_n[unk] == -100).all()
    assert ((labels != -100) & unk).sum() > 100  # the spans did cover [UNK] positions
    np.testing.assert_array_equal(labels_n != -100, (labels != -100) & ~unk)
    sel = labels_n != -100
    np.testing.assert_array_equal(labels_n[sel], ids_n[sel])


def test_tokenizer_reads_what_the_cli_reads_and_refuses_the_rest():
    """Bases (IUPAC codes, any case) or 6-mer text, as the CLI reads a table's sequences; a
    line end, a digit or U made [UNK] 6-mers without a word."""
    tok = genemask.Tokenizer()
    bases = "ACGTACGTTGCANRacgt"
    kmers = " ".join(bases[i:i + 6] for i in range(len(bases) - 5))
    np.testing.assert_array_equal(tok.encode(kmers), tok.encode(bases.upper()))
    np.testing.assert_array_equal(tok.batch([kmers, bases])[0][0], tok.batch([kmers, bases])[0][1])
    with pytest.raises(ValueError, match="byte 0x0a at position 9 is not a base .*strip line ends"):
        tok.encode("ACGTACGT\n")
    with pytest.raises(ValueError, match="'U' at position 4 is not a base"):
        tok.encode("ACGUACGUAC")
    with pytest.raises(ValueError, match="sequence 1: '7' at position 3 is not a base"):
        tok.batch(["ACGTACGT", "AC7GTACGT"])
    with pytest.raises(ValueError, match="6-mer text .*tokens 1 'ACGTAC' and 2 'GTACGT' do not overlap by 5 bases"):
        tok.encode("ACGTAC GTACGT")
