"""genemask.hf.DataCollatorForGeneMask with torch's DataLoader and a real
transformers.Trainer: padding and tensors, per-worker seeding (no two workers mask alike,
the same seed repeats), and 20 training steps of a tiny BertForMaskedLM whose loss falls."""
import random

import numpy as np
import pytest
import torch

import genemask
from genemask.hf import DataCollatorForGeneMask
from conftest import SEED


def dna(rng, n):
    return "".join(rng.choices("ACGT", weights=[3, 2, 2, 3], k=n))


def examples(n=64, seed=0, lo=60, hi=200, motifs=0):
    """n tokenized sequences: random bases, or (motifs > 0) random runs of that many 10-mers,
    which a model can learn in a few steps."""
    rng = random.Random(seed)
    units = [dna(random.Random(100 + i), 10) for i in range(motifs)]
    tok = genemask.Tokenizer()
    out = []
    for _ in range(n):
        size = rng.randint(lo, hi)
        s = "".join(rng.choice(units) for _ in range(size // 10 + 1))[:size] if motifs else dna(rng, size)
        out.append({"input_ids": tok.encode(s).tolist()})
    return out


def test_collator_pads_and_returns_tensors(work):
    c = DataCollatorForGeneMask(npmi=work["npmi"], pad_to_multiple_of=8, seed=1)
    ex = examples(5)
    b = c(ex)
    assert set(b) == {"input_ids", "attention_mask", "labels"}
    for v in b.values():
        assert isinstance(v, torch.Tensor) and v.dtype == torch.int64
    # A tokenizer's examples carry token types: returned padded (all 0), as transformers'
    # collator does; a sentence pair's 1s are refused.
    typed = [dict(e, token_type_ids=[0] * len(e["input_ids"])) for e in ex]
    t = c(typed)
    assert set(t) == {"input_ids", "attention_mask", "labels", "token_type_ids"}
    assert t["token_type_ids"].shape == t["input_ids"].shape and not t["token_type_ids"].any()
    pair = [dict(typed[0], token_type_ids=[0] * 3 + [1] * (len(typed[0]["input_ids"]) - 3))] + typed[1:]
    with pytest.raises(ValueError, match="example 0: token_type_ids holds 1: a sentence pair"):
        c(pair)
    longest = max(len(e["input_ids"]) for e in ex)
    assert b["input_ids"].shape == (5, (longest + 7) // 8 * 8)
    assert b["attention_mask"].sum(1).tolist() == [len(e["input_ids"]) for e in ex]
    assert (b["labels"][b["attention_mask"] == 0] == -100).all()
    # strings are tokenized with the DNABERT-6 tokenizer; an HF tokenizer of another vocabulary is refused
    s = c(["ACGTACGTTTGACCA", "ACGTAAGT"])
    assert s["input_ids"][:, 0].tolist() == [genemask.CLS, genemask.CLS]

    class Other:
        pad_token_id, mask_token_id = 0, 103

        def __len__(self):
            return 30522
    with pytest.raises(ValueError, match="GeneMask masks DNABERT-6 ids"):
        DataCollatorForGeneMask(Other(), strategy="random")
    with pytest.raises(ValueError, match="more than max_length=50"):
        DataCollatorForGeneMask(strategy="random", max_length=50)(examples(2, lo=100, hi=120))
    cut = DataCollatorForGeneMask(strategy="random", max_length=50, truncation=True)(examples(2, lo=100, hi=120))
    assert cut["input_ids"].shape[1] == 50
    # Truncation keeps the row's first tokens and its [SEP]: the first 48 6-mers of the
    # sequence, a prefix of it. An example without [CLS]/[SEP] kept its last 6-mer after its
    # first 49: a junction no sequence has, which was masked and learnt.
    seq = "".join("ACGT"[(7 * i * i + 3 * i) % 4] for i in range(200))
    ids = genemask.Tokenizer().encode(seq)
    collate = DataCollatorForGeneMask(strategy="random", max_length=50, truncation=True, seed=1)

    def unmasked(example):  # the row before masking: the labels hold the masked ids
        out = collate([example])
        ids, labels = out["input_ids"][0].numpy(), out["labels"][0].numpy()
        return np.where(labels != -100, labels, ids)
    framed = unmasked({"input_ids": ids})
    assert framed.tolist() == ids[:49].tolist() + [genemask.SEP]
    bare = unmasked({"input_ids": ids[1:-1]})
    assert bare.tolist() == ids[1:51].tolist()
    assert genemask.Tokenizer().decode(bare) == seq[:55]  # a prefix: the 6-mers chain


def loader_masks(collator, workers, torch_seed):
    """The labels of every batch of one pass, with each batch's worker."""
    same = [{"input_ids": examples(1, seed=3)[0]["input_ids"]} for _ in range(16)]
    torch.manual_seed(torch_seed)
    dl = torch.utils.data.DataLoader(same, batch_size=4, num_workers=workers, collate_fn=collator)
    return [b["labels"] for b in dl]


@pytest.mark.parametrize("seed", [None, 5])
def test_workers_mask_differently_and_a_seed_repeats(seed):
    c = DataCollatorForGeneMask(strategy="random", seed=seed)
    a = loader_masks(c, workers=2, torch_seed=0)
    b = loader_masks(c, workers=2, torch_seed=0)
    assert len(a) == 4
    for x, y in zip(a, b):
        assert torch.equal(x, y)
    # batches 0 and 1 come from workers 0 and 1: the same examples, masked otherwise
    assert not torch.equal(a[0], a[1])
    # and every row of a batch differs from the others (distinct sample indices)
    assert len({tuple(r.tolist()) for r in a[0]}) == 4
    other = loader_masks(c, workers=2, torch_seed=1)
    if seed is None:  # follows torch's seed (the Trainer's)
        assert not torch.equal(a[0], other[0])
    else:  # depends only on the collator's seed
        assert torch.equal(a[0], other[0])


def train(work, seed, tmp_path):
    from transformers import BertConfig, BertForMaskedLM, Trainer, TrainingArguments
    torch.manual_seed(seed)
    cfg = BertConfig(vocab_size=genemask.VOCAB_SIZE, hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=128, max_position_embeddings=512, pad_token_id=genemask.PAD)
    model = BertForMaskedLM(cfg)
    args = TrainingArguments(output_dir=str(tmp_path), max_steps=20, per_device_train_batch_size=16,
                             learning_rate=5e-3, lr_scheduler_type="constant", logging_steps=1, save_strategy="no",
                             report_to="none", use_cpu=True, dataloader_num_workers=2, seed=seed,
                             disable_tqdm=True, remove_unused_columns=False)
    collator = DataCollatorForGeneMask(npmi=work["npmi"])
    trainer = Trainer(model=model, args=args, train_dataset=examples(320, seed=1, lo=100, hi=200, motifs=8),
                      data_collator=collator)
    trainer.train()
    return [h["loss"] for h in trainer.state.log_history if "loss" in h]


def test_trainer_learns_with_genemask_masking_and_repeats(work, tmp_path):
    torch.set_num_threads(2)
    first = train(work, 42, tmp_path / "a")
    assert len(first) == 20
    assert np.mean(first[-5:]) < np.mean(first[:5]) - 0.5, first
    again = train(work, 42, tmp_path / "b")
    np.testing.assert_allclose(again, first, rtol=1e-5)
    # the masked fraction of the collator's batches is in the paper's range (about 15%)
    c = DataCollatorForGeneMask(npmi=work["npmi"], seed=0)
    b = c(examples(256, seed=2, lo=400, hi=500))
    frac = float((b["labels"] != -100).sum() / (b["attention_mask"].sum() - 2 * 256))
    assert 0.10 < frac < 0.20, frac


def test_collator_refuses_an_attention_mask_that_is_not_ones_then_zeros():
    c = DataCollatorForGeneMask(strategy="random", seed=0)
    ids = examples(2, lo=30, hi=40)
    n = len(ids[0]["input_ids"])
    for att, match in [([1] * (n - 1) + [2], "example 0: attention_mask must hold only 0 and 1; it holds 2"),
                       ([1] * (n - 1) + [-1], "example 0: attention_mask must hold only 0 and 1; it holds -1"),
                       ([1, 0] + [1] * (n - 2), "example 0: attention_mask is not 1s then 0s: pad on the right")]:
        with pytest.raises(ValueError, match=match):
            c([dict(ids[0], attention_mask=att), ids[1]])
    # No tokens at all (a batch of width 0 was returned), and boolean ids: refused.
    for ex, err, match in [(dict(input_ids=[]), ValueError, "example 0 has no tokens"),
                           (dict(input_ids=ids[0]["input_ids"], attention_mask=[0] * n), ValueError,
                            "example 0 has no tokens"),
                           (dict(input_ids=[True, True]), TypeError, "example 0 input_ids must hold integers, got dtype bool")]:
        with pytest.raises(err, match=match):
            c([ex, ids[1]])
    # 1s then 0s: the 0s drop the padding
    padded = dict(input_ids=ids[0]["input_ids"] + [genemask.PAD] * 3, attention_mask=[1] * n + [0] * 3)
    assert torch.equal(c([padded, ids[1]])["attention_mask"], DataCollatorForGeneMask(strategy="random", seed=0)(
        [ids[0], ids[1]])["attention_mask"])


def test_collator_refuses_a_tokenizer_of_other_ids(tmp_path):
    from transformers import AutoTokenizer, BertTokenizer
    genemask.Tokenizer().save_pretrained(tmp_path / "ok")
    DataCollatorForGeneMask(AutoTokenizer.from_pretrained(str(tmp_path / "ok")), strategy="random")  # the same ids
    vocab = genemask.Tokenizer().vocab()
    for name, tokens, match in [
            ("swapped", vocab[:5] + [vocab[6], vocab[5]] + vocab[7:],
             "it gives 'AAAAAA' the id 6, DNABERT-6 gives it 5"),
            ("lower", vocab[:5] + [t.lower() for t in vocab[5:]], "it has no token 'AAAAAA' \\(DNABERT-6's id 5\\)")]:
        (tmp_path / f"{name}.txt").write_text("\n".join(tokens) + "\n")
        tok = BertTokenizer(str(tmp_path / f"{name}.txt"), do_lower_case=False)
        assert (tok.pad_token_id, tok.mask_token_id, len(tok)) == (genemask.PAD, genemask.MASK, genemask.VOCAB_SIZE)
        with pytest.raises(ValueError, match=f"the tokenizer's vocabulary is not DNABERT-6's: {match}"):
            DataCollatorForGeneMask(tok, strategy="random")
    lowering = BertTokenizer.from_pretrained(str(tmp_path / "ok"), do_lower_case=True)
    with pytest.raises(ValueError, match="the tokenizer lower-cases its input \\(do_lower_case=True\\)"):
        DataCollatorForGeneMask(lowering, strategy="random")


def test_collator_refuses_a_batch_that_mixes_keyed_and_plain_examples():
    c = DataCollatorForGeneMask(strategy="random", seed=3)
    ex = examples(4)
    keyed = [dict(e, sample_index=10 + i, epoch=0) for i, e in enumerate(ex)]
    with pytest.raises(ValueError, match="examples 0, 1 carry sample_index and epoch, examples 2, 3 do not"):
        c(keyed[:2] + ex[2:])
    with pytest.raises(ValueError, match="example 1 carries sample_index but not epoch"):
        c([keyed[0], {"input_ids": ex[1]["input_ids"], "sample_index": 5}])
    with pytest.raises(ValueError, match="examples 0 carry sample_index and epoch, examples 1 do not"):
        c([keyed[0], "ACGTACGTACGTTT"])
    c(keyed)  # all keyed, or none
    c(ex)
    DataCollatorForGeneMask(strategy="random")(keyed[:2] + ex[2:])  # seed=None: the keys are not used


def spawn_masks(collator, context):
    """The labels of one pass of a 2-worker DataLoader started by `context`."""
    same = [{"input_ids": examples(1, seed=3)[0]["input_ids"]} for _ in range(16)]
    dl = torch.utils.data.DataLoader(same, batch_size=4, num_workers=2, collate_fn=collator,
                                     multiprocessing_context=context)
    return [b["labels"] for b in dl]


def test_the_collator_pickles_and_spawned_workers_mask_as_forked_ones(work):
    """spawn (macOS, Windows) and forkserver (Linux from Python 3.14) pickle the collator into
    each worker: with an integer seed a worker's masks depend on (seed, worker, samples), so
    they are those of fork's workers. Masker, NpmiTable and PmiVocab pickle with their values."""
    import copy
    import pickle

    c = DataCollatorForGeneMask(npmi=work["npmi"], seed=5)
    forked = spawn_masks(c, "fork")
    for context in ("spawn", "forkserver"):
        got = spawn_masks(c, context)
        assert len(got) == len(forked) == 4
        for x, y in zip(got, forked):
            assert torch.equal(x, y), context
    batch = examples(6, seed=9)
    want = c(batch)
    twins = (pickle.loads(pickle.dumps(c)), copy.deepcopy(c))
    after = c(batch)  # rows 6..11: the twins number on from c's count too
    assert not torch.equal(after["labels"], want["labels"])
    for twin in twins:
        assert torch.equal(twin(batch)["labels"], after["labels"])
    table, vocab = genemask.NpmiTable.load(work["npmi"]), genemask.PmiVocab.load(work["pmi_vocab"])
    for t in (table, vocab):
        back = pickle.loads(pickle.dumps(t))
        assert back.source == t.source and len(back) == len(t)
        assert back.kmer == t.kmer and np.array_equal(back.count, t.count)
        assert np.array_equal(back.pmi, t.pmi, equal_nan=True)  # every double exact (nan: never seen)
        assert np.array_equal(back.rank, t.rank)
    back = pickle.loads(pickle.dumps(table))
    assert np.array_equal(back.npmi, table.npmi, equal_nan=True)
    assert np.array_equal(back.below_min_count, table.below_min_count)
    assert np.array_equal(back.grank(), table.grank())
    ids, att = genemask.Tokenizer().batch(["ACGTTGCA" * 20, "TTGACCA" * 11])
    m = genemask.Masker("pmi-vocab", pmi_vocab=vocab, seed=7)
    m.mask(ids, att)
    twin = pickle.loads(pickle.dumps(m))
    assert twin.strategy == "pmi-vocab" and twin.rate == m.rate and twin.seed == 7
    a, b = m.mask(ids, att), twin.mask(ids, att)  # both number on from the same row
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])


def test_a_shard_item_that_lost_its_keys_is_refused(work):
    """transformers.Trainer (remove_unused_columns=True, its default) hands the collator only
    the keys its model takes: a ShardDataset item without sample_index and epoch would be
    masked otherwise than `pretrain --seed` masks it, without a word. It is an error that
    names the setting; with the setting the keys come through."""
    transformers = pytest.importorskip("transformers")
    from transformers.trainer_utils import RemoveColumnsCollator

    ds = genemask.ShardDataset(work["shards"], seed=SEED, batch_size=4)
    items = [x for _, x in zip(range(4), iter(ds))]
    assert isinstance(items[0]["input_ids"], genemask.ShardIds)
    c = DataCollatorForGeneMask(npmi=work["npmi"], seed=SEED)
    stripped = RemoveColumnsCollator(c, ["input_ids", "attention_mask", "labels"],
                                     transformers.utils.logging.get_logger("t"))
    with pytest.raises(ValueError, match=r"example 0 is a genemask.ShardDataset item without its sample_index and "
                                         r"epoch.*TrainingArguments\(remove_unused_columns=False\)"):
        stripped(items)
    keyed = c(items)
    kept = RemoveColumnsCollator(c, ["input_ids", "attention_mask", "labels", "sample_index", "epoch", "seed"],
                                 transformers.utils.logging.get_logger("t"))(items)
    assert torch.equal(kept["labels"], keyed["labels"])
    plain = [{"input_ids": np.asarray(x["input_ids"])} for x in items]  # a plain copy: numbered on
    assert DataCollatorForGeneMask(npmi=work["npmi"], seed=SEED)(plain)["labels"].shape == \
        keyed["labels"].shape
    DataCollatorForGeneMask(npmi=work["npmi"])([{"input_ids": x["input_ids"]} for x in items])  # seed=None


def test_pre_padded_examples_without_an_attention_mask():
    """A tokenizer's output padded to max_length whose attention_mask was dropped: the row's
    tokens are those before its first [PAD] (as Masker.mask reads it), so the batch equals the
    one of the unpadded examples; a [PAD] with tokens after it is refused."""
    ex = examples(3, seed=4)
    padded = [{"input_ids": np.concatenate([e["input_ids"], np.zeros(7 + i, dtype=np.int64)])}
              for i, e in enumerate(ex)]
    want = DataCollatorForGeneMask(strategy="random", seed=2)(ex)
    got = DataCollatorForGeneMask(strategy="random", seed=2)(padded)
    for k in ("input_ids", "attention_mask", "labels"):
        assert torch.equal(got[k], want[k]), k
    hole = padded[0]["input_ids"].copy()
    hole[5] = genemask.PAD
    with pytest.raises(ValueError, match=r"example 0: input_ids\[5\] is \[PAD\] but input_ids\[6\] is not.*pass the "
                                         r"example's attention_mask"):
        DataCollatorForGeneMask(strategy="random")([{"input_ids": hole}])
