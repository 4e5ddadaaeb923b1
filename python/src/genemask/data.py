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
corpus sample, the masks' key), ``epoch``, ``genome`` (the genome's index in
``ds.genomes``; 0 for a set of one genome) and ``seed`` (the dataset's). ``DataCollatorForGeneMask``
with an integer ``seed`` masks rows that carry ``sample_index`` and ``epoch`` exactly as
``pretrain`` does with that ``--seed``, and refuses items of another ``seed``.

The shard set is checked when opened, as ``pretrain`` checks it: the manifest (complete,
its version, every field, the totals equal to the shards listed, genemask's vocabulary) and
each shard of the split (its attributes, offsets, sample indices, chromosomes and genomes
against the manifest); a shard set that was edited or damaged is an ``InputError`` naming
the file and the field.
"""
from __future__ import annotations

import hashlib
import json
import os
import stat
from typing import Any, Dict, Iterator, List, Optional

import numpy as np
import torch

from . import _core
from ._core import InputError

CLS, SEP = _core.CLS, _core.SEP


MANIFEST_FORMAT, MANIFEST_VERSION = "genemask-shards", 1
SHARD_FORMAT, SHARD_VERSION = "genemask-shard", 1
MARKER = ".genemask.json"  # the output marker of a directory genemask wrote (io/output_guard)
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


def _json_excerpt(value: Any, limit: int) -> str:
    return _excerpt(json.dumps(value), limit)


def _no_constant(name: str):
    raise ValueError(f"{name} is not JSON")


def _no_repeated_key(pairs: list) -> dict:
    """An object whose key is given twice is refused (the CLI's JSON reader, io/json.cpp, does
    the same): json.loads would keep the last value without a word."""
    out: dict = {}
    for k, v in pairs:
        if k in out:
            raise ValueError(f"the key {_excerpt(json.dumps(k), 80)} appears twice in one object: which value is "
                             "meant cannot be known; give it once")
        out[k] = v
    return out


def _loads(text: Any) -> Any:
    """genemask's JSON reading: no NaN/Infinity constants, no repeated keys."""
    return json.loads(text, parse_constant=_no_constant, object_pairs_hook=_no_repeated_key)


def _is_uint(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _check_complete(d: str) -> None:
    """A directory whose publication was cut short (its marker says "complete": false) is
    refused, as the CLI's readers do (io/output_guard check_output_complete)."""
    path = os.path.join(d, MARKER)
    try:
        with open(path, "rb") as f:
            text = f.read((1 << 20) + 1)
    except FileNotFoundError:
        return
    except OSError as e:
        raise InputError(f"{path}: cannot read ({e.strerror}): the output marker of a genemask directory") from None
    if len(text) > 1 << 20:
        raise InputError(f"{path}: is larger than 1 MiB: not a genemask output marker")
    try:
        j = _loads(text)
    except ValueError:
        j = None
    if not (isinstance(j, dict) and j.get("format") == "genemask-output" and isinstance(j.get("command"), str)
            and isinstance(j.get("complete"), bool) and isinstance(j.get("entries"), list)
            and all(isinstance(e, str) for e in j["entries"])):
        raise InputError(f"{path}: is not a genemask output marker (format genemask-output with command, complete "
                         "and entries); it was changed by hand: remove the directory's content yourself, or choose "
                         "another directory")
    for n in j["entries"]:
        if n in ("", ".", "..") or "/" in n:
            raise InputError(f"{path}: lists the entry '{_excerpt(n, 80)}', which is not a plain name in the directory")
    if not j["complete"]:
        raise InputError(f"{d}: is an incomplete output of `genemask {j['command']}` (it stopped while moving its "
                         "files into place): run that command again with --force")


class _Fields:
    """Fields of the manifest with errors that name the field and what was there, as the
    CLI's manifest reader (io/shard_manifest.cpp) words them."""

    def __init__(self, path: str) -> None:
        self.path = path

    def fail(self, field: str, what: str):
        raise InputError(f"{self.path}: {field}: {what}; the manifest is damaged or was edited: build the shards again")

    def at(self, j: Any, key: str, field: str) -> Any:
        if not isinstance(j, dict) or key not in j:
            self.fail(field, "missing")
        return j[key]

    def string(self, j: Any, key: str, field: str) -> str:
        v = self.at(j, key, field)
        if not isinstance(v, str):
            self.fail(field, f"{_json_excerpt(v, 80)} is not a string")
        return v

    def u64(self, j: Any, key: str, field: str, lo: int = 0, hi: int = U64_MAX) -> int:
        v = self.at(j, key, field)
        if not _is_uint(v) or v > U64_MAX:
            self.fail(field, f"{_json_excerpt(v, 80)} is not a non-negative integer")
        if not lo <= v <= hi:
            self.fail(field, f"{v} is outside {lo}..{hi}")
        return v

    def fraction(self, j: Any, key: str, field: str) -> float:
        v = self.at(j, key, field)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= 1:
            self.fail(field, f"{_json_excerpt(v, 80)} is not a number in [0, 1]")
        return float(v)


def _is_sha256_hex(s: str) -> bool:
    return len(s) == 64 and all(c in "0123456789abcdef" for c in s)


def read_manifest(d: str) -> Dict[str, Any]:
    """DIR/manifest.json, checked as ``genemask pretrain`` checks it (io/shard_manifest.cpp
    read_manifest): the directory's marker says complete, format and version, every field,
    each shard listed once under a plain file name that exists, and the totals (and the
    genomes' counts, and candidates - dropped_non_acgt) equal to the sums over the shards
    listed; and the vocabulary is genemask's. Errors name the file, the field and the value."""
    _check_complete(d)
    path = os.path.join(d, "manifest.json")
    if os.path.isdir(path):
        raise InputError(f"{path}: is a directory, not a file")
    try:
        with open(path, "rb") as f:
            j = _loads(f.read())
    except OSError as e:
        raise InputError(f"{path}: cannot open ({e.strerror}): is this a shard directory made by "
                         "`genemask shards`?") from None
    except ValueError as e:
        raise InputError(f"{path}: not JSON ({e}): the manifest is damaged: build the shards again") from None
    f = _Fields(path)
    fmt = j.get("format", "") if isinstance(j, dict) else ""
    if fmt != MANIFEST_FORMAT:
        raise InputError(f"{path}: format is '{_excerpt(str(fmt), 80)}', expected '{MANIFEST_FORMAT}'")
    version = f.u64(j, "format_version", "format_version")
    if version != MANIFEST_VERSION:
        raise InputError(f"{path}: format_version {version} is not supported (expected {MANIFEST_VERSION})")
    f.string(j, "source_genome", "source_genome")
    f.u64(j, "genome_bytes", "genome_bytes")
    if f.at(j, "genes", "genes") is not None:
        f.string(j, "genes", "genes")
    f.u64(j, "seed", "seed")
    f.fraction(j, "valid_fraction", "valid_fraction")
    recipe = f.at(j, "recipe", "recipe")
    f.u64(recipe, "max_offset", "recipe.max_offset", 0, 2**32 - 1)
    f.fraction(recipe, "full_prob", "recipe.full_prob")
    min_tokens = f.u64(recipe, "min_tokens", "recipe.min_tokens", 1, _core.MAX_TOKENS)
    f.u64(recipe, "max_tokens", "recipe.max_tokens", min_tokens, _core.MAX_TOKENS)
    vocab = f.string(j, "vocab_sha256", "vocab_sha256")
    if vocab != vocab_sha256():
        raise InputError(f"{path}: vocab_sha256 is '{_excerpt(vocab, 80)}', but genemask's DNABERT-6 vocabulary "
                         f"(`genemask vocab`) has SHA-256 {vocab_sha256()}: the shards hold the ids of another "
                         "vocabulary; build the shards again with this genemask")
    for key in ("candidates", "dropped_non_acgt"):
        if key in j:
            f.u64(j, key, key)
    genomes = []
    if "genomes" in j:
        gs = j["genomes"]
        if not isinstance(gs, list) or not gs:
            f.fail("genomes", "not a non-empty list")
        names = set()
        for i, g in enumerate(gs):
            at = f"genomes[{i}]"
            name = f.string(g, "name", at + ".name")
            if name in names:
                f.fail(at + ".name", f"'{_excerpt(name, 80)}' is listed twice")
            names.add(name)
            f.string(g, "path", at + ".path")
            if f.at(g, "genes", at + ".genes") is not None:
                f.string(g, "genes", at + ".genes")
            f.u64(g, "file_bytes", at + ".file_bytes")
            w = f.at(g, "weight", at + ".weight")
            if w is not None and (isinstance(w, bool) or not isinstance(w, (int, float)) or not 0 < w < float("inf")):
                f.fail(at + ".weight", f"{_json_excerpt(w, 40)} is not a positive finite number")
            f.u64(g, "records", at + ".records")
            f.u64(g, "bases", at + ".bases")
            for what in ("samples", "tokens"):
                one = f.at(g, what, f"{at}.{what}")
                for split in ("train", "valid"):
                    f.u64(one, split, f"{at}.{what}.{split}")
            genomes.append(g)
    chroms = f.at(j, "chromosomes", "chromosomes")
    if not isinstance(chroms, list):
        f.fail("chromosomes", "not a list")
    chrom_names = set()  # a name is unique within its genome
    for i, c in enumerate(chroms):
        at = f"chromosomes[{i}]"
        name = f.string(c, "name", at + ".name")
        f.u64(c, "length", at + ".length")
        genome = f.u64(c, "genome", at + ".genome", 0, len(genomes) - 1) if genomes else 0
        if (genome, name) in chrom_names:
            f.fail(at + ".name", f"'{_excerpt(name, 80)}' is listed twice")
        chrom_names.add((genome, name))
    shards = f.at(j, "shards", "shards")
    if not isinstance(shards, list):
        f.fail("shards", "not a list")
    # Each shard once, by name and by the file behind the name (a hard link); the totals are
    # the sums (a shard left out or listed twice, or a split changed, is a changed corpus).
    by_name: Dict[str, str] = {}
    by_identity: Dict[Any, str] = {}
    samples = {"train": 0, "valid": 0}
    tokens = {"train": 0, "valid": 0}
    for i, sh in enumerate(shards):
        at = f"shards[{i}]"
        name = f.string(sh, "file", at + ".file")
        split = f.string(sh, "split", at + ".split")
        digest = f.string(sh, "sha256", at + ".sha256")
        n = f.u64(sh, "samples", at + ".samples")
        t = f.u64(sh, "tokens", at + ".tokens")
        first = f.u64(sh, "first_sample", at + ".first_sample")
        last = f.u64(sh, "last_sample", at + ".last_sample")
        if name in ("", ".", "..") or "/" in name:
            f.fail(at + ".file", f"'{_excerpt(name, 80)}' is not a file name in the shard directory")
        if split not in ("train", "valid"):
            f.fail(at + ".split", f"'{_excerpt(split, 40)}' is not train or valid")
        if not _is_sha256_hex(digest):
            f.fail(at + ".sha256", f"'{_excerpt(digest, 80)}' is not a SHA-256 (64 lower-case hex digits)")
        if n > 0 and (first > last or last - first + 1 < n):
            f.fail(at, f"{n} samples cannot have sample indices {first}..{last}")
        if n > t:
            f.fail(at, f"{n} samples in {t} tokens")
        file = os.path.join(d, name)
        try:
            st = os.stat(file)
        except FileNotFoundError:
            raise InputError(f"{path}: lists {name} but the file is missing: the shard set is incomplete") from None
        except OSError as e:
            raise InputError(f"{file}: cannot be read: {e.strerror}") from None
        if not stat.S_ISREG(st.st_mode):
            raise InputError(f"{file}: is {'a directory' if stat.S_ISDIR(st.st_mode) else 'not a regular file'}, "
                             "not a shard file")
        if name in by_name:
            raise InputError(f"{path}: {by_name[name]} and {at} both list the shard {name}: each shard is listed "
                             "once (its samples would be counted twice); build the shards again")
        by_name[name] = at
        identity = (st.st_dev, st.st_ino)
        if identity in by_identity:
            raise InputError(f"{path}: lists {by_identity[identity]} and {name}, which are the same file (a link): "
                             "each shard is listed once; build the shards again")
        by_identity[identity] = name
        samples[split] += n
        tokens[split] += t
    # The shards listed must be all the set's samples: the totals, the cut's own count and the
    # genomes' counts are three records of them.
    totals = f.at(j, "totals", "totals")
    for split in ("train", "valid"):
        one = f.at(totals, split, "totals." + split)
        s_total = f.u64(one, "samples", f"totals.{split}.samples")
        t_total = f.u64(one, "tokens", f"totals.{split}.tokens")
        if (s_total, t_total) != (samples[split], tokens[split]):
            f.fail("totals." + split, f"{s_total} samples and {t_total} tokens, but the shards listed hold "
                                      f"{samples[split]} and {tokens[split]}")
        if genomes:
            gs_ = sum(g["samples"][split] for g in genomes)
            gt_ = sum(g["tokens"][split] for g in genomes)
            if (gs_, gt_) != (samples[split], tokens[split]):
                f.fail("genomes", f"their {split} samples and tokens add up to {gs_} and {gt_}, but the shards listed "
                                  f"hold {samples[split]} and {tokens[split]}")
    if "candidates" in j and "dropped_non_acgt" in j:
        cut, dropped = j["candidates"], j["dropped_non_acgt"]
        if dropped > cut or cut - dropped != samples["train"] + samples["valid"]:
            f.fail("candidates", f"{cut} segments cut, {dropped} dropped, but the shards listed hold "
                                 f"{samples['train'] + samples['valid']} samples")
    return j


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
        self.seed = int(seed)
        if not 0 <= self.seed <= U64_MAX:
            raise ValueError(f"seed must be in 0..2^64-1, got {seed}")
        self.first_epoch = int(epoch)
        if self.first_epoch < 0:
            raise ValueError(f"epoch must be >= 0, got {epoch}")
        if epochs is not None and int(epochs) < 1:
            raise ValueError(f"epochs must be None (without end) or at least 1, got {epochs}")
        self.epochs = None if epochs is None else int(epochs)
        self.batch_size = int(batch_size)
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        if (rank is None) != (world_size is None):
            raise ValueError(f"rank={rank} and world_size={world_size}: give both (this process's rank of how many) "
                             "or neither (torch.distributed's when it is initialised, else 0 of 1)")
        if rank is None or world_size is None:
            dist = torch.distributed.is_available() and torch.distributed.is_initialized()
            rank = torch.distributed.get_rank() if dist else 0
            world_size = torch.distributed.get_world_size() if dist else 1
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
                       "genome": int(self.sample_genome[i]), "seed": self.seed}
            epoch += 1
