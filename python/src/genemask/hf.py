"""GeneMask masking for Hugging Face ``transformers.Trainer``: a drop-in ``data_collator=``.

    from genemask.hf import DataCollatorForGeneMask
    collator = DataCollatorForGeneMask(npmi="npmi.tsv")           # GeneMask, the paper's rate
    trainer = Trainer(model=model, args=args, train_dataset=ds, data_collator=collator)

torch is imported here (and transformers is not needed at all): the rest of the package
works without either.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Dict, List, Optional, Sequence, Union

import numpy as np

from . import MASK, PAD, SEP, VOCAB_SIZE, Masker, NpmiTable, PmiVocab, ShardIds, Tokenizer, _int_array, _integer

try:
    import torch
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError("genemask.hf needs PyTorch: pip install torch (the rest of genemask works without it)") from e

__all__ = ["DataCollatorForGeneMask"]


_USE = "use genemask.Tokenizer() or the tokenizer of a model exported by `genemask export-hf`"


def _check_tokenizer(tokenizer) -> None:
    """A Hugging Face tokenizer must use the DNABERT-6 vocabulary the masker works in: the
    same special ids and the same id for every token (get_vocab())."""
    if tokenizer is None or isinstance(tokenizer, Tokenizer):
        return
    pad = getattr(tokenizer, "pad_token_id", None)
    mask = getattr(tokenizer, "mask_token_id", None)
    size = len(tokenizer) if hasattr(tokenizer, "__len__") else getattr(tokenizer, "vocab_size", None)
    if (pad, mask, size) != (PAD, MASK, VOCAB_SIZE):
        raise ValueError(
            f"the tokenizer has pad={pad}, mask={mask} and {size} tokens; GeneMask masks DNABERT-6 ids "
            f"(pad={PAD}, mask={MASK}, {VOCAB_SIZE} tokens): {_USE}")
    if getattr(tokenizer, "do_lower_case", False):
        raise ValueError("the tokenizer lower-cases its input (do_lower_case=True), so it gives every DNABERT-6 "
                         f"6-mer (upper-case) the id of [UNK]: {_USE}")
    if not callable(getattr(tokenizer, "get_vocab", None)):
        raise ValueError(f"the tokenizer ({type(tokenizer).__name__}) has no get_vocab(), so its ids cannot be "
                         f"checked against DNABERT-6's: {_USE}")
    theirs = dict(tokenizer.get_vocab())
    ours = Tokenizer().get_vocab()
    if theirs == ours:
        return
    for token, i in ours.items():  # in id order: the first difference
        if token not in theirs:
            what = f"has no token {token!r} (DNABERT-6's id {i})"
            break
        if theirs[token] != i:
            what = f"gives {token!r} the id {theirs[token]}, DNABERT-6 gives it {i}"
            break
    else:
        extra = sorted(set(theirs) - set(ours), key=lambda t: (theirs[t], t))[0]
        what = f"has the token {extra!r} (id {theirs[extra]}), which DNABERT-6 lacks"
    raise ValueError(f"the tokenizer's vocabulary is not DNABERT-6's: it {what} (another order, or lower-case "
                     f"6-mers?); GeneMask masks DNABERT-6 ids: {_USE}")


def _few(indices: List[int]) -> str:
    return ", ".join(map(str, indices[:5])) + (", ..." if len(indices) > 5 else "")


class DataCollatorForGeneMask:
    """Pads a list of examples into a batch and masks it with one of genemask's strategies.

    Examples may be dicts with ``input_ids`` (lists, numpy arrays or tensors of DNABERT-6
    ids, as ``genemask.Tokenizer`` or an exported Hugging Face tokenizer makes them, with
    [CLS]/[SEP]), optionally ``attention_mask`` (0s and 1s, 1s first; without it, the tokens
    before the first [PAD]); or DNA strings, which are tokenized here. A ``tokenizer`` given must have DNABERT-6's id for every token.
    Returns ``{"input_ids", "attention_mask", "labels"}`` as int64 torch tensors; labels are
    -100 where not masked (Hugging Face's convention).

    Randomness: with ``seed=None`` each batch's masks come from one draw of torch's global
    generator, so they follow the Trainer's ``seed``: ``Trainer`` seeds the main process, and
    the DataLoader seeds each worker differently (``base_seed + worker_id``), so no two
    workers mask alike and a run repeats exactly (the default, and the one for training).
    With an integer ``seed`` the masks depend only on (seed, DataLoader worker, the samples
    that worker collated before), not on torch: fixed masks for evaluation. Examples that
    carry ``sample_index`` and ``epoch`` (``genemask.ShardDataset``'s) are masked by
    (seed, epoch, sample_index) instead: the masks ``genemask pretrain --seed`` gives them; a
    batch that mixes such examples with others, or an example whose own ``seed`` is not the
    collator's, is an error; so is a ShardDataset item that lost those keys (``Trainer``
    removes them unless ``TrainingArguments(remove_unused_columns=False)``). DataLoader workers that are not persistent start each epoch
    afresh, so with an integer seed each epoch repeats the previous epoch's draws (on the
    epoch's own, reshuffled samples).

    ``strategy``: ``"genemask"`` (needs ``npmi``), ``"random"`` or ``"pmi-vocab"`` (needs
    ``pmi_vocab``); ``rate``: the centre probability (None: the paper's). ``max_length``
    (default 512, DNABERT's) bounds a row, [CLS] and [SEP] included: a longer example is an
    error unless ``truncation=True``. ``pad_to_multiple_of`` rounds the batch's length up.

    The collator pickles (a DataLoader's spawned workers each get a copy).
    """

    def __init__(self, tokenizer=None, npmi: Union[NpmiTable, str, None] = None,
                 pmi_vocab: Union[PmiVocab, str, None] = None, strategy: str = "genemask",
                 rate: Optional[float] = None, seed: Optional[int] = None, max_length: int = 512,
                 truncation: bool = False, pad_to_multiple_of: Optional[int] = None,
                 mask_token_prob: float = 0.8, random_token_prob: float = 0.1) -> None:
        _check_tokenizer(tokenizer)
        if max_length is None:
            raise TypeError("max_length must be an int, the most tokens of a row with [CLS] and [SEP] (512 for "
                            "DNABERT-6 models): a row longer than the model's positions fails inside it")
        max_length = _integer(max_length, "max_length")
        if seed is not None:
            seed = _integer(seed, "seed", 0, 2**64 - 1)
        if pad_to_multiple_of is not None:
            pad_to_multiple_of = _integer(pad_to_multiple_of, "pad_to_multiple_of")
        if max_length < 3:
            raise ValueError(f"max_length must be at least 3 ([CLS], one 6-mer, [SEP]), got {max_length}")
        if pad_to_multiple_of is not None and pad_to_multiple_of < 1:
            raise ValueError(f"pad_to_multiple_of must be positive, got {pad_to_multiple_of}")
        self.tokenizer = tokenizer
        self._dna = Tokenizer()
        self.masker = Masker(strategy, npmi=npmi, pmi_vocab=pmi_vocab, rate=rate, seed=0 if seed is None else seed,
                             mask_token_prob=mask_token_prob, random_token_prob=random_token_prob)
        self.seed = seed
        self.max_length = int(max_length)
        self.truncation = bool(truncation)
        self.pad_to_multiple_of = pad_to_multiple_of
        self._samples = 0  # samples collated by this process (each DataLoader worker has its own copy)

    # -- batching ---------------------------------------------------------------------
    def _rows(self, examples: Sequence[Any]) -> List[np.ndarray]:
        rows = []
        for i, ex in enumerate(examples):
            if isinstance(ex, str):
                ids = self._dna.encode(ex)
            elif isinstance(ex, Mapping):
                if "input_ids" not in ex:
                    raise ValueError(f"example {i} has no 'input_ids' (keys: {', '.join(map(str, ex.keys()))})")
                ids = _int_array(ex["input_ids"], f"example {i} input_ids", 1, allow_bool=False)
                if "attention_mask" in ex and ex["attention_mask"] is not None:
                    att = _int_array(ex["attention_mask"], f"example {i} attention_mask", 1)
                    if att.shape != ids.shape:
                        raise ValueError(f"example {i}: attention_mask has {att.shape[0]} entries, input_ids {ids.shape[0]}")
                    if att.size and (att.min() < 0 or att.max() > 1):
                        bad = int(att[(att < 0) | (att > 1)][0])
                        raise ValueError(f"example {i}: attention_mask must hold only 0 and 1; it holds {bad}")
                    if np.any(att[1:] > att[:-1]):
                        raise ValueError(f"example {i}: attention_mask is not 1s then 0s: pad on the right")
                    ids = ids[att.astype(bool)]
                else:  # the tokens before the first [PAD], as Masker.mask reads a row
                    pads = np.flatnonzero(ids == PAD)
                    if pads.size:
                        first = int(pads[0])
                        if np.any(ids[first:] != PAD):
                            after = first + int(np.flatnonzero(ids[first:] != PAD)[0])
                            raise ValueError(f"example {i}: input_ids[{first}] is [PAD] but input_ids[{after}] is not: "
                                             "without an attention_mask a row's tokens are those before its first "
                                             "[PAD]; pass the example's attention_mask")
                        ids = ids[:first]
            else:
                raise TypeError(f"example {i} must be a dict with 'input_ids' or a DNA string, got {type(ex).__name__}")
            if ids.shape[0] == 0:  # a batch of width 0, or a row of [PAD]s the model would read as a sample
                raise ValueError(f"example {i} has no tokens (empty input_ids, or an attention_mask of 0s): no sequence "
                                 "to mask")
            if ids.shape[0] > self.max_length:
                if not self.truncation:
                    raise ValueError(f"example {i} has {ids.shape[0]} tokens, more than max_length={self.max_length}; "
                                     "shorten the examples or pass truncation=True")
                # The row's first tokens, and its [SEP] where it has one: an example without
                # [CLS]/[SEP] kept its last 6-mer after the first ones, a junction of no sequence.
                ids = (np.concatenate([ids[: self.max_length - 1], ids[-1:]]) if ids[-1] == SEP
                       else ids[: self.max_length])
            rows.append(ids)
        return rows

    def _pad(self, rows: List[np.ndarray]):
        cols = max((r.shape[0] for r in rows), default=0)
        if self.pad_to_multiple_of:
            m = self.pad_to_multiple_of
            cols = (cols + m - 1) // m * m
        ids = np.full((len(rows), cols), PAD, dtype=np.int64)
        att = np.zeros((len(rows), cols), dtype=np.int64)
        for r, row in enumerate(rows):
            ids[r, : row.shape[0]] = row
            att[r, : row.shape[0]] = 1
        return ids, att

    # -- seeding ----------------------------------------------------------------------
    def _keyed(self, examples: Sequence[Any]) -> bool:
        """Whether the batch is masked by (seed, epoch, sample_index): with an integer seed, when
        every example carries both keys (none: the batch is numbered on; some: an error). An
        example's own ``seed`` (genemask.ShardDataset's) must be the collator's."""
        if self.seed is None:
            return False
        keys = []
        for i, ex in enumerate(examples):
            index = isinstance(ex, Mapping) and "sample_index" in ex
            epoch = isinstance(ex, Mapping) and "epoch" in ex
            if isinstance(ex, Mapping) and isinstance(ex.get("input_ids"), ShardIds) and not (index or epoch):
                raise ValueError(f"example {i} is a genemask.ShardDataset item without its sample_index and epoch, "
                                 "which the masks of `pretrain --seed` are keyed by: transformers' Trainer removes the "
                                 "keys its model does not take unless TrainingArguments(remove_unused_columns=False); "
                                 "pass that (or seed=None for masks of torch's generator)")
            if index != epoch:
                raise ValueError(f"example {i} carries {'sample_index' if index else 'epoch'} but not "
                                 f"{'epoch' if index else 'sample_index'}: the masks of `pretrain --seed` need both")
            if isinstance(ex, Mapping) and ex.get("seed") is not None and int(ex["seed"]) != self.seed:
                raise ValueError(f"example {i} comes with seed {int(ex['seed'])} (its dataset's), but the collator "
                                 f"masks with seed={self.seed}: give both the same seed (ShardDataset(seed=...) and "
                                 "DataCollatorForGeneMask(seed=...)), or the masks match neither's `pretrain --seed`")
            keys.append(index)
        if any(keys) and not all(keys):
            with_keys = [i for i, k in enumerate(keys) if k]
            without = [i for i, k in enumerate(keys) if not k]
            raise ValueError(f"examples {_few(with_keys)} carry sample_index and epoch, examples {_few(without)} do "
                             "not: a batch is masked by (seed, epoch, sample_index) or numbered on, not both; do not "
                             "mix examples of a genemask.ShardDataset with others in one batch")
        return all(keys)

    def _batch_seed(self):
        """(seed, epoch, first sample index) of the next batch."""
        if self.seed is None:
            return int(torch.randint(0, 2**62, (1,)).item()), 0, 0
        info = torch.utils.data.get_worker_info()
        worker = 0 if info is None else info.id + 1
        return int(self.seed), worker, None

    def __call__(self, examples: Sequence[Any]) -> Dict[str, "torch.Tensor"]:
        if len(examples) == 0:
            raise ValueError("an empty batch")
        typed = False
        for i, ex in enumerate(examples):
            if isinstance(ex, Mapping) and ex.get("token_type_ids") is not None:
                types = _int_array(ex["token_type_ids"], f"example {i} token_type_ids", 1)
                if types.size and types.any():
                    raise ValueError(f"example {i}: token_type_ids holds {int(types[types != 0][0])}: a sentence pair, "
                                     "which masked-language pretraining of one sequence does not take")
                typed = True
        out = self._collate(examples)
        # Examples that carry token types (a tokenizer's output) get them back padded, as
        # transformers' collator returns them: all 0.
        if typed:
            out["token_type_ids"] = torch.zeros_like(out["input_ids"])
        return out

    def _collate(self, examples: Sequence[Any]) -> Dict[str, "torch.Tensor"]:
        ids, att = self._pad(self._rows(examples))
        keyed = self._keyed(examples)
        if keyed:  # genemask.ShardDataset's items: the masks of `pretrain --seed` for these samples
            index = np.array([int(ex["sample_index"]) for ex in examples], dtype=np.int64)
            epochs = np.array([int(ex["epoch"]) for ex in examples], dtype=np.int64)
            masked, labels = np.empty_like(ids), np.empty_like(ids)
            for e in np.unique(epochs):
                rows = np.nonzero(epochs == e)[0]
                m, lab = self.masker.mask(ids[rows], att[rows], epoch=int(e), sample_index=index[rows], seed=int(self.seed))
                masked[rows], labels[rows] = m, lab
            return {"input_ids": torch.from_numpy(masked), "attention_mask": torch.from_numpy(att),
                    "labels": torch.from_numpy(labels)}
        seed, epoch, first = self._batch_seed()
        if first is None:  # a fixed seed: the samples are numbered on within this process
            first = self._samples
        index = np.arange(first, first + ids.shape[0], dtype=np.int64)
        self._samples += ids.shape[0]
        masked, labels = self.masker.mask(ids, att, epoch=epoch, sample_index=index, seed=seed)
        return {"input_ids": torch.from_numpy(masked), "attention_mask": torch.from_numpy(att),
                "labels": torch.from_numpy(labels)}
