"""The embedder interface shared by the local model, remote endpoints and the test hasher."""

from __future__ import annotations

from typing import Any, Protocol, Sequence, runtime_checkable

import numpy as np


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalised float32 vectors of one fixed vector space.

    ``name`` identifies the vector space (``"local:all-MiniLM-L6-v2"``,
    ``"openai:text-embedding-v4"``, ``"hash:384"``); together with ``dim`` it forms the
    :func:`profile` stored next to the vectors, so vectors of different spaces are never mixed.
    """

    name: str
    dim: int

    def embed(self, texts: list[str]) -> np.ndarray:
        """Shape ``(len(texts), dim)``, float32, unit-length rows, in input order."""
        ...

    def embed_one(self, text: str) -> np.ndarray:
        """Shape ``(dim,)``."""
        ...


def profile(embedder: Embedder) -> dict[str, Any]:
    """The embedding profile stored in the database: vectors are comparable only within one."""
    return {"name": str(embedder.name), "dim": int(embedder.dim)}


def check_texts(texts: Sequence[str]) -> list[str]:
    """Accept any sequence of str (a bare str is refused: it would embed each character)."""
    if isinstance(texts, (str, bytes)):
        raise TypeError("embed() takes a list of texts; use embed_one() for a single text")
    out = list(texts)
    for i, t in enumerate(out):
        if not isinstance(t, str):
            raise TypeError(f"text {i} is {type(t).__name__}, not str")
    return out


def normalise_rows(matrix: np.ndarray) -> np.ndarray:
    """float32 copy with unit-length rows; all-zero rows stay zero (callers avoid producing them)."""
    m = np.asarray(matrix, dtype=np.float64)
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    return (m / np.where(norms > 0, norms, 1.0)).astype(np.float32)
