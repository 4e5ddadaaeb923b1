"""
genemask's C++ core: tokenizer, k-mer counts, NPMI and the masking strategies
"""

from collections.abc import Sequence
import os
from typing import Annotated

import numpy
from numpy.typing import NDArray


class InputError(ValueError):
    pass

VOCAB_SIZE: int = 4101

PAD: int = 0

UNK: int = 1

CLS: int = 2

SEP: int = 3

MASK: int = 4

FIRST_KMER_TOKEN: int = 5

MAX_TOKENS: int = 510

MAX_DENSE_K: int = 12

def vocab() -> list[str]:
    """The 4101 tokens in id order (DNABERT's vocab.txt)."""

def token_text(id: int) -> str: ...

def tokenize(bases: str, add_special_tokens: bool) -> NDArray[numpy.int64]:
    """DNABERT-6 ids of one sequence."""

def tokenize_batch(seqs: Sequence[str], add_special_tokens: bool, length: int | None, truncate: bool) -> tuple[NDArray[numpy.int64], NDArray[numpy.int64]]:
    """(ids, attention_mask) of sequences, padded with [PAD]."""

def decode(ids: Annotated[NDArray[numpy.int64], dict(shape=(None,), order='C', device='cpu', writable=False)]) -> str: ...

def write_hf_tokenizer(dir: str, model_max_length: int) -> None:
    """
    Writes vocab.txt, tokenizer_config.json and special_tokens_map.json (BertTokenizer).
    """

def kmer_to_token(code: int) -> int: ...

class NpmiTable:
    """
    The GRANK list of `genemask npmi` (npmi.tsv): all 4^k k-mers by NPMI, rank 1 highest.
    """

    @staticmethod
    def load(path: str | os.PathLike) -> NpmiTable:
        """
        Reads npmi.tsv (a str or os.PathLike); InputError (file:line, value) when malformed.
        """

    def __getstate__(self) -> tuple[str, list[tuple[int, str, int, float, float, bool]]]: ...

    def __setstate__(self, arg: tuple[str, Sequence[tuple[int, str, int, float, float, bool]]], /) -> None: ...

    @property
    def k(self) -> int:
        """k-mer length"""

    @property
    def source(self) -> str: ...

    def __len__(self) -> int: ...

    @property
    def rank(self) -> NDArray[numpy.uint64]: ...

    @property
    def kmer(self) -> list[str]: ...

    @property
    def count(self) -> NDArray[numpy.uint64]: ...

    @property
    def pmi(self) -> NDArray[numpy.float64]: ...

    @property
    def npmi(self) -> NDArray[numpy.float64]: ...

    @property
    def below_min_count(self) -> NDArray[numpy.bool_]: ...

    def grank(self) -> NDArray[numpy.uint32]:
        """
        Rank of each 6-mer by 2-bit code (A=0 C=1 G=2 T=3), what GeneMask masking uses; InputError unless k = 6.
        """

class PmiVocab:
    """
    The Gene-PMI-VOC vocabulary of `genemask pmi-vocab` (pmi_vocab.tsv), by PMI_k.
    """

    @staticmethod
    def load(path: str | os.PathLike) -> PmiVocab:
        """
        Reads pmi_vocab.tsv (a str or os.PathLike); InputError (file:line, value) when malformed.
        """

    def __getstate__(self) -> tuple[str, list[tuple[int, str, int, float]]]: ...

    def __setstate__(self, arg: tuple[str, Sequence[tuple[int, str, int, float]]], /) -> None: ...

    @property
    def source(self) -> str: ...

    def __len__(self) -> int: ...

    @property
    def rank(self) -> NDArray[numpy.uint64]: ...

    @property
    def kmer(self) -> list[str]: ...

    @property
    def k(self) -> NDArray[numpy.int64]: ...

    @property
    def count(self) -> NDArray[numpy.uint64]: ...

    @property
    def pmi(self) -> NDArray[numpy.float64]: ...

def genome_probabilities(weights: str, names: Sequence[str], bases: Sequence[int], list_weights: Sequence[float], samples: Sequence[int]) -> list[float]:
    """
    Probability of each genome under --genome-weights (bases | uniform | list | temperature:T), as `pretrain`.
    """

def epoch_permutation(n: int, seed: int, epoch: int, shuffle: bool = True) -> NDArray[numpy.uint32]:
    """The order of an epoch without genome weights, as `pretrain`."""

def weighted_epoch_order(sample_genome: Annotated[NDArray[numpy.uint32], dict(shape=(None,), order='C', device='cpu', writable=False)], probabilities: Sequence[float], seed: int, epoch: int) -> NDArray[numpy.uint32]:
    """
    The order of an epoch with genome weights (samples in sample_index order), as `pretrain`.
    """

def read_manifest(dir: str) -> dict:
    """
    DIR/manifest.json of a shard set, checked as `genemask pretrain` checks it; InputError naming the file, the field and the value.
    """

def count_kmers(path: str, kmax: int) -> list[NDArray[numpy.uint64]]:
    """Counts of k = 1..kmax (list index k-1), as `genemask count`."""

def npmi(counts: Sequence[Annotated[NDArray[numpy.uint64], dict(shape=(None,), order='C', device='cpu', writable=False)]], k: int, min_count: int) -> NpmiTable:
    """The NPMI ranking of k-mers, as `genemask npmi`."""

def pmi_vocab(counts: Sequence[Annotated[NDArray[numpy.uint64], dict(shape=(None,), order='C', device='cpu', writable=False)]], kmin: int, kmax: int, min_count: int, size: int) -> PmiVocab:
    """The PMI vocabulary, as `genemask pmi-vocab`."""

class Masker:
    """A masking strategy of genemask's core (genemask.Masker wraps it)."""

    def __init__(self, strategy: str, npmi: NpmiTable | None, pmi_vocab: PmiVocab | None, center_prob: float, mask_token_prob: float, random_token_prob: float) -> None: ...

    def mask(self, input_ids: Annotated[NDArray[numpy.int64], dict(shape=(None, None), order='C', device='cpu', writable=False)], attention_mask: Annotated[NDArray[numpy.int64], dict(shape=(None, None), order='C', device='cpu', writable=False)] | None, seed: int, epoch: int, sample_index: Annotated[NDArray[numpy.int64], dict(shape=(None,), order='C', device='cpu', writable=False)]) -> tuple[NDArray[numpy.int64], NDArray[numpy.int64]]:
        """(masked ids, labels) of int64 rows [B, L]; the GIL is released."""

    @property
    def strategy(self) -> str: ...

    @property
    def center_prob(self) -> float: ...
