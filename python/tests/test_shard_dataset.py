"""genemask.ShardDataset (issue 32): the first batch equals `genemask pretrain
--dump-first-batch` for the same seed (with and without genome weights, masks included, with
DataCollatorForGeneMask), DataLoader workers and distributed ranks share an epoch without
overlap or loss, genome frequencies follow the weights, and the genome-list example goes from
FASTAs to a transformers.Trainer run."""
import json
import os
import random
import subprocess
import sys

import numpy as np
import pytest
import torch

import genemask
from genemask.hf import DataCollatorForGeneMask
from conftest import ROOT, SEED, TINY, cli, write_genome

EXAMPLE = os.path.join(ROOT, "python", "examples", "pretrain_genomes_with_trainer.py")


@pytest.fixture(scope="module")
def genomes(tmp_path_factory):
    d = tmp_path_factory.mktemp("genomes")
    rng = random.Random(5)
    with open(d / "genomes.tsv", "w") as f:
        f.write("name\tpath\tweight\n")
        for name, length, weight in [("big", (9000, 12000), 1), ("mid", (3000, 4000), 3), ("small", (900, 1200), 6)]:
            write_genome(str(d / f"{name}.fa"), rng, records=2, length=length)
            f.write(f"{name}\t{name}.fa\t{weight}\n")
    cli("count", "--genomes", d / "genomes.tsv", "--out", d / "counts.h5", "--kmax", 6)
    cli("npmi", "--counts", d / "counts.h5", "--out", d / "npmi.tsv", "--k", 6, "--min-count", 3)
    cli("shards", "--genomes", d / "genomes.tsv", "--out", d / "shards", "--max-tokens", 60, "--min-tokens", 20,
        "--seed", SEED)
    with open(d / "tiny.json", "w") as f:
        json.dump(TINY, f)
    return d


def first_batch(d, tag, weights, batch=8, masking="genemask"):
    out, dump = d / f"run-{tag}", d / f"first-{tag}.safetensors"
    args = ["pretrain", "--shards", d / "shards", "--model", d / "tiny.json", "--out", out, "--steps", 1,
            "--batch-per-rank", batch, "--grad-accum", 1, "--seed", SEED, "--masking", masking,
            "--npmi", d / "npmi.tsv", "--eval-every", 0, "--threads", 1, "--dump-first-batch", dump]
    if weights:
        args += ["--genome-weights", weights]
    cli(*args)
    from safetensors.numpy import load_file
    return load_file(str(dump))


@pytest.mark.parametrize("weights", [None, "uniform", "temperature:2", "list"])
def test_first_batch_is_pretrains(genomes, weights):
    want = first_batch(genomes, str(weights).replace(":", ""), weights)
    ds = genemask.ShardDataset(genomes / "shards", genome_weights=weights, seed=SEED, batch_size=8)
    items = [x for _, x in zip(range(8), iter(ds))]
    np.testing.assert_array_equal([x["sample_index"] for x in items], want["sample_index"])
    batch = DataCollatorForGeneMask(npmi=str(genomes / "npmi.tsv"), seed=SEED)(items)
    np.testing.assert_array_equal(batch["input_ids"].numpy(), want["input_ids"])
    np.testing.assert_array_equal(batch["labels"].numpy(), want["labels"])
    np.testing.assert_array_equal(batch["attention_mask"].numpy(), want["attention_mask"])


def test_workers_and_ranks_share_an_epoch_without_overlap_or_loss(genomes):
    one = genemask.ShardDataset(genomes / "shards", genome_weights="uniform", seed=3, batch_size=4)
    order = [x["sample_index"] for x in one]
    assert len(order) == len(one) == one.per_rank
    for workers in (2, 3):
        loader = torch.utils.data.DataLoader(one, batch_size=4, num_workers=workers, collate_fn=lambda b: b)
        got = [x["sample_index"] for b in loader for x in b]
        assert got == order  # the same batches in the same order as one process (pretrain's)
    ranks = [genemask.ShardDataset(genomes / "shards", genome_weights="uniform", seed=3, rank=r, world_size=3)
             for r in range(3)]
    epoch = ranks[0].epoch_order(0)
    seen = [[x["sample_index"] for x in ds] for ds in ranks]
    n = ranks[0].per_rank
    for r in range(3):
        assert seen[r] == [int(ranks[0].sample_index[epoch[j * 3 + r]]) for j in range(n)]
    # Positions: each of the 3n is given to exactly one rank (samples repeat only where the
    # weights draw a genome more often than it has samples).
    assert sorted(p for r in range(3) for p in range(r, 3 * n, 3)) == list(range(3 * n))


def test_epochs_follow_as_one_stream_at_every_rank_count(genomes):
    """As pretrain reads them: stream position g is position g mod N of epoch g // N, rank r
    of R takes positions r, r+R, ... across the epochs' ends (none of an epoch's last N mod R
    left out), every rank the same number."""
    one = genemask.ShardDataset(genomes / "shards", genome_weights="uniform", seed=3, epochs=2)
    n = len(one.sample_index)
    stream = [(x["epoch"], x["sample_index"]) for x in one]
    assert len(stream) == len(one) == 2 * n
    assert stream == [(g // n, int(one.sample_index[one.epoch_order(g // n)[g % n]])) for g in range(2 * n)]
    for world in (2, 3, 4):
        seen = [[(x["epoch"], x["sample_index"]) for x in genemask.ShardDataset(
            genomes / "shards", genome_weights="uniform", seed=3, epochs=2, rank=r, world_size=world)]
            for r in range(world)]
        k = 2 * n // world
        assert [len(s) for s in seen] == [k] * world
        for r in range(world):
            assert seen[r] == [stream[j * world + r] for j in range(k)], (world, r)


def test_genome_frequencies_follow_the_weights(genomes):
    ds = genemask.ShardDataset(genomes / "shards", genome_weights="list", seed=1, epochs=40)
    counts = np.zeros(3)
    for x in ds:
        counts[x["genome"]] += 1
    p = np.array([1, 3, 6]) / 10
    n = counts.sum()
    assert np.all(np.abs(counts - n * p) < 5 * np.sqrt(n * p * (1 - p))), (counts, n * p)
    assert [g["name"] for g in ds.genomes] == ["big", "mid", "small"]


def test_refusals(genomes, work):
    with pytest.raises(genemask.InputError, match="built from one genome"):
        genemask.ShardDataset(work["shards"], genome_weights="uniform")
    with pytest.raises(ValueError, match="expected bases, uniform, list or temperature:T"):
        genemask.ShardDataset(genomes / "shards", genome_weights="sizes")


def test_the_readme_shows_the_genomes_example():
    with open(EXAMPLE) as f:
        code = f.read()
    with open(os.path.join(ROOT, "README.md")) as f:
        assert "```python\n" + code + "```" in f.read()


def test_the_genomes_example_trains_with_a_trainer(genomes, tmp_path):
    out = tmp_path / "model"
    p = subprocess.run([sys.executable, EXAMPLE, str(genomes / "shards"), str(genomes / "npmi.tsv"), str(out), "3"],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    assert (out / "config.json").exists() and (out / "model.safetensors").exists()
    assert (out / "vocab.txt").read_text().splitlines() == genemask.Tokenizer().vocab()  # the tokenizer too


def edited(src, dst, manifest=None, shard=None, split="train"):
    """A copy of the shard set src at dst with manifest(m) applied to its manifest and shard(h)
    to its first shard of the split (opened for writing); returns dst."""
    import shutil
    shutil.copytree(src, dst)
    with open(dst / "manifest.json") as f:
        m = json.load(f)
    if manifest:
        manifest(m)
        with open(dst / "manifest.json", "w") as f:
            json.dump(m, f)
    if shard:
        import h5py
        name = next(s["file"] for s in m["shards"] if s["split"] == split)
        with h5py.File(dst / name, "r+") as h:
            shard(h)
    return dst


def shards_of(m, split):
    return [s for s in m["shards"] if s["split"] == split]


def drop_valid(m):
    m["shards"] = shards_of(m, "train")


def drop_valid_and_totals(m):
    drop_valid(m)
    m["totals"]["valid"] = {"samples": 0, "tokens": 0}


def valid_as_train(m):
    for s in m["shards"]:
        s["split"] = "train"
    t = m["totals"]
    t["train"] = {k: t["train"][k] + t["valid"][k] for k in ("samples", "tokens")}
    t["valid"] = {"samples": 0, "tokens": 0}


def set_field(*path_and_value):
    *path, value = path_and_value

    def edit(m):
        for key in path[:-1]:
            m = m[key]
        m[path[-1]] = value
    return edit


def first_train(key, value):
    def edit(m):
        shards_of(m, "train")[0][key] = value
    return edit


MANIFEST_EDITS = [
    ("shard-removed", drop_valid, "totals.valid: \\d+ samples and \\d+ tokens, but the shards listed hold 0 and 0"),
    ("shard-removed-totals-too", drop_valid_and_totals,
     "candidates: \\d+ segments cut, \\d+ dropped, but the shards listed hold"),
    ("split-changed", valid_as_train, "is a 'valid' shard, but the manifest lists it as 'train'"),
    ("no-totals", lambda m: m.pop("totals"), "manifest.json: totals: missing; the manifest is damaged or was edited"),
    ("format-version", set_field("format_version", 2), "format_version 2 is not supported \\(expected 1\\)"),
    ("file-with-slash", first_train("file", "../shards/x.h5"),
     "shards\\[0\\].file: '../shards/x.h5' is not a file name"),
    ("file-dotdot", first_train("file", ".."), "shards\\[0\\].file: '..' is not a file name in the shard directory"),
    ("listed-twice", lambda m: m["shards"].append(dict(m["shards"][0])), "both list the shard"),
    ("samples-text", first_train("samples", "12"), "shards\\[0\\].samples: \"12\" is not a non-negative integer"),
    ("first-sample", first_train("first_sample", 1), "holds samples 0\\.\\.\\d+, the manifest says 1\\.\\."),
    ("vocab", set_field("vocab_sha256", "0" * 64), "vocab_sha256 is '0{64}', but genemask's DNABERT-6 vocabulary"),
]


@pytest.mark.parametrize("name,edit,match", MANIFEST_EDITS, ids=[e[0] for e in MANIFEST_EDITS])
def test_an_edited_manifest_is_refused(work, genomes, tmp_path, name, edit, match):
    """The manifest is checked as `pretrain` checks it (io/shard_manifest.cpp): a shard left
    out, a split changed, a path for a file name: each once read as a smaller or other
    corpus without a word."""
    d = edited(work["shards"], tmp_path / "s", manifest=edit)
    with pytest.raises(genemask.InputError, match=match):
        genemask.ShardDataset(d)
    genemask.ShardDataset(work["shards"])  # the original is read


@pytest.mark.parametrize("split", ["train", "valid"])
def test_a_foreign_shard_is_refused(work, genomes, tmp_path, split):
    """A shard of another shard set (the genome list's) listed in the manifest: as a valid
    shard (not read for train) it was ignored; as a train shard, with the totals adjusted,
    its samples were read as this set's."""
    import shutil
    other = json.loads((genomes / "shards" / "manifest.json").read_text())
    foreign = shards_of(other, "train")[0]

    def edit(m):
        m["shards"].append(dict(foreign, file="foreign.h5", split=split))
        if split == "train":
            for k in ("samples", "tokens"):
                m["totals"]["train"][k] += foreign[k]
            m["candidates"] += foreign["samples"]
    d = edited(work["shards"], tmp_path / "s", manifest=edit)
    shutil.copy(genomes / "shards" / foreign["file"], d / "foreign.h5")
    match = "totals.valid: .* but the shards listed hold" if split == "valid" else \
        "foreign.h5: (is a 'train' shard|was cut with seed 7|damaged shard: sample \\d+ has chrom)"
    with pytest.raises(genemask.InputError, match=match):
        genemask.ShardDataset(d, split="train")


def test_an_incomplete_shard_set_is_refused(work, tmp_path):
    d = edited(work["shards"], tmp_path / "s")
    marker = json.loads((d / ".genemask.json").read_text())
    (d / ".genemask.json").write_text(json.dumps(dict(marker, complete=False)))
    with pytest.raises(genemask.InputError, match="is an incomplete output of `genemask shards` .* run that command "
                                                  "again \\(it replaces an incomplete output\\)"):
        genemask.ShardDataset(d)
    (d / ".genemask.json").write_text("{}")
    with pytest.raises(genemask.InputError, match="is not a genemask output marker"):
        genemask.ShardDataset(d)


def test_a_key_given_twice_is_refused(work, tmp_path):
    """A manifest or marker with a key given twice (an edit that added "seed" again) was read
    with the last value, as json.loads does; the package reads them with the CLI's reader
    (io/json.cpp), which refuses it."""
    d = edited(work["shards"], tmp_path / "s")
    text = (d / "manifest.json").read_text()
    (d / "manifest.json").write_text(text.replace("{", '{"seed": 1, ', 1))
    with pytest.raises(genemask.InputError, match="manifest.json:\\d+: the key \"seed\" appears twice in one object"):
        genemask.ShardDataset(d)
    (d / "manifest.json").write_text(text)
    genemask.ShardDataset(d)  # as written, read
    marker = (d / ".genemask.json").read_text()
    (d / ".genemask.json").write_text(marker.replace("{", '{"complete": true, ', 1))
    with pytest.raises(genemask.InputError, match="is not a genemask output marker"):
        genemask.ShardDataset(d)


def test_the_genomes_counts_must_be_the_shards(genomes, tmp_path):
    def edit(m):
        m["genomes"][0]["samples"]["train"] += 1
    d = edited(genomes / "shards", tmp_path / "s", manifest=edit)
    with pytest.raises(genemask.InputError, match="genomes: their train samples and tokens add up to"):
        genemask.ShardDataset(d)


def set_attr(name, value):
    def edit(h):
        h.attrs[name] = value
    return edit


def set_at(dataset, i, value):
    def edit(h):
        h[dataset][i] = value
    return edit


SHARD_EDITS = [
    ("format", set_attr("format", "genemask-shardz"), "not a genemask shard \\(expected attribute format="),
    ("format-version", set_attr("format_version", np.uint64(2)), "shard format version 2 is not supported"),
    ("split", set_attr("split", "valid"), "is a 'valid' shard, but the manifest lists it as 'train'"),
    ("vocab", set_attr("vocab_sha256", "f" * 64), "vocab_sha256 is 'f{64}', but genemask's DNABERT-6 vocabulary"),
    ("seed", set_attr("seed", np.uint64(43)), "was cut with seed 43, the manifest's shards with seed"),
    ("offsets-start", set_at("offsets", 0, 1), "damaged shard: offsets\\[0\\] is 1, expected 0"),
    ("offsets-order", set_at("offsets", 2, 1), "damaged shard: sample 1 spans offsets \\d+\\.\\.1, expected 1 to 510 "
                                               "tokens in increasing order"),
    ("offsets-empty-sample", set_at("offsets", 1, 0), "damaged shard: sample 0 spans offsets 0\\.\\.0"),
    ("offsets-end", set_at("offsets", -1, 5), "damaged shard: sample \\d+ spans|the offsets end at token"),
    ("sample-order", set_at("sample_index", 1, 0), "damaged shard: sample 1 has sample_index 0 after 0"),
    ("chrom", set_at("chrom", 3, 2), "damaged shard: sample 3 has chrom 2, but the manifest lists 2 chromosomes"),
]


@pytest.mark.parametrize("name,edit,match", SHARD_EDITS, ids=[e[0] for e in SHARD_EDITS])
def test_a_damaged_shard_is_refused(work, tmp_path, name, edit, match):
    """A shard is checked as `pretrain` checks it (io/shard_file.cpp, loader.cpp): attributes,
    offsets, sample indices, chromosomes (its SHA-256 is not checked here: verify=False)."""
    d = edited(work["shards"], tmp_path / "s", shard=edit)
    with pytest.raises(genemask.InputError, match=match):
        genemask.ShardDataset(d, verify=False)


def test_a_long_sample_is_refused(work, tmp_path):
    def edit(h):  # sample 0 takes 511 tokens of the next samples
        h["offsets"][1] = 511
    d = edited(work["shards"], tmp_path / "s", shard=edit)
    with pytest.raises(genemask.InputError, match="sample 0 spans offsets 0\\.\\.511, expected 1 to 510 tokens"):
        genemask.ShardDataset(d, verify=False)


def test_a_samples_genome_must_be_its_chromosomes(genomes, tmp_path):
    def edit(h):
        h["genome"][0] = (h["genome"][0] + 1) % 3
    d = edited(genomes / "shards", tmp_path / "s", shard=edit)
    with pytest.raises(genemask.InputError, match="damaged shard: sample 0 has genome \\d, but its chromosome \\d+ is "
                                                  "of genome \\d"):
        genemask.ShardDataset(d, verify=False)


def test_rank_and_world_size_go_together_and_epochs_is_positive(work):
    with pytest.raises(ValueError, match="rank=1 and world_size=None: give both"):
        genemask.ShardDataset(work["shards"], rank=1)
    with pytest.raises(ValueError, match="rank=None and world_size=2: give both"):
        genemask.ShardDataset(work["shards"], world_size=2)
    for epochs in (0, -1):
        with pytest.raises(ValueError, match=f"epochs must be None \\(without end\\) or at least 1, got {epochs}"):
            genemask.ShardDataset(work["shards"], epochs=epochs)
    assert genemask.ShardDataset(work["shards"], rank=1, world_size=2).rank == 1


def test_items_carry_the_seed_and_the_collator_refuses_another(work):
    ds = genemask.ShardDataset(work["shards"], seed=42, batch_size=4)
    items = [x for _, x in zip(range(4), iter(ds))]
    assert all(x["seed"] == 42 for x in items)
    with pytest.raises(ValueError, match="example 0 comes with seed 42 \\(its dataset's\\), but the collator masks "
                                         "with seed=7"):
        DataCollatorForGeneMask(strategy="random", seed=7)(items)
    same = DataCollatorForGeneMask(strategy="random", seed=42)(items)
    np.testing.assert_array_equal(same["input_ids"].numpy(), DataCollatorForGeneMask(strategy="random", seed=42)(
        [{k: v for k, v in x.items() if k != "seed"} for x in items])["input_ids"].numpy())
    DataCollatorForGeneMask(strategy="random")(items)  # seed=None: torch's draws, no seed to match


def test_the_vocabulary_digest_is_the_clis(work, tmp_path):
    from genemask.data import vocab_sha256
    summary = cli("vocab", "--out", tmp_path / "vocab.txt")
    assert summary["sha256"] == vocab_sha256()
    with open(os.path.join(work["shards"], "manifest.json")) as f:
        assert json.load(f)["vocab_sha256"] == vocab_sha256()


def test_a_dataset_pickles_after_it_was_read_and_spawned_workers_read_as_forked_ones(genomes):
    """A look at an item in the main process opens a shard; the dataset still pickles (without
    its open files) into spawned workers, whose batches and masks are fork's and pretrain's."""
    import pickle

    ds = genemask.ShardDataset(genomes / "shards", genome_weights="uniform", seed=SEED, batch_size=4)
    first = next(iter(ds))
    assert ds._files  # a shard is open
    twin = pickle.loads(pickle.dumps(ds))
    assert not twin._files
    assert next(iter(twin))["sample_index"] == first["sample_index"]
    c = DataCollatorForGeneMask(npmi=str(genomes / "npmi.tsv"), seed=SEED)
    got = {}
    for context in ("fork", "spawn"):
        loader = torch.utils.data.DataLoader(ds, batch_size=4, num_workers=2, collate_fn=c,
                                             multiprocessing_context=context)
        got[context] = [(b["input_ids"], b["labels"]) for b in loader]
    assert len(got["spawn"]) == len(got["fork"]) >= 2
    for (a, x), (b, y) in zip(got["fork"], got["spawn"]):
        assert torch.equal(a, b) and torch.equal(x, y)
    whole = [x for x in ds]
    keyed = c(whole[:4])  # the first batch, masked by (seed, epoch, sample_index)
    assert torch.equal(got["spawn"][0][1], keyed["labels"])
