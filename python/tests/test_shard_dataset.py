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
