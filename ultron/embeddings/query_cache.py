"""Query embeddings, remembered: an agent repeats its searches (the same task text goes to
``search_memories``, ``search_skills`` and ``context_bundle`` in a row), and embedding the
query is most of a search's time (about 10 ms of MiniLM on a CPU core against a few ms of
SQL). Keyed by the embedder's vector space and the exact text, so a re-embed to another
model never reads an old vector; bounded (least recently used goes first); shared by the
threads of one process.

``functools.lru_cache`` is not used: it would key on the embedder object (kept alive
for ever) and cannot be cleared per space.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np

from ultron.embeddings.base import Embedder

DEFAULT_SIZE = 2048


class QueryCache:
    def __init__(self, size: int = DEFAULT_SIZE) -> None:
        self.size = size
        self._items: OrderedDict[tuple[str, int, str], np.ndarray] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def embed(self, embedder: Embedder, text: str) -> np.ndarray:
        """``embedder.embed_one(text)``, from the cache when this space has seen the text.
        The vector is read-only: every caller shares it."""
        key = (str(embedder.name), int(embedder.dim), text)
        with self._lock:
            vec = self._items.get(key)
            if vec is not None:
                self._items.move_to_end(key)
                self.hits += 1
                return vec
        vec = np.asarray(embedder.embed_one(text), dtype=np.float32).copy()
        vec.setflags(write=False)
        with self._lock:
            self.misses += 1
            self._items[key] = vec
            self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)
        return vec

    def embed_many(self, embedder: Embedder, texts: list[str]) -> list[np.ndarray]:
        """Each text's vector, the ones not cached embedded together in one batch (one forward
        pass of the model instead of one per text)."""
        space = (str(embedder.name), int(embedder.dim))
        out: dict[str, np.ndarray] = {}
        with self._lock:
            for text in texts:
                vec = self._items.get((*space, text))
                if vec is not None:
                    self._items.move_to_end((*space, text))
                    self.hits += 1
                    out[text] = vec
        missing = list(dict.fromkeys(t for t in texts if t not in out))
        if missing:
            vectors = np.asarray(embedder.embed(missing), dtype=np.float32)
            with self._lock:
                for text, row in zip(missing, vectors):
                    vec = row.copy()
                    vec.setflags(write=False)
                    self.misses += 1
                    self._items[(*space, text)] = vec
                    self._items.move_to_end((*space, text))
                    out[text] = vec
                while len(self._items) > self.size:
                    self._items.popitem(last=False)
        return [out[t] for t in texts]

    def clear(self) -> None:
        with self._lock:
            self._items.clear()


#: the process's cache (search, skill search and the context bundle all read it)
QUERIES = QueryCache()
