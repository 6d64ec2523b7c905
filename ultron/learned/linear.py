"""Hashed linear models: token lists in, class probabilities out, in numpy.

Training (:mod:`ultron.learned.train`) uses scikit-learn; serving needs only numpy and
the weights file, so a process that extracts memories does not import scikit-learn and
loads in milliseconds. Tokens are hashed with CRC-32 (stable across processes and
Python versions, unlike ``hash()``) into ``dim`` columns with a sign bit, the same
trick as scikit-learn's ``HashingVectorizer`` with ``alternate_sign``.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np


def hash_tokens(tokens: Iterable[str], dim: int) -> tuple[np.ndarray, np.ndarray]:
    """Column indices and signs (+1/-1) of ``tokens``, one pair per token."""
    hs = np.fromiter((zlib.crc32(t.encode("utf-8")) for t in tokens), dtype=np.uint32)
    return (hs % dim).astype(np.int64), np.where(hs & 0x80000000, -1.0, 1.0).astype(np.float32)


def sparse_rows(rows: Sequence[Iterable[str]], dim: int):
    """The token lists as a scipy CSR matrix (training only), each row scaled to unit length."""
    from scipy.sparse import csr_matrix

    indptr = [0]
    cols: list[np.ndarray] = []
    vals: list[np.ndarray] = []
    for toks in rows:
        idx, sign = hash_tokens(toks, dim)
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

    @property
    def dim(self) -> int:
        return int(self.weight.shape[0])

    def logits(self, rows: Sequence[Sequence[str]]) -> np.ndarray:
        out = np.empty((len(rows), len(self.classes)), dtype=np.float32)
        for r, toks in enumerate(rows):
            idx, sign = hash_tokens(toks, self.dim)
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
