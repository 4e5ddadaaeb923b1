"""``genemask.ShardDataset``: a torch ``IterableDataset`` over a shard set of ``genemask
shards`` (one genome or a genome list), in the order ``genemask pretrain`` reads it.

    >>> ds = genemask.ShardDataset("shards/", genome_weights="temperature:3", seed=42, batch_size=16)
    >>> loader = torch.utils.data.DataLoader(ds, batch_size=16, num_workers=2,
    ...                                      collate_fn=DataCollatorForGeneMask(npmi="npmi.tsv", seed=42))

Order: the epoch's order is genemask's own (``_core.epoch_permutation`` without weights,
``_core.weighted_epoch_order`` with ``genome_weights``), a pure function of (seed, epoch).
Distributed rank r of R takes positions r, r+R, ... (N // R of them), as ``pretrain``'s
ranks do; within a rank, DataLoader worker w of W takes the rank's blocks of ``batch_size``
positions w, w+W, ... (the DataLoader hands batches out from its workers in turn, so with the
DataLoader's ``batch_size`` the batches come in ``pretrain``'s order, within an epoch:
``pretrain``'s last batch of an epoch is short, a DataLoader batch may span two epochs). No
position is given to two workers or ranks, and none is left out.

Each item is a dict: ``input_ids`` ([CLS] 6-mer ids [SEP], int64), ``sample_index`` (the
corpus sample, the masks' key), ``epoch``, and ``genome`` (the genome's index in
``ds.genomes``; 0 for a set of one genome). ``DataCollatorForGeneMask`` with an integer
``seed`` masks rows that carry ``sample_index`` and ``epoch`` exactly as ``pretrain`` does
with that ``--seed``.
"""
from __future__ import annotations

import hashlib
import json
import os
from typing import Any, Dict, Iterator, List, Optional

import numpy as np
import torch

from . import _core
from ._core import InputError

CLS, SEP = _core.CLS, _core.SEP


def _sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


class ShardDataset(torch.utils.data.IterableDataset):
    """All samples of one split of a shard directory. ``genome_weights``: ``None`` (every
    sample once per epoch), ``"bases"``, ``"uniform"``, ``"list"`` or ``"temperature:T"``,
    as ``pretrain --genome-weights``. ``epochs``: how many epochs to yield (None: without end,
    as ``pretrain``); ``epoch``: the first. ``rank``/``world_size``: the distributed rank
    (default: torch.distributed's when it is initialised, else 0 of 1). ``verify``: check
    each shard's SHA-256 against the manifest when opening (as ``pretrain`` does)."""

    def __init__(self, shards_dir: str, split: str = "train", genome_weights: Optional[str] = None, seed: int = 42,
                 epoch: int = 0, epochs: Optional[int] = 1, rank: Optional[int] = None,
                 world_size: Optional[int] = None, batch_size: int = 1, verify: bool = True) -> None:
        super().__init__()
        import h5py  # only the dataset needs it

        self.dir = os.fspath(shards_dir)
        self.split = split
        self.seed = int(seed)
        self.first_epoch = int(epoch)
        self.epochs = epochs
        self.batch_size = int(batch_size)
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        if rank is None or world_size is None:
            dist = torch.distributed.is_available() and torch.distributed.is_initialized()
            rank = torch.distributed.get_rank() if dist else 0
            world_size = torch.distributed.get_world_size() if dist else 1
        if not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} is not in 0..{world_size - 1}")
        self.rank, self.world_size = int(rank), int(world_size)
        manifest_path = os.path.join(self.dir, "manifest.json")
        try:
            with open(manifest_path) as f:
                m = json.load(f)
        except OSError as e:
            raise InputError(f"{manifest_path}: cannot open ({e.strerror}): is this a shard directory made by "
                             "`genemask shards`?") from None
        except ValueError as e:
            raise InputError(f"{manifest_path}: not JSON ({e}): the manifest is damaged") from None
        if m.get("format") != "genemask-shards":
            raise InputError(f"{manifest_path}: format is {m.get('format')!r}, expected 'genemask-shards'")
        self.genomes: List[Dict[str, Any]] = m.get("genomes") or []
        chrom_genome = [c.get("genome", 0) for c in m["chromosomes"]]
        index, genome, where = [], [], []
        self._shards = []
        for sh in m["shards"]:
            if sh["split"] != split:
                continue
            path = os.path.join(self.dir, sh["file"])
            if verify and _sha256(path) != sh["sha256"]:
                raise InputError(f"{path}: SHA-256 differs from {manifest_path}: the file was changed or damaged "
                                 "(build the shards again)")
            with h5py.File(path, "r") as h:
                si = h["sample_index"][...]
                offsets = h["offsets"][...]
                g = h["genome"][...] if "genome" in h else np.array([chrom_genome[c] for c in h["chrom"][...]],
                                                                      dtype=np.uint32)
            if len(si) != sh["samples"]:
                raise InputError(f"{path}: has {len(si)} samples, the manifest says {sh['samples']}")
            s = len(self._shards)
            self._shards.append((path, offsets))
            index.append(si)
            genome.append(g.astype(np.uint32))
            where.append(np.stack([np.full(len(si), s, dtype=np.int64), np.arange(len(si), dtype=np.int64)], axis=1))
        if not index:
            raise InputError(f"{manifest_path}: has no {split!r} samples")
        index = np.concatenate(index)
        order = np.argsort(index, kind="stable")
        self.sample_index = index[order]
        if np.any(self.sample_index[1:] == self.sample_index[:-1]):
            raise InputError(f"{manifest_path}: a sample is in two shards (a copied shard?): build the shards again")
        self.sample_genome = np.ascontiguousarray(np.concatenate(genome)[order], dtype=np.uint32)
        self._where = np.concatenate(where)[order]
        self.genome_weights = genome_weights
        self.probabilities: Optional[np.ndarray] = None
        if genome_weights is not None:
            if not self.genomes:
                raise InputError(f"{manifest_path}: was built from one genome (shards --genome): genome_weights="
                                 f"{genome_weights!r} needs a shard set built from a genome list (shards --genomes)")
            samples = np.bincount(self.sample_genome, minlength=len(self.genomes)).tolist()
            self.probabilities = np.array(_core.genome_probabilities(
                genome_weights, [g["name"] for g in self.genomes], [int(g["bases"]) for g in self.genomes],
                [float(g["weight"] or 0) for g in self.genomes], samples))
        self.per_rank = len(self.sample_index) // self.world_size
        if self.per_rank == 0:
            raise InputError(f"{self.dir}: {len(self.sample_index)} {split!r} samples cannot feed {self.world_size} ranks")
        self._files: Dict[int, Any] = {}
        self._pid = os.getpid()

    def __len__(self) -> int:
        """Samples this rank yields per epoch (all workers together)."""
        return self.per_rank

    def epoch_order(self, epoch: int) -> np.ndarray:
        """The epoch's order: positions -> sample (index into the split, in sample_index order)."""
        if self.probabilities is None:
            return _core.epoch_permutation(len(self.sample_index), self.seed, int(epoch))
        return _core.weighted_epoch_order(self.sample_genome, self.probabilities.tolist(), self.seed, int(epoch))

    def _tokens(self, i: int) -> np.ndarray:
        import h5py

        if self._pid != os.getpid():  # a DataLoader worker: its own file handles, not the parent's
            self._files, self._pid = {}, os.getpid()
        s, local = self._where[i]
        path, offsets = self._shards[s]
        f = self._files.get(s)
        if f is None:
            f = self._files[s] = h5py.File(path, "r")
        t = f["tokens"][offsets[local]:offsets[local + 1]].astype(np.int64)
        if t.size and (t.min() < _core.FIRST_KMER_TOKEN or t.max() >= _core.VOCAB_SIZE):
            raise InputError(f"{path}: damaged shard: sample {local} has a token id outside the 6-mer ids")
        return np.concatenate([[CLS], t, [SEP]]).astype(np.int64)

    def __iter__(self) -> Iterator[Dict[str, Any]]:
        info = torch.utils.data.get_worker_info()
        worker, workers = (0, 1) if info is None else (info.id, info.num_workers)
        epoch = self.first_epoch
        while self.epochs is None or epoch < self.first_epoch + self.epochs:
            order = self.epoch_order(epoch)
            for j in range(self.per_rank):
                if (j // self.batch_size) % workers != worker:
                    continue
                i = int(order[j * self.world_size + self.rank])
                yield {"input_ids": self._tokens(i), "sample_index": int(self.sample_index[i]), "epoch": epoch,
                       "genome": int(self.sample_genome[i])}
            epoch += 1
