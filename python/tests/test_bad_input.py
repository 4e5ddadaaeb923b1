"""Bad input raises a Python exception with a clear message, never a crash: wrong dtype,
wrong shape, ids out of range, malformed tables and FASTA files, wrong counts."""
import numpy as np
import pytest

import genemask


@pytest.fixture
def masker():
    return genemask.Masker("random", seed=0)


@pytest.fixture
def batch():
    return genemask.Tokenizer().batch(["ACGTACGTACGTAGGCT", "ACGTTTGCA"])


def test_wrong_dtype(masker, batch):
    ids, att = batch
    with pytest.raises(TypeError, match="input_ids must hold integers, got dtype float64"):
        masker.mask(ids.astype(np.float64), att)
    with pytest.raises(TypeError, match="got dtype <U"):
        masker.mask(np.array([["ACGT"]]))
    with pytest.raises(TypeError, match="attention_mask must hold integers"):
        masker.mask(ids, att.astype(np.float32))
    # Token ids that are booleans ([True, True] read as [UNK] [UNK]); a boolean mask is fine.
    with pytest.raises(TypeError, match="input_ids must hold integers, got dtype bool"):
        masker.mask(ids.astype(bool), att)
    np.testing.assert_array_equal(masker.mask(ids, att.astype(bool), sample_index=[0, 1])[0],
                                  masker.mask(ids, att, sample_index=[0, 1])[0])
    # An epoch past 64 bits: the package's own message, not the binding's argument error.
    with pytest.raises(ValueError, match="epoch must be in 0..2\\^64-1, got 1180591620717411303424"):
        masker.mask(ids, att, epoch=2**70)
    with pytest.raises(TypeError, match="must be a str"):
        genemask.Tokenizer().encode(b"ACGTACGT")
    with pytest.raises(TypeError, match="sequence 1 must be a str"):
        genemask.Tokenizer().batch(["ACGTACG", 7])


def test_wrong_shape(masker, batch):
    ids, att = batch
    with pytest.raises(ValueError, match="1-D or 2-D, got shape \\(2, 1, \\d+\\)"):
        masker.mask(ids[:, None, :])
    with pytest.raises(ValueError, match="attention_mask has shape"):
        masker.mask(ids, att[:, :-1])
    with pytest.raises(ValueError, match="sample_index has 1 entries for 2 rows"):
        masker.mask(ids, att, sample_index=[0])
    bad = att.copy()
    bad[1, 1] = 0
    with pytest.raises(ValueError, match="attention_mask row 1 is not 1s then 0s"):
        masker.mask(ids, bad)
    with pytest.raises(ValueError, match="only 0 and 1"):
        masker.mask(ids, att * 2)


def test_ids_out_of_range_or_misplaced(masker, batch):
    ids, att = batch
    for value in (4101, -1, 70000):
        bad = ids.copy()
        bad[0, 3] = value
        with pytest.raises(ValueError, match=f"input_ids\\[0, 3\\] = {value} is outside the vocabulary"):
            masker.mask(bad, att)
    bad = ids.copy()
    bad[1, 2] = genemask.MASK
    with pytest.raises(ValueError, match="input_ids\\[1, 2\\] is \\[MASK\\] inside the sample"):
        masker.mask(bad, att)
    with pytest.raises(ValueError, match="outside the vocabulary"):
        genemask.Tokenizer().decode([5, 4101])
    with pytest.raises(ValueError, match="seed must be"):
        masker.mask(ids, att, seed=-1)


def test_masker_settings():
    with pytest.raises(ValueError, match="unknown strategy 'bert'"):
        genemask.Masker("bert")
    with pytest.raises(ValueError, match="'genemask' needs npmi="):
        genemask.Masker("genemask")
    with pytest.raises(ValueError, match="'pmi-vocab' needs pmi_vocab="):
        genemask.Masker("pmi-vocab")
    with pytest.raises(ValueError, match="rate must be in \\(0, 1\\)"):
        genemask.Masker("random", rate=1.5)
    with pytest.raises(ValueError, match="sum to <= 1"):
        genemask.Masker("random", mask_token_prob=0.95, random_token_prob=0.1)
    with pytest.raises(TypeError, match="npmi must be an NpmiTable or the path"):
        genemask.Masker("genemask", npmi=42)


def write(path, text):
    path.write_text(text)
    return str(path)


def test_malformed_npmi_tsv(tmp_path, work):
    header = "rank\tkmer\tcount\tpmi\tnpmi\tbelow_min_count\n"
    with pytest.raises(genemask.InputError, match="no-such.tsv"):
        genemask.NpmiTable.load(str(tmp_path / "no-such.tsv"))
    with pytest.raises(genemask.InputError, match=":1: unexpected header"):
        genemask.NpmiTable.load(write(tmp_path / "a.tsv", "kmer\trank\n"))
    with pytest.raises(genemask.InputError, match="b.tsv:3:.*x1"):
        genemask.NpmiTable.load(write(tmp_path / "b.tsv", header + "1\tAAAAAA\t5\t0.1\t0.2\t0\n2\tAAAAAC\tx1\t0.1\t0.2\t0\n"))
    assert issubclass(genemask.InputError, ValueError)
    # a table of 4-mers is read, but GeneMask needs the 6-mer ranking
    four = genemask.npmi(genemask.count_kmers(work["fasta"], 4), k=4, min_count=3)
    assert four.k == 4
    rows = "".join(f"{r}\t{m}\t{c}\t{float(p)!r}\t{float(n)!r}\t{int(b)}\n" for r, m, c, p, n, b in
                   zip(four.rank, four.kmer, four.count, four.pmi, four.npmi, four.below_min_count))
    path = write(tmp_path / "k4.tsv", header + rows)
    with pytest.raises(genemask.InputError, match="k4.tsv: ranks 4-mers; GeneMask needs the 6-mer ranking"):
        genemask.Masker("genemask", npmi=path)
    with pytest.raises(genemask.InputError, match="pmi.tsv:1: unexpected header"):
        genemask.PmiVocab.load(write(tmp_path / "pmi.tsv", header))


def test_ctrl_c_stops_a_long_count(tmp_path):
    """count_kmers runs without the GIL; Ctrl-C (SIGINT) during it raises KeyboardInterrupt out
    of the call within about 0.1 s, instead of after the whole count (it waited before), and
    the next count is whole. In a child process: the signal is its own."""
    import json
    import subprocess
    import sys
    import textwrap
    rng = np.random.default_rng(1)
    bases = np.frombuffer(b"ACGT", dtype=np.uint8)[rng.integers(0, 4, 64 << 20)].reshape(-1, 64)
    fasta = tmp_path / "big.fa"
    with open(fasta, "wb") as f:
        f.write(b">r\n")
        f.write(np.concatenate([bases, np.full((bases.shape[0], 1), ord("\n"), np.uint8)], axis=1).tobytes())
    code = textwrap.dedent("""
        import genemask, json, os, signal, sys, threading, time
        path = sys.argv[1]
        t = time.monotonic(); whole = genemask.count_kmers(path, 12); full = time.monotonic() - t
        threading.Timer(full / 10, os.kill, (os.getpid(), signal.SIGINT)).start()
        t = time.monotonic()
        try:
            genemask.count_kmers(path, 12)
            stopped = None
        except KeyboardInterrupt:
            stopped = time.monotonic() - t
        again = genemask.count_kmers(path, 12)
        same = all((again[k] == whole[k]).all() for k in whole)
        print(json.dumps({"full": full, "stopped": stopped, "same": bool(same), "total": int(whole[12].sum())}))
    """)
    p = subprocess.run([sys.executable, "-c", code, str(fasta)], capture_output=True, text=True, check=True)
    r = json.loads(p.stdout)
    assert r["stopped"] is not None, r  # the interrupt came out of the call
    assert r["stopped"] < 0.7 * r["full"], r  # signalled at a tenth of the count: well before its end
    assert r["same"] and r["total"] == bases.size - 11


def test_bad_fasta_and_counts(tmp_path):
    with pytest.raises(genemask.InputError, match="missing.fa"):
        genemask.count_kmers(str(tmp_path / "missing.fa"))
    with pytest.raises(genemask.InputError, match="dup.fa"):
        genemask.count_kmers(write(tmp_path / "dup.fa", ">a\nACGTACGT\n>a\nACGT\n"), 3)
    with pytest.raises(genemask.InputError, match="bin.fa"):
        genemask.count_kmers(write(tmp_path / "bin.fa", ">a\nACG\x01T\n"), 3)
    with pytest.raises(ValueError, match="kmax must be in 1..12"):
        genemask.count_kmers(write(tmp_path / "ok.fa", ">a\nACGTACGT\n"), 13)
    counts = genemask.count_kmers(str(tmp_path / "ok.fa"), 3)
    with pytest.raises(ValueError, match="k=6 needs the counts of k = 1..6|lack k = 4"):
        genemask.npmi(counts, k=6)
    with pytest.raises(ValueError, match="counts of k=2 must have 4\\^2 = 16 entries, got 15"):
        genemask.npmi([counts[1], counts[2][:-1], counts[3]], k=3, min_count=2)
    with pytest.raises(TypeError, match="counts of k=1 must hold integers"):
        genemask.npmi([counts[1].astype(float), counts[2], counts[3]], k=3, min_count=2)
    with pytest.raises(ValueError, match="min_count must be in 2..2\\^64-1, got 1"):
        genemask.npmi(counts, k=3, min_count=1)


def test_truncated_bgzf_pipes_and_directories(tmp_path, work):
    """Issue 31: a BGZF cut at a block boundary was counted as if whole (256833 bases of
    295076); a directory read as an "empty file"; a FIFO blocked; a max_length of 2**40
    ended in std::bad_alloc."""
    import os
    import struct
    import subprocess
    import random
    rng = random.Random(31)
    fa = tmp_path / "big.fa"
    fa.write_text("".join(f">r{r}\n" + "".join(rng.choice("ACGT") for _ in range(70000)) + "\n" for r in range(3)))
    whole = tmp_path / "g.fa.gz"
    with open(whole, "wb") as f:  # blocks of 64 KiB of text: four or more
        subprocess.run(["bgzip", "-c", str(fa)], stdout=f, check=True)
    data = whole.read_bytes()
    starts, off = [], 0
    while off < len(data):
        starts.append(off)
        off += struct.unpack("<H", data[off + 16:off + 18])[0] + 1
    assert len(starts) > 2
    full = genemask.count_kmers(str(whole), 1)
    assert int(full[1].sum()) == 3 * 70000
    for cut in (starts[len(starts) // 2], len(data) - 28):
        (tmp_path / "cut.fa.gz").write_bytes(data[:cut])
        with pytest.raises(genemask.InputError, match=f"cut.fa.gz: BGZF .* end-of-file block: it is truncated "
                                                      f"\\(it ends at byte {cut}"):
            genemask.count_kmers(str(tmp_path / "cut.fa.gz"), 1)
    with pytest.raises(genemask.InputError, match="is a directory, not a file"):
        genemask.NpmiTable.load(str(tmp_path))
    with pytest.raises(genemask.InputError, match="is a directory, not a file"):
        genemask.PmiVocab.load(str(tmp_path))
    os.mkfifo(tmp_path / "g.fifo")
    with pytest.raises(genemask.InputError, match="is a FIFO"):
        genemask.count_kmers(str(tmp_path / "g.fifo"), 1)
    with pytest.raises(genemask.InputError, match="is a FIFO"):
        genemask.NpmiTable.load(str(tmp_path / "g.fifo"))
    with pytest.raises(ValueError, match="max_length=1099511627776 pads 1 sequence\\(s\\) to 1099511627776 tokens"):
        genemask.Tokenizer().batch(["ACGTACGTACGT"], max_length=2 ** 40)


def test_counts_of_two_genomes_or_overflowing_are_refused(tmp_path):
    """npmi() and pmi_vocab() ranked tables mixed from two genomes, or whose totals wrap
    around 2^64, without a word; genemask npmi refuses the same tables in a counts.h5."""
    rng = np.random.default_rng(5)
    a = genemask.count_kmers(write(tmp_path / "a.fa", ">a\n" + "".join(rng.choice(list("ACGT"), 3000)) + "\n"), 4)
    b = genemask.count_kmers(write(tmp_path / "b.fa", ">b\n" + "".join(rng.choice(list("ACGT"), 900)) + "\n"), 4)
    genemask.npmi(a, k=4, min_count=2)  # one genome's tables: fine
    mixed = {1: a[1], 2: a[2], 3: b[3], 4: b[4]}  # fewer 3-mers than a's 2-mers allow: fine
    genemask.npmi(mixed, k=4, min_count=2)
    mixed = {1: b[1], 2: b[2], 3: a[3], 4: a[4]}  # more 3-mers than b's 2-mers occur
    with pytest.raises(genemask.InputError, match="the 3-mers that (begin|end) with [ACGT]{2} number [0-9]+, more than"):
        genemask.npmi(mixed, k=4, min_count=2)
    with pytest.raises(genemask.InputError, match="the 3-mers that"):
        genemask.pmi_vocab(mixed, kmin=2, kmax=4, min_count=2, size=10)
    huge = {k: v.copy() for k, v in a.items()}
    huge[4][:2] = 2**63
    with pytest.raises(genemask.InputError, match="the 4-mer counts overflow 64 bits at entry 1"):
        genemask.npmi(huge, k=4, min_count=2)


def test_rows_without_attention_mask_are_padded_on_the_right(masker):
    """Without attention_mask a row is cut at its first [PAD]: a left-padded row went
    unmasked (no label, no loss) without a word."""
    tok = genemask.Tokenizer()
    ids = tok.encode("ACGTACGTACGTAGGCTAGCTAGGATCCA")
    b = np.zeros((2, len(ids) + 4), np.int64)
    b[0, :len(ids)] = ids  # padded on the right: fine
    masker.mask(b[:1])
    b[1, 4:] = ids  # padded on the left
    with pytest.raises(ValueError, match="input_ids\\[1, 4\\] is \\[CLS\\] after the \\[PAD\\] at column 0"):
        masker.mask(b)


def test_decode_keeps_positions_and_refuses_ids_of_no_sequence():
    """decode skipped [MASK] (every later base moved one place) and chained 6-mers that do
    not overlap as if they did."""
    tok = genemask.Tokenizer()
    seq = "ACGTACGTACGTAC"
    ids = tok.encode(seq)
    ids[3] = genemask.MASK
    # The masked 6-mer's bases are all shown by its neighbours (it printed N at base 8).
    assert tok.decode(ids) == seq
    # Masks over 6 6-mers in a row hide the one base that only they cover; [UNK] likewise.
    # Against a brute-force rule: base p is known when some unmasked 6-mer j, p-5 <= j <= p, is.
    rng = np.random.default_rng(3)
    for _ in range(200):
        s = "".join(rng.choice(list("ACGT"), int(rng.integers(6, 40))))
        ids = tok.encode(s)
        n = len(s) - 5
        hidden = rng.random(n) < rng.random()
        ids[1:-1][hidden] = rng.choice([genemask.MASK, genemask.UNK], int(hidden.sum()))
        want = "".join(c if any(not hidden[j] for j in range(max(0, p - 5), min(p, n - 1) + 1)) else "N"
                       for p, c in enumerate(s))
        assert tok.decode(ids) == want, (s, hidden)
    # "NACGTAC": the [UNK] 6-mer's last 5 bases are the next 6-mer's (it gave "NNNNNNC").
    assert tok.decode(tok.encode("NACGTAC")) == "NACGTAC"
    assert tok.decode(tok.encode("ACGTACNACGTAC")) == "ACGTACNACGTAC"
    # Two sequences' ids (a packed row): refused, not chained into one (with masks, it was).
    a, b = tok.encode("ACGTACGTTGCAAC"), tok.encode("TTTTGGGGCC")
    with pytest.raises(ValueError, match="follows the \\[SEP\\] at ids\\[10\\]: the ids hold more than one sequence"):
        tok.decode(np.concatenate([a, b]))
    assert tok.decode(np.concatenate([a, [genemask.PAD] * 3])) == "ACGTACGTTGCAAC"  # padding after is fine
    a, c = tok.encode("AAAAAA", False)[0], tok.encode("CCCCCC", False)[0]
    with pytest.raises(ValueError, match="ids\\[1\\] \\(CCCCCC\\) does not overlap ids\\[0\\] \\(AAAAAA\\) by 5 bases"):
        tok.decode(np.array([a, c]))


def test_numbers_of_the_wrong_kind_are_named(masker, batch, work, tmp_path):
    """A float where an integer is meant (cut silently before), a scalar where a row is meant, an
    unsigned value past int64 (read as a negative one before), and the ints 0/1 as flags."""
    ids, att = batch
    with pytest.raises(TypeError, match="seed must be an integer, got 1.9"):
        genemask.Masker("random", seed=1.9)
    with pytest.raises(TypeError, match="epoch must be an integer, got 1.7"):
        masker.mask(ids, att, epoch=1.7)
    with pytest.raises(TypeError, match="kmax must be an integer, got 2.9"):
        genemask.count_kmers(work["fasta"], kmax=2.9)
    with pytest.raises(TypeError, match="a token id must be an integer, got 5.7"):
        genemask.Tokenizer().convert_ids_to_tokens([5.7])
    assert genemask.Masker("random", seed=np.uint64(3)).seed == 3  # numpy integers are integers
    with pytest.raises(ValueError, match="input_ids must be an array \\(1-D or 2-D\\), got the scalar 5"):
        masker.mask(5)
    big = ids.astype(np.uint64)
    big[0, 3] = 2**64 - 1
    with pytest.raises(ValueError, match="input_ids holds 18446744073709551615, past the int64 range"):
        masker.mask(big, att)
    with pytest.raises(ValueError, match="sample_index holds 9223372036854775808, past the int64 range"):
        masker.mask(ids, att, sample_index=np.array([0, 2**63], dtype=np.uint64))
    with pytest.raises(TypeError, match="ids must hold integers, got dtype bool"):
        genemask.Tokenizer().decode(np.array([True, True]))
    tok = genemask.Tokenizer()
    assert tok.encode("ACGTACGT", add_special_tokens=0).tolist() == tok.encode("ACGTACGT", False).tolist()
    with pytest.raises(TypeError, match="add_special_tokens must be True or False, got 2"):
        tok.encode("ACGTACGT", add_special_tokens=2)
    with pytest.raises(ValueError, match="max_length=18446744073709551616 is past any model's"):
        tok.batch(["ACGTACGT"], max_length=2**64)
    counts = genemask.count_kmers(work["fasta"], kmax=6)
    with pytest.raises(ValueError, match="min_count must be in 2..2\\^64-1, got -1"):
        genemask.npmi(counts, min_count=-1)
    with pytest.raises(ValueError, match="size must be in 1..2\\^64-1, got -1"):
        genemask.pmi_vocab(counts, kmax=6, size=-1)
    from genemask.hf import DataCollatorForGeneMask
    with pytest.raises(TypeError, match="max_length must be an int, the most tokens of a row"):
        DataCollatorForGeneMask(strategy="random", max_length=None)
    with pytest.raises(ValueError, match="epoch must be in 0..2\\^64-1, got 18446744073709551616"):
        genemask.ShardDataset(work["shards"], epoch=2**64)
    with pytest.raises(ValueError, match="epoch 18446744073709551615 \\+ 2 epochs passes epoch 2\\^64-1"):
        genemask.ShardDataset(work["shards"], epoch=2**64 - 1, epochs=2)
    # Paths as pathlib.Path, as everywhere else in the package.
    import pathlib
    assert len(genemask.NpmiTable.load(pathlib.Path(work["npmi"]))) == 4096
    assert len(genemask.PmiVocab.load(pathlib.Path(work["pmi_vocab"]))) == \
        len(genemask.PmiVocab.load(work["pmi_vocab"]))


def test_truncation_without_max_length_cuts_at_the_model_length(tmp_path):
    """Hugging Face's meaning: truncation=True without max_length cuts at model_max_length
    (512) and pads to the longest row; the exported BertTokenizer cuts the 6-mer text alike."""
    tok = genemask.Tokenizer()
    long, short = "ACGT" * 200, "ACGTTGCAAC"
    ids, att = tok.batch([long, short], truncation=True)
    assert ids.shape == (2, 512) and att[0].sum() == 512 and att[1].sum() == 7
    want, _ = tok.batch([long, short], max_length=512, truncation=True)
    np.testing.assert_array_equal(ids, want)
    ids, att = tok.batch([short, short], truncation=True)
    assert ids.shape == (2, 7)  # the longest row, not 512
    transformers = pytest.importorskip("transformers")
    tok.save_pretrained(tmp_path)
    hf = transformers.AutoTokenizer.from_pretrained(str(tmp_path))
    text = " ".join(long[i:i + 6] for i in range(len(long) - 5))
    assert hf(text, truncation=True)["input_ids"] == tok.batch([long], truncation=True)[0][0].tolist()


def test_npmi_of_too_few_counts_warns_as_the_cli_does(work):
    counts = genemask.count_kmers(work["fasta"], kmax=6)
    with pytest.warns(UserWarning, match=r"of the 4096 6-mers are below min_count 101 .* the ranking says little"):
        t = genemask.npmi(counts, k=6)
    assert t.below_min_count.sum() * 2 > len(t)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        genemask.npmi(counts, k=6, min_count=3)  # the session's table: most 6-mers seen 3 times or more
