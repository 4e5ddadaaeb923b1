"""``genemask.ShardDataset``: a torch ``IterableDataset`` over a shard set of ``genemask
shards`` (one genome or a genome list), in the order ``genemask pretrain`` reads it.

    >>> ds = genemask.ShardDataset("shards/", genome_weights="temperature:3", seed=42, batch_size=16)
    >>> loader = torch.utils.data.DataLoader(ds, batch_size=16, num_workers=2,
    ...                                      collate_fn=DataCollatorForGeneMask(npmi="npmi.tsv", seed=42))

Order: the epoch's order is genemask's own (``_core.epoch_permutation`` without weights,
``_core.weighted_epoch_order`` with ``genome_weights``), a pure function of (seed, epoch).
The epochs follow one another as one stream (position g is position g mod N of epoch
``epoch + g // N``), as ``pretrain`` reads them: distributed rank r of R takes stream
positions r, r+R, r+2R, ...; within a rank, DataLoader worker w of W takes the rank's blocks
of ``batch_size`` positions w, w+W, ... (the DataLoader hands batches out from its workers in
turn, so with the DataLoader's ``batch_size`` the batches are ``pretrain``'s micro-batches,
also across an epoch's end, where a batch holds samples of two epochs, each item with its
own ``epoch``). No position is given to two workers or ranks. With ``epochs`` set, the
stream holds epochs x N positions and each rank yields (epochs x N) // R of them, the same
number on every rank: the last (epochs x N) mod R positions are not yielded.

Each item is a dict: ``input_ids`` ([CLS] 6-mer ids [SEP], an int64 numpy array of the
subclass ``genemask.ShardIds``), ``sample_index`` (the
corpus sample, the masks' key), ``epoch``, ``genome`` (the genome's index in
``ds.genomes``; 0 for a set of one genome) and ``seed`` (the dataset's). ``DataCollatorForGeneMask``
with an integer ``seed`` masks rows that carry ``sample_index`` and ``epoch`` exactly as
``pretrain`` does with that ``--seed``, and refuses items of another ``seed`` and items
without those keys: with ``transformers.Trainer``, pass ``TrainingArguments(
remove_unused_columns=False)``, or the Trainer removes them.

A ShardDataset pickles without its open files (a DataLoader's spawned workers open their own).

The shard set is checked when opened, as ``pretrain`` checks it: the manifest (complete,
its version, every field, the totals equal to the shards listed, genemask's vocabulary) and
each shard of the split (its attributes, offsets, sample indices, chromosomes and genomes
against the manifest); a shard set that was edited or damaged is an ``InputError`` naming
the file and the field.
"""
from __future__ import annotations

import hashlib
import os
from typing import Any, Dict, Iterator, List, Optional

import numpy as np
import torch

from . import ShardIds, _core, _integer
from ._core import InputError

CLS, SEP = _core.CLS, _core.SEP


SHARD_FORMAT, SHARD_VERSION = "genemask-shard", 1
U64_MAX = 2**64 - 1
_vocab_digest: Optional[str] = None


def _sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def vocab_sha256() -> str:
    """SHA-256 of genemask's vocab.txt (what `genemask vocab` writes and shard sets record)."""
    global _vocab_digest
    if _vocab_digest is None:
        _vocab_digest = hashlib.sha256(("\n".join(_core.vocab()) + "\n").encode()).hexdigest()
    return _vocab_digest


def _excerpt(text: str, limit: int) -> str:
    """text, control characters escaped, cut at limit characters (as the CLI quotes a value)."""
    cut = text[:limit]
    cut = "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in cut)
    return cut + "..." if len(text) > limit else cut


def read_manifest(d: str) -> Dict[str, Any]:
    """DIR/manifest.json, checked by the CLI's own reader (io/shard_manifest.cpp read_manifest,
    in the extension): the directory's marker says complete, format and version, every field,
    each shard listed once under a plain file name that exists, and the totals (and the
    genomes' counts, and candidates - dropped_non_acgt) equal to the sums over the shards
    listed; and the vocabulary is genemask's. A dict shaped like the file; errors name the
    file, the field and the value."""
    return _core.read_manifest(os.fspath(d))


def _attr(h, name: str) -> Any:
    v = h.attrs.get(name)
    if isinstance(v, np.ndarray) and v.shape in ((), (1,)):
        v = v.reshape(-1)[0]
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, bytes):
        v = v.decode("utf-8", "replace")
    return v


def _length(h, name: str, path: str) -> int:
    """The length of the 1-D dataset /name (not read)."""
    if name not in h or len(getattr(h[name], "shape", None) or ()) != 1:
        raise InputError(f"{path}: damaged shard: no 1-D /{name} dataset (build the shards again)")
    return int(h[name].shape[0])


def _dataset(h, name: str, path: str) -> np.ndarray:
    _length(h, name, path)
    a = h[name][...]
    if a.dtype.kind not in "iu":
        raise InputError(f"{path}: damaged shard: /{name} holds {a.dtype}, not integers (build the shards again)")
    return a


def _read_shard(h, path: str, sh: Dict[str, Any], m: Dict[str, Any], chrom_genome: np.ndarray):
    """(sample_index, offsets, genome per sample) of one open shard, checked as the CLI checks a
    shard it reads (io/shard_file.cpp ShardReader, src/core/corpus/loader.cpp ShardSet): the
    attributes, offsets from 0 in steps of 1..510 tokens to the end of /tokens, sample_index
    increasing and within the manifest's first..last, chrom and genome of the manifest's."""
    if _attr(h, "format") != SHARD_FORMAT:
        raise InputError(f"{path}: not a genemask shard (expected attribute format=\"{SHARD_FORMAT}\")")
    version = _attr(h, "format_version")
    if version != SHARD_VERSION:
        raise InputError(f"{path}: shard format version {version} is not supported (expected {SHARD_VERSION})")
    split = _attr(h, "split")
    if split != sh["split"]:
        raise InputError(f"{path}: is a '{_excerpt(str(split), 40)}' shard, but the manifest lists it as "
                         f"'{sh['split']}'")
    vocab = _attr(h, "vocab_sha256")
    if vocab is not None and vocab != vocab_sha256():
        raise InputError(f"{path}: vocab_sha256 is '{_excerpt(str(vocab), 80)}', but genemask's DNABERT-6 vocabulary "
                         f"(`genemask vocab`) has SHA-256 {vocab_sha256()}: the shard holds the ids of another "
                         "vocabulary; build the shards again with this genemask")
    seed = _attr(h, "seed")
    if seed is not None and seed != m["seed"]:
        raise InputError(f"{path}: was cut with seed {seed}, the manifest's shards with seed {m['seed']}: a shard of "
                         "another shard set? build the shards again")
    offsets = _dataset(h, "offsets", path)
    si = _dataset(h, "sample_index", path)
    chrom = _dataset(h, "chrom", path)
    starts = _length(h, "start", path)
    ntok = _length(h, "tokens", path)
    n = len(si)
    if len(offsets) != n + 1 or len(chrom) != n or starts != n:
        raise InputError(f"{path}: damaged shard: {len(offsets)} offsets for {n} samples (expected samples + 1), "
                         f"{len(chrom)} chrom and {starts} start entries")
    offsets = offsets.astype(np.int64) if offsets.dtype.kind == "i" else offsets.astype(np.uint64)
    if offsets[0] != 0:
        raise InputError(f"{path}: damaged shard: offsets[0] is {offsets[0]}, expected 0")
    step = offsets[1:] - offsets[:-1]  # wraps where not increasing: caught by the first test
    bad = np.flatnonzero((offsets[1:] <= offsets[:-1]) | (step > _core.MAX_TOKENS))
    if bad.size:
        i = int(bad[0])
        raise InputError(f"{path}: damaged shard: sample {i} spans offsets {offsets[i]}..{offsets[i + 1]}, expected "
                         f"1 to {_core.MAX_TOKENS} tokens in increasing order")
    bad = np.flatnonzero(si[1:] <= si[:-1])
    if bad.size:
        i = int(bad[0]) + 1
        raise InputError(f"{path}: damaged shard: sample {i} has sample_index {si[i]} after {si[i - 1]} "
                         "(must increase)")
    if int(offsets[-1]) != ntok:
        raise InputError(f"{path}: damaged shard: the offsets end at token {offsets[-1]}, but /tokens holds {ntok}")
    if n != sh["samples"] or ntok != sh["tokens"]:
        raise InputError(f"{path}: has {n} samples and {ntok} tokens, the manifest says {sh['samples']} and "
                         f"{sh['tokens']}")
    if n and (int(si[0]) != sh["first_sample"] or int(si[-1]) != sh["last_sample"]):
        raise InputError(f"{path}: holds samples {si[0]}..{si[-1]}, the manifest says {sh['first_sample']}.."
                         f"{sh['last_sample']}")
    bad = np.flatnonzero((chrom < 0) | (chrom >= len(chrom_genome)))
    if bad.size:
        i = int(bad[0])
        raise InputError(f"{path}: damaged shard: sample {i} has chrom {chrom[i]}, but the manifest lists "
                         f"{len(chrom_genome)} chromosomes")
    genome = chrom_genome[chrom.astype(np.int64)]
    if m.get("genomes"):
        if "genome" not in h:
            raise InputError(f"{path}: has no /genome dataset, but the manifest lists genomes: build the shards again")
        g = _dataset(h, "genome", path)
        if len(g) != n:
            raise InputError(f"{path}: damaged shard: {len(g)} genome entries for {n} samples")
        bad = np.flatnonzero(g != genome)
        if bad.size:
            i = int(bad[0])
            raise InputError(f"{path}: damaged shard: sample {i} has genome {g[i]}, but its chromosome {chrom[i]} is "
                             f"of genome {genome[i]}")
    return si, offsets, genome


class ShardDataset(torch.utils.data.IterableDataset):
    """All samples of one split of a shard directory. ``genome_weights``: ``None`` (every
    sample once per epoch), ``"bases"``, ``"uniform"``, ``"list"`` or ``"temperature:T"``,
    as ``pretrain --genome-weights``. ``epochs``: how many epochs to yield (None: without end,
    as ``pretrain``; else at least 1); ``epoch``: the first. ``rank``/``world_size``: the
    distributed rank, both or neither (neither: torch.distributed's when it is initialised,
    else 0 of 1). ``verify``: check each shard's SHA-256 against the manifest when opening
    (as ``pretrain`` does); the manifest and the shards' structure are checked always."""

    def __init__(self, shards_dir: str, split: str = "train", genome_weights: Optional[str] = None, seed: int = 42,
                 epoch: int = 0, epochs: Optional[int] = 1, rank: Optional[int] = None,
                 world_size: Optional[int] = None, batch_size: int = 1, verify: bool = True) -> None:
        super().__init__()
        import h5py  # only the dataset needs it

        self.dir = os.fspath(shards_dir)
        self.split = split
        self.seed = _integer(seed, "seed", 0, U64_MAX)
        self.first_epoch = _integer(epoch, "epoch", 0, U64_MAX)
        if epochs is not None and _integer(epochs, "epochs") < 1:
            raise ValueError(f"epochs must be None (without end) or at least 1, got {epochs}")
        self.epochs = None if epochs is None else _integer(epochs, "epochs")
        self.batch_size = _integer(batch_size, "batch_size")
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        if (rank is None) != (world_size is None):
            raise ValueError(f"rank={rank} and world_size={world_size}: give both (this process's rank of how many) "
                             "or neither (torch.distributed's when it is initialised, else 0 of 1)")
        if rank is None or world_size is None:
            dist = torch.distributed.is_available() and torch.distributed.is_initialized()
            rank = torch.distributed.get_rank() if dist else 0
            world_size = torch.distributed.get_world_size() if dist else 1
        rank, world_size = _integer(rank, "rank"), _integer(world_size, "world_size")
        if not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} is not in 0..{world_size - 1}")
        self.rank, self.world_size = int(rank), int(world_size)
        manifest_path = os.path.join(self.dir, "manifest.json")
        m = read_manifest(self.dir)
        self.genomes: List[Dict[str, Any]] = m.get("genomes") or []
        chrom_genome = np.array([c.get("genome", 0) if self.genomes else 0 for c in m["chromosomes"]], dtype=np.uint32)
        index, genome, where = [], [], []
        self._shards = []
        for sh in m["shards"]:
            if sh["split"] != split:
                continue
            path = os.path.join(self.dir, sh["file"])
            if verify and _sha256(path) != sh["sha256"]:
                raise InputError(f"{path}: SHA-256 differs from {manifest_path}: the file was changed or damaged "
                                 "(build the shards again)")
            try:
                h = h5py.File(path, "r")
            except OSError as e:
                raise InputError(f"{path}: cannot be read as HDF5 ({e}): the shard is damaged; build the shards "
                                 "again") from None
            with h:
                si, offsets, g = _read_shard(h, path, sh, m, chrom_genome)
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
        # Items this rank yields: all ranks the same number (None: without end).
        self.rank_items = None if self.epochs is None else self.epochs * len(self.sample_index) // self.world_size
        if self.epochs is not None and self.first_epoch + self.epochs - 1 > U64_MAX:
            raise ValueError(f"epoch {self.first_epoch} + {self.epochs} epochs passes epoch 2^64-1")
        self._files: Dict[int, Any] = {}
        self._pid = os.getpid()

    def __getstate__(self) -> Dict[str, Any]:
        state = dict(self.__dict__)
        state["_files"] = {}  # open h5py files do not pickle; each process opens its own
        return state

    def __len__(self) -> int:
        """Samples this rank yields (all workers together): (epochs x N) // R; without end
        (``epochs=None``), an epoch's share, N // R."""
        return self.per_rank if self.rank_items is None else self.rank_items

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
        return np.concatenate([[CLS], t, [SEP]]).astype(np.int64).view(ShardIds)

    def __iter__(self) -> Iterator[Dict[str, Any]]:
        info = torch.utils.data.get_worker_info()
        worker, workers = (0, 1) if info is None else (info.id, info.num_workers)
        n = len(self.sample_index)
        order_epoch, order = None, None
        j = 0
        while self.rank_items is None or j < self.rank_items:
            if (j // self.batch_size) % workers == worker:
                at = j * self.world_size + self.rank  # stream position
                epoch = self.first_epoch + at // n
                if epoch != order_epoch:
                    order_epoch, order = epoch, self.epoch_order(epoch)
                i = int(order[at % n])
                yield {"input_ids": self._tokens(i), "sample_index": int(self.sample_index[i]), "epoch": epoch,
                       "genome": int(self.sample_genome[i]), "seed": self.seed}
            j += 1
