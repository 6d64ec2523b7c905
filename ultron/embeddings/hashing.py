"""A deterministic, dependency-free embedder for fast unit tests.

Not a semantic model: it only captures shared words, word pairs and spelling. Use it
where a test needs *some* stable vector space without loading a model or a server.
"""

from __future__ import annotations

import hashlib
import re
from functools import lru_cache

import numpy as np

from ultron.embeddings.base import check_texts, normalise_rows

_WORD = re.compile(r"\w+", re.UNICODE)
#: Relative weight of each feature kind: whole words count most, spelling least.
WORD_WEIGHT, BIGRAM_WEIGHT, CHAR_WEIGHT = 1.0, 0.8, 0.4
#: Feature of a text without any word character, so every row can be normalised.
EMPTY_FEATURE = "\x00empty"


@lru_cache(maxsize=1 << 16)
def _slot(feature: str, dim: int) -> tuple[int, float]:
    """Bucket and sign of a feature: stable across processes (unlike ``hash()``)."""
    h = int.from_bytes(hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest(), "little")
    return h % dim, (1.0 if (h >> 63) & 1 else -1.0)


def features(text: str) -> list[tuple[str, float]]:
    """Word unigrams, word bigrams and character 3-grams of each ``<word>``, lower-cased."""
    words = _WORD.findall(text.lower())
    feats: list[tuple[str, float]] = [("w:" + w, WORD_WEIGHT) for w in words]
    feats += [("b:" + a + " " + b, BIGRAM_WEIGHT) for a, b in zip(words, words[1:])]
    for w in words:
        padded = f"<{w}>"
        feats += [("c:" + padded[i:i + 3], CHAR_WEIGHT) for i in range(len(padded) - 2)]
    return feats or [(EMPTY_FEATURE, 1.0)]


class HashingEmbedder:
    """Signed feature hashing of word unigrams + bigrams and char 3-grams into ``dim`` buckets.

    FOR FAST UNIT TESTS ONLY: deterministic (same text -> same vector, in every process),
    L2-normalised, and texts sharing words/spelling come out closer than unrelated ones,
    but it knows nothing about meaning (synonyms, paraphrases). Never use it for real memories.
    """

    def __init__(self, dim: int = 384) -> None:
        if dim < 1:
            raise ValueError("dim must be positive")
        self.dim = int(dim)
        self.name = f"hash:{self.dim}"

    def __repr__(self) -> str:
        return f"HashingEmbedder(dim={self.dim})"

    def embed(self, texts: list[str]) -> np.ndarray:
        texts = check_texts(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float64)
        for row, text in enumerate(texts):
            for feature, weight in features(text):
                index, sign = _slot(feature, self.dim)
                out[row, index] += sign * weight
        # Every row has at least one feature; a row can still cancel out to zero in the
        # (astronomically unlikely) case of exact collisions with opposite signs.
        zero = ~np.any(out, axis=1)
        if zero.any():
            index, sign = _slot(EMPTY_FEATURE, self.dim)
            out[zero, index] = sign
        return normalise_rows(out)

    def embed_one(self, text: str) -> np.ndarray:
        return self.embed([text])[0]
