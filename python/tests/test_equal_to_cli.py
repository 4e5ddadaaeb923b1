"""The package gives the CLI's numbers: the same tokens, counts, NPMI ranking, PMI
vocabulary and masks as `genemask` on the same inputs (and the same tokens as
transformers.AutoTokenizer on an exported model); counts also against a brute-force count."""
import itertools
import subprocess

import h5py
import numpy as np
import pytest

import genemask
from conftest import BIN, ENV, SEED, cli


def test_version_is_the_clis():
    out = subprocess.run([BIN, "--version"], env=ENV, capture_output=True, text=True, check=True).stdout
    assert out.splitlines()[0] == f"genemask {genemask.__version__}"


def test_vocab_is_the_clis(tmp_path):
    cli("vocab", "--out", tmp_path / "vocab.txt")
    want = (tmp_path / "vocab.txt").read_text().splitlines()
    tok = genemask.Tokenizer()
    assert tok.vocab() == want
    # DNABERT's order, independently: specials, then itertools.product("ATCG", repeat=6)
    assert want[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    assert want[5:] == ["".join(p) for p in itertools.product("ATCG", repeat=6)]


def test_tokens_are_the_shards(work):
    """Every sample of `genemask shards` is the tokenizer's ids of the genome at (chrom, start)."""
    import glob
    import json
    with open(f"{work['shards']}/manifest.json") as f:
        chroms = [c["name"] if isinstance(c, dict) else c for c in json.load(f)["chromosomes"]]
    tok = genemask.Tokenizer()
    checked = 0
    for path in sorted(glob.glob(f"{work['shards']}/*.h5")):
        with h5py.File(path, "r") as h:
            tokens, offsets = h["tokens"][...], h["offsets"][...]
            for i, (c, s) in enumerate(zip(h["chrom"][...], h["start"][...])):
                want = tokens[offsets[i]:offsets[i + 1]].astype(np.int64)
                bases = work["seqs"][chroms[c]][s:s + len(want) + 5]
                np.testing.assert_array_equal(tok.encode(bases, add_special_tokens=False), want)
                checked += 1
    assert checked > 20


def test_tokens_are_autotokenizers_on_an_export(work, first_batches, tmp_path):
    from transformers import AutoTokenizer
    export = tmp_path / "hf"
    cli("export-hf", "--run", first_batches["random"][0], "--out", export)
    hf = AutoTokenizer.from_pretrained(str(export))
    tok = genemask.Tokenizer()
    seq = work["seqs"]["chr1"][1000:1400]
    seq = seq.replace("N", "A").replace("R", "G")
    kmers = " ".join(seq[i:i + 6] for i in range(len(seq) - 5))
    ids = tok.encode(seq)
    assert hf(kmers)["input_ids"] == ids.tolist()
    assert tok.decode(ids) == seq
    batch, att = tok.batch([seq, seq[:100]])
    want = hf([kmers, " ".join(seq[i:i + 6] for i in range(95))], padding=True)
    assert batch.tolist() == want["input_ids"] and att.tolist() == want["attention_mask"]


def test_counts_are_the_clis_and_brute_force(work):
    got = genemask.count_kmers(work["fasta"], work["kmax"])
    assert sorted(got) == list(range(1, work["kmax"] + 1))
    with h5py.File(work["counts"], "r") as h:
        for k in range(1, work["kmax"] + 1):
            assert got[k].dtype == np.uint64
            np.testing.assert_array_equal(got[k], h[f"counts/k{k}"][...])
    code = {"A": 0, "C": 1, "G": 2, "T": 3}
    for k in (1, 2, 3):
        want = np.zeros(4 ** k, dtype=np.uint64)
        for s in work["seqs"].values():
            for i in range(len(s) - k + 1):
                w = s[i:i + k]
                if all(b in code for b in w):
                    want[int("".join(str(code[b]) for b in w), 4)] += 1
        np.testing.assert_array_equal(got[k], want)


def test_npmi_is_the_clis(work):
    table = genemask.npmi(genemask.count_kmers(work["fasta"], 6), k=6, min_count=3)
    cli_table = genemask.NpmiTable.load(work["npmi"])
    assert len(table) == len(cli_table) == 4096 and table.k == cli_table.k == 6
    assert table.kmer == cli_table.kmer
    for col in ("rank", "count", "pmi", "npmi", "below_min_count"):
        np.testing.assert_array_equal(getattr(table, col), getattr(cli_table, col), err_msg=col)
    np.testing.assert_array_equal(table.grank(), cli_table.grank())
    assert sorted(table.grank().tolist()) == list(range(1, 4097))


def test_pmi_vocab_is_the_clis(work):
    counts = genemask.count_kmers(work["fasta"], work["kmax"])
    vocab = genemask.pmi_vocab(counts, kmin=2, kmax=work["kmax"], min_count=3, size=300)
    cli_vocab = genemask.PmiVocab.load(work["pmi_vocab"])
    assert len(vocab) == len(cli_vocab) == 300
    assert vocab.kmer == cli_vocab.kmer
    for col in ("rank", "k", "count", "pmi"):
        np.testing.assert_array_equal(getattr(vocab, col), getattr(cli_vocab, col), err_msg=col)


@pytest.mark.parametrize("strategy", ["genemask", "random", "pmi-vocab"])
def test_masks_are_the_clis(work, first_batches, strategy):
    """The first batch of `genemask pretrain --seed 7` is masked exactly as Masker(seed=7) masks it."""
    from safetensors.numpy import load_file
    b = load_file(first_batches[strategy][1])
    ids, att, labels, index = b["input_ids"], b["attention_mask"], b["labels"], b["sample_index"]
    original = np.where(labels != -100, labels, ids)
    masker = genemask.Masker(strategy, npmi=work["npmi"], pmi_vocab=work["pmi_vocab"], seed=SEED)
    got_ids, got_labels = masker.mask(original, att, epoch=0, sample_index=index)
    assert (labels != -100).sum() > 0
    np.testing.assert_array_equal(got_labels, labels)
    np.testing.assert_array_equal(got_ids, ids)
    # another seed masks otherwise
    other, _ = masker.mask(original, att, epoch=0, sample_index=index, seed=SEED + 1)
    assert not np.array_equal(other, ids)
