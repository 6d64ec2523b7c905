"""Hashed linear models: token lists in, class probabilities out, in numpy.

Training (:mod:`ultron.learned.train`) uses scikit-learn; serving needs only numpy and
the weights file, so a process that extracts memories does not import scikit-learn and
loads in milliseconds. Tokens are hashed with CRC-32 (stable across processes and
Python versions, unlike ``hash()``) into ``dim`` columns with a sign bit, the same
trick as scikit-learn's ``HashingVectorizer`` with ``alternate_sign``.

Each model keeps its training vocabulary: the 32-bit hashes of the tokens seen in at least
:data:`MIN_ROWS` training rows. Any other token is dropped before it is bucketed. Without
that, a word no author ever wrote (a project's name, a random id) lands in a bucket that a
trained token also uses and borrows that token's weight, so an unknown word could
flip a decision. Tokens seen only once are one author's wording, not evidence.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np


#: a token must occur in this many training rows to be in a model's vocabulary
MIN_ROWS = 2


def token_hashes(tokens: Iterable[str]) -> np.ndarray:
    return np.fromiter((zlib.crc32(t.encode("utf-8")) for t in tokens), dtype=np.uint32)


def known(hs: np.ndarray, vocab: np.ndarray | None) -> np.ndarray:
    """The hashes in the sorted ``vocab`` (all of them when there is none)."""
    if vocab is None or not len(hs):
        return hs
    if not len(vocab):
        return hs[:0]
    at = np.minimum(np.searchsorted(vocab, hs), len(vocab) - 1)
    return hs[vocab[at] == hs]


def hash_tokens(tokens: Iterable[str], dim: int, vocab: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Column indices and signs (+1/-1) of the known ``tokens``, one pair per token."""
    hs = known(token_hashes(tokens), vocab)
    return (hs % dim).astype(np.int64), np.where(hs & 0x80000000, -1.0, 1.0).astype(np.float32)


def vocabulary(rows: Sequence[Iterable[str]], min_rows: int = MIN_ROWS) -> np.ndarray:
    """Sorted hashes of the tokens found in at least ``min_rows`` rows (training only)."""
    per_row = [np.unique(token_hashes(toks)) for toks in rows]
    if not per_row:
        return np.zeros(0, np.uint32)
    hs, counts = np.unique(np.concatenate(per_row), return_counts=True)
    return hs[counts >= min_rows].astype(np.uint32)


def sparse_rows(rows: Sequence[Iterable[str]], dim: int, vocab: np.ndarray | None = None):
    """The token lists as a scipy CSR matrix (training only), each row scaled to unit length."""
    from scipy.sparse import csr_matrix

    indptr = [0]
    cols: list[np.ndarray] = []
    vals: list[np.ndarray] = []
    for toks in rows:
        idx, sign = hash_tokens(toks, dim, vocab)
        if len(idx):
            sign = sign / np.sqrt(len(idx))
        cols.append(idx)
        vals.append(sign)
        indptr.append(indptr[-1] + len(idx))
    data = np.concatenate(vals) if vals else np.zeros(0, np.float32)
    ind = np.concatenate(cols) if cols else np.zeros(0, np.int64)
    m = csr_matrix((data, ind, np.array(indptr)), shape=(len(indptr) - 1, dim))
    m.sum_duplicates()
    return m


@dataclass
class HashedLinear:
    """``softmax(x @ weight + bias)`` over hashed tokens; ``classes`` names the columns."""

    weight: np.ndarray          # (dim, n_classes), float16 on disk
    bias: np.ndarray            # (n_classes,)
    classes: tuple[str, ...]
    vocab: np.ndarray | None = None   # sorted token hashes seen in training; None: every token counts

    @property
    def dim(self) -> int:
        return int(self.weight.shape[0])

    def logits(self, rows: Sequence[Sequence[str]]) -> np.ndarray:
        out = np.empty((len(rows), len(self.classes)), dtype=np.float32)
        for r, toks in enumerate(rows):
            idx, sign = hash_tokens(toks, self.dim, self.vocab)
            if len(idx):
                sign = sign / np.sqrt(len(idx))
                out[r] = sign @ self.weight[idx].astype(np.float32) + self.bias
            else:
                out[r] = self.bias
        return out

    def proba(self, rows: Sequence[Sequence[str]]) -> np.ndarray:
        return softmax(self.logits(rows))


def softmax(z: np.ndarray) -> np.ndarray:
    if z.shape[1] == 1:                      # a binary model keeps one column: P(positive)
        return 1.0 / (1.0 + np.exp(-z))
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)
