"""GeneMask for Python: the masking of "Rethinking the Masking Strategy for Pretraining
Language Models of DNA" (GeneMask, ECAI 2023), the DNABERT-6 tokenizer, k-mer counts and
NPMI, on genemask's C++ core: the same code and the same numbers as the ``genemask`` CLI.

    >>> import genemask
    >>> tok = genemask.Tokenizer()
    >>> table = genemask.NpmiTable.load("npmi.tsv")          # from `genemask npmi`
    >>> masker = genemask.Masker("genemask", npmi=table, seed=42)
    >>> ids, attention = tok.batch(["ACGTACGTAGCTAGCTAGCATCGA", "TTTTGGGGCCCCAAAA"])
    >>> masked, labels = masker.mask(ids, attention)          # labels: -100 where not masked

``genemask.hf.DataCollatorForGeneMask`` is a ``data_collator=`` for ``transformers.Trainer``;
``genemask.ShardDataset`` reads a shard set of ``genemask shards`` (one genome or a genome
list) in ``genemask pretrain``'s order. torch and transformers are needed only by them
(and h5py by ShardDataset).
"""
from __future__ import annotations

import operator
import os
import warnings
from typing import Dict, Iterable, List, Optional, Sequence, Tuple, Union

import numpy as np

from . import _core
from ._core import InputError, NpmiTable, PmiVocab

__version__: str = _core.__version__

__all__ = [
    "__version__", "InputError", "Tokenizer", "NpmiTable", "PmiVocab", "Masker", "count_kmers", "npmi", "pmi_vocab",
    "VOCAB_SIZE", "PAD", "UNK", "CLS", "SEP", "MASK", "STRATEGIES", "ShardIds",
]  # and ShardDataset, imported on first use (it needs torch and h5py; `import *` does not)


def __getattr__(name: str):
    if name == "ShardDataset":  # imports torch: only when asked for
        from .data import ShardDataset
        return ShardDataset
    raise AttributeError(f"module 'genemask' has no attribute {name!r}")

VOCAB_SIZE: int = _core.VOCAB_SIZE
PAD: int = _core.PAD
UNK: int = _core.UNK
CLS: int = _core.CLS
SEP: int = _core.SEP
MASK: int = _core.MASK
#: The masking strategies, by the names the CLI's ``--masking`` takes.
STRATEGIES: Tuple[str, ...] = ("genemask", "random", "pmi-vocab")

PathLike = Union[str, "os.PathLike[str]"]


def _is_torch(x) -> bool:
    return type(x).__module__.startswith("torch")


def _integer(x, name: str, least: Optional[int] = None, most: Optional[int] = None) -> int:
    """x as a Python int: an int or a numpy integer (a float, even 2.0, is a TypeError: it was
    meant as something else, or would be cut), within [least, most] (ValueError)."""
    if isinstance(x, (bool, np.bool_)):
        raise TypeError(f"{name} must be an integer, got {x!r}")
    try:
        v = operator.index(x)
    except TypeError:
        raise TypeError(f"{name} must be an integer, got {x!r} ({type(x).__name__})") from None
    if (least is not None and v < least) or (most is not None and v > most):
        lo = "" if least is None else f"{least}"
        hi = "" if most is None else ("2^64-1" if most == 2**64 - 1 else f"{most}")
        raise ValueError(f"{name} must be in {lo}..{hi}, got {v}")
    return v


def _flag(x, name: str) -> bool:
    """x as a bool: True/False (numpy's too) or the ints 1 and 0."""
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    if isinstance(x, (int, np.integer)) and x in (0, 1):
        return bool(x)
    raise TypeError(f"{name} must be True or False, got {x!r}")


def _int_array(x, name: str, ndim: Optional[int] = None, allow_bool: bool = True) -> np.ndarray:
    """x as a C-contiguous int64 array; TypeError for a non-integer dtype (and for booleans
    unless ``allow_bool``: a mask may be booleans, token ids may not), ValueError for a wrong rank,
    a scalar, or an unsigned value past the int64 range (it would wrap to a negative one)."""
    if type(x) is np.ndarray and x.dtype == np.int64 and x.flags.c_contiguous and (ndim is None or x.ndim == ndim):
        return x  # the common case, at no cost
    if _is_torch(x):
        x = x.detach().cpu().numpy()
    a = np.asarray(x)
    if a.dtype == object or a.dtype.kind not in ("iub" if allow_bool else "iu"):
        if a.size == 0 and a.dtype.kind == "f":
            a = a.astype(np.int64)
        else:
            raise TypeError(f"{name} must hold integers, got dtype {a.dtype}")
    if ndim is not None and a.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-D, got shape {tuple(a.shape)}")
    if a.ndim == 0:
        raise ValueError(f"{name} must be an array (1-D or 2-D), got the scalar {a.item()!r}")
    if a.dtype == np.uint64 and a.size and a.max() > np.iinfo(np.int64).max:
        raise ValueError(f"{name} holds {int(a.max())}, past the int64 range of token ids, masks and sample indices")
    return np.ascontiguousarray(a, dtype=np.int64)


class ShardIds(np.ndarray):
    """The ``input_ids`` of a ``genemask.ShardDataset`` item: an int64 numpy array (a view of
    this class), so that ``DataCollatorForGeneMask`` can tell such an item that lost its
    ``sample_index`` and ``epoch`` (removed by ``transformers.Trainer``) from a plain example."""


class Tokenizer:
    """The DNABERT-6 tokenizer: overlapping 6-mers, ids in DNABERT's vocab.txt order
    ([PAD]=0 [UNK]=1 [CLS]=2 [SEP]=3 [MASK]=4, then the 4096 6-mers in
    itertools.product("ATCG", repeat=6) order). The same ids as ``genemask``, and as
    ``transformers.AutoTokenizer`` of a model exported by ``genemask export-hf`` on DNABERT's
    upper-case 6-mer text (``AutoTokenizer`` reads bases as one unknown word, and lower-case
    6-mers as [UNK]: give it 6-mer text, or use this tokenizer).
    A sequence is bases (A, C, G, T, N and the other IUPAC codes; lowercase is upper-cased),
    or DNABERT's 6-mer text ("ACGTAC CGTACG ...", read when it has a space), as the CLI reads
    a table's sequences; any other character (a line end, a digit, U) is a ValueError that
    names its position. A 6-mer with a base other than ACGT is [UNK]."""

    vocab_size: int = VOCAB_SIZE
    pad_token_id: int = PAD
    unk_token_id: int = UNK
    cls_token_id: int = CLS
    sep_token_id: int = SEP
    mask_token_id: int = MASK
    model_max_length: int = _core.MAX_TOKENS + 2

    def __init__(self) -> None:
        self._vocab: Optional[List[str]] = None

    def encode(self, bases: str, add_special_tokens: bool = True) -> np.ndarray:
        """int64 ids of one sequence: [CLS] 6-mers [SEP] (L bases give L-5 6-mers; L >= 6)."""
        if not isinstance(bases, str):
            raise TypeError(f"bases must be a str, got {type(bases).__name__}")
        return _core.tokenize(bases, _flag(add_special_tokens, "add_special_tokens"))

    def batch(self, seqs: Sequence[str], add_special_tokens: bool = True, max_length: Optional[int] = None,
              truncation: bool = False) -> Tuple[np.ndarray, np.ndarray]:
        """(input_ids, attention_mask), both int64 [len(seqs), L], padded with [PAD] to the
        longest row, or to max_length. A row longer than max_length is an error unless
        truncation=True (then its last tokens are dropped, [SEP] kept). truncation=True
        without max_length cuts at ``model_max_length`` (512) and pads to the longest row,
        as Hugging Face tokenizers do."""
        if isinstance(seqs, str):
            raise TypeError("batch() takes a list of sequences; use encode() for one")
        seqs = list(seqs)
        for i, s in enumerate(seqs):
            if not isinstance(s, str):
                raise TypeError(f"sequence {i} must be a str, got {type(s).__name__}")
        add_special_tokens = _flag(add_special_tokens, "add_special_tokens")
        truncation = _flag(truncation, "truncation")
        # A row holds at least one 6-mer: [CLS] [SEP] alone is no sequence's (it was returned).
        least = 3 if add_special_tokens else 1
        if max_length is not None:
            max_length = _integer(max_length, "max_length")
            if max_length < least:
                raise ValueError(f"max_length must be at least {least} ("
                                 f"{'[CLS], one 6-mer, [SEP]' if add_special_tokens else 'one 6-mer'}), got "
                                 f"{max_length}")
            if max_length >= 2**63:
                raise ValueError(f"max_length={max_length} is past any model's; pass your model's (512 for DNABERT-6 "
                                 "models)")
        elif truncation:  # Hugging Face's: cut at the model's length, pad to the longest row
            ids, att = _core.tokenize_batch(seqs, add_special_tokens, self.model_max_length, True)
            longest = int(att.sum(axis=1).max()) if att.shape[0] else 0
            return np.ascontiguousarray(ids[:, :longest]), np.ascontiguousarray(att[:, :longest])
        return _core.tokenize_batch(seqs, add_special_tokens, max_length, truncation)

    __call__ = batch

    def decode(self, ids) -> str:
        """Bases back from overlapping 6-mer ids ([CLS], [SEP], [PAD] skipped). [UNK] and [MASK]
        stand for 6-mers whose bases are not known: a base is N only where no known 6-mer covers
        it (a masked 6-mer's bases its neighbours show are shown), and every base keeps its
        position. Known 6-mers must agree on the bases they share (5 for neighbours): ids that
        do not are no sequence's, and a ValueError."""
        return _core.decode(_int_array(ids, "ids", 1, allow_bool=False))

    def convert_ids_to_tokens(self, ids: Iterable[int]) -> List[str]:
        return [_core.token_text(_integer(i, "a token id")) for i in ids]

    def get_vocab(self) -> Dict[str, int]:
        return {t: i for i, t in enumerate(self.vocab())}

    def vocab(self) -> List[str]:
        """The 4101 tokens in id order (DNABERT's vocab.txt)."""
        if self._vocab is None:
            self._vocab = _core.vocab()
        return list(self._vocab)

    def __len__(self) -> int:
        return VOCAB_SIZE

    def save_pretrained(self, save_directory: PathLike, **_ignored) -> Tuple[str, ...]:
        """Writes the vocabulary as Hugging Face's BertTokenizer reads it (vocab.txt,
        tokenizer_config.json, special_tokens_map.json), so that ``AutoTokenizer`` loads the
        directory with these ids; ``Trainer.save_model`` calls it. Returns the paths."""
        d = os.fspath(save_directory)
        os.makedirs(d, exist_ok=True)
        _core.write_hf_tokenizer(d, self.model_max_length)
        return tuple(os.path.join(d, n) for n in ("vocab.txt", "tokenizer_config.json", "special_tokens_map.json"))


def _table(value, cls, what: str):
    """None, a loaded table, or the path of one (loaded here)."""
    if value is None or isinstance(value, cls):
        return value
    if isinstance(value, (str, os.PathLike)):
        return cls.load(os.fspath(value))
    raise TypeError(f"{what} must be a{'n' if cls is NpmiTable else ''} {cls.__name__} or the path of "
                    f"{what}.tsv, got {type(value).__name__}")


class Masker:
    """One of the CLI's masking strategies (``genemask pretrain --masking``):

    - ``"genemask"``: GeneMask (needs ``npmi=``, the GRANK list of ``genemask npmi``);
    - ``"random"``: DNABERT's contiguous 6-token spans;
    - ``"pmi-vocab"``: Gene-PMI-VOC (needs ``pmi_vocab=`` from ``genemask pmi-vocab``).

    ``rate`` is the probability that a token is a masking centre (None: the paper's, 0.0176
    for genemask, 0.025 otherwise; about 15% of tokens end up masked with random and genemask,
    22% to 27% with pmi-vocab's longer units; ``genemask mask-stats`` measures it). Masked tokens become
    [MASK] 80%, a random 6-mer 10%, unchanged 10% of the time.

    The mask of a sample depends only on (seed, epoch, sample index), as in the CLI:
    ``mask(ids, attention, epoch=e, sample_index=i)`` with the seed of ``genemask pretrain
    --seed`` reproduces its masks exactly. Without ``sample_index``, rows are numbered on
    from the previous call (0, 1, 2, ...), so a run is reproducible from its seed.

    A Masker pickles (and so goes to a DataLoader's spawned workers) with its tables, seed
    and numbering.
    """

    def __init__(self, strategy: str = "genemask", npmi: Union[NpmiTable, PathLike, None] = None,
                 pmi_vocab: Union[PmiVocab, PathLike, None] = None, rate: Optional[float] = None, seed: int = 0,
                 mask_token_prob: float = 0.8, random_token_prob: float = 0.1) -> None:
        if strategy not in STRATEGIES:
            raise ValueError(f"unknown strategy {strategy!r} (expected one of: {', '.join(STRATEGIES)})")
        if rate is not None and not (0.0 < float(rate) < 1.0):
            raise ValueError(f"rate must be in (0, 1), got {rate}")
        self.seed = _integer(seed, "seed", 0, 2**64 - 1)
        self._next_index = 0
        self._args = (strategy, _table(npmi, NpmiTable, "npmi"), _table(pmi_vocab, PmiVocab, "pmi_vocab"),
                      -1.0 if rate is None else float(rate), float(mask_token_prob), float(random_token_prob))
        self._core = _core.Masker(*self._args)

    def __getstate__(self):
        return {"args": self._args, "seed": self.seed, "next_index": self._next_index}

    def __setstate__(self, state) -> None:
        self._args, self.seed, self._next_index = state["args"], state["seed"], state["next_index"]
        self._core = _core.Masker(*self._args)

    @property
    def strategy(self) -> str:
        return self._core.strategy

    @property
    def rate(self) -> float:
        """The centre probability in use."""
        return self._core.center_prob

    def mask(self, input_ids, attention_mask=None, *, epoch: int = 0, sample_index=None, seed: Optional[int] = None):
        """Masks a batch. Returns ``(input_ids, labels)``, int64, the shape of ``input_ids``
        (torch tensors when given torch tensors, else numpy arrays); labels are -100 where
        not masked. ``input_ids`` is [B, L] (or [L]); each row is [CLS] 6-mers [SEP] then
        [PAD]s (the [CLS]/[SEP] are optional). ``attention_mask`` (1 = real token, a prefix
        of the row) defaults to the tokens before the first [PAD]."""
        is_torch = _is_torch(input_ids)
        ids = _int_array(input_ids, "input_ids", allow_bool=False)
        one_row = ids.ndim == 1
        if one_row:
            ids = ids[None, :]
        if ids.ndim != 2:
            raise ValueError(f"input_ids must be 1-D or 2-D, got shape {tuple(ids.shape)}")
        rows = ids.shape[0]
        att = None
        if attention_mask is not None:
            att = _int_array(attention_mask, "attention_mask")
            if one_row and att.ndim == 1:
                att = att[None, :]
            if att.shape != ids.shape:
                raise ValueError(f"attention_mask has shape {tuple(att.shape)}, input_ids {tuple(ids.shape)}")
        if sample_index is None:
            index = np.arange(self._next_index, self._next_index + rows, dtype=np.int64)
            self._next_index += rows
        else:
            index = _int_array(sample_index, "sample_index", 1)
            if index.shape[0] != rows:
                raise ValueError(f"sample_index has {index.shape[0]} entries for {rows} rows")
        seed = self.seed if seed is None else _integer(seed, "seed", 0, 2**64 - 1)
        epoch = _integer(epoch, "epoch", 0, 2**64 - 1)
        out_ids, labels = self._core.mask(ids, att, seed, epoch, index)
        if one_row:
            out_ids, labels = out_ids[0], labels[0]
        if is_torch:
            import torch
            return torch.from_numpy(out_ids), torch.from_numpy(labels)
        return out_ids, labels


def count_kmers(fasta: PathLike, kmax: int = 6) -> Dict[int, np.ndarray]:
    """Exact counts of every k-mer, k = 1..kmax, of a FASTA file (plain, gzip or bgzip) as
    ``genemask count`` makes them: {k: uint64 array of 4^k counts}, indexed by the 2-bit
    code (A=0 C=1 G=2 T=3, first base most significant). k-mers do not cross N, the other
    IUPAC codes (U among them), ``-`` or ``*``, or record ends; lowercase counts as uppercase.
    It runs without the GIL; Ctrl-C stops it within about 0.1 s (KeyboardInterrupt)."""
    counts = _core.count_kmers(os.fspath(fasta), _integer(kmax, "kmax"))
    return {k + 1: c for k, c in enumerate(counts)}


def _count_list(counts, kneeded: int) -> List[np.ndarray]:
    if isinstance(counts, dict):
        missing = [k for k in range(1, kneeded + 1) if k not in counts]
        if missing:
            raise ValueError(f"counts lack k = {missing[0]} (need k = 1..{kneeded})")
        seq = [counts[k] for k in range(1, kneeded + 1)]
    else:
        seq = list(counts)[:kneeded]
    out = []
    for i, c in enumerate(seq):
        a = np.asarray(c)
        if a.dtype.kind not in "iu":
            raise TypeError(f"counts of k={i + 1} must hold integers, got dtype {a.dtype}")
        if a.ndim != 1:
            raise ValueError(f"counts of k={i + 1} must be 1-D, got shape {tuple(a.shape)}")
        if a.dtype.kind == "i" and a.size and a.min() < 0:
            raise ValueError(f"counts of k={i + 1} hold a negative value")
        out.append(np.ascontiguousarray(a, dtype=np.uint64))
    return out


def npmi(counts, k: int = 6, min_count: int = 101) -> NpmiTable:
    """The NPMI ranking of all k-mers (the GRANK list; ``genemask npmi``) from the counts of
    ``count_kmers`` (a dict {k: array}, or a list for k = 1, 2, ...). k-mers seen fewer
    than min_count times are ranked last and flagged; when more than half of them are, a
    UserWarning says so (the ranking says little), as the CLI does."""
    k = _integer(k, "k")
    min_count = _integer(min_count, "min_count", 2, 2**64 - 1)
    table = _core.npmi(_count_list(counts, k), k, min_count)
    below = int(table.below_min_count.sum())
    if below * 2 > len(table):
        warnings.warn(f"{below} of the {len(table)} {k}-mers are below min_count {min_count} (flagged, ranked after "
                      "the others by an NPMI of too few occurrences): the ranking says little; count a longer genome, "
                      "or lower min_count", UserWarning, stacklevel=2)
    return table


def pmi_vocab(counts, kmin: int = 2, kmax: int = 10, min_count: int = 10000, size: int = 40000) -> PmiVocab:
    """The Gene-PMI-VOC vocabulary (``genemask pmi-vocab``): the k-mers with kmin <= k <= kmax
    seen at least min_count times, ranked by PMI_k, the top ``size``."""
    kmin, kmax = _integer(kmin, "kmin"), _integer(kmax, "kmax")
    min_count = _integer(min_count, "min_count", 0, 2**64 - 1)
    size = _integer(size, "size", 1, 2**64 - 1)
    return _core.pmi_vocab(_count_list(counts, kmax), kmin, kmax, min_count, size)
