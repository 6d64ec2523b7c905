"""The query-embedding cache: a repeated search does not embed its query again."""

from __future__ import annotations

import numpy as np
import pytest

from ultron.embeddings.hashing import HashingEmbedder
from ultron.embeddings.query_cache import QueryCache


class Counting(HashingEmbedder):
    def __init__(self, *a, **kw) -> None:
        super().__init__(*a, **kw)
        self.calls = 0

    def embed_one(self, text):
        self.calls += 1
        return super().embed_one(text)


def test_a_repeated_query_is_embedded_once_and_gives_the_same_vector():
    cache, emb = QueryCache(size=8), Counting()
    a = cache.embed(emb, "worker container cannot import redis")
    b = cache.embed(emb, "worker container cannot import redis")
    assert emb.calls == 1 and np.array_equal(a, b) and (cache.hits, cache.misses) == (1, 1)
    with pytest.raises(ValueError):
        a[0] = 1.0                      # shared between callers: read-only


def test_the_cache_is_bounded_and_forgets_the_least_recently_used():
    cache, emb = QueryCache(size=2), Counting()
    cache.embed(emb, "a"), cache.embed(emb, "b"), cache.embed(emb, "a"), cache.embed(emb, "c")
    cache.embed(emb, "a")
    assert emb.calls == 3               # "b" went, "a" stayed
    cache.embed(emb, "b")
    assert emb.calls == 4


class CountingBatches(HashingEmbedder):
    def __init__(self, *a, **kw) -> None:
        super().__init__(*a, **kw)
        self.batches: list[list[str]] = []

    def embed(self, texts):
        self.batches.append(list(texts))
        return super().embed(texts)


def test_several_queries_are_embedded_in_one_batch_and_cached_ones_are_not_embedded_again():
    cache, emb = QueryCache(size=8), CountingBatches()
    single = cache.embed(emb, "redis import error")
    emb.batches.clear()
    vectors = cache.embed_many(emb, ["redis import error", "docker build fails", "flaky test", "docker build fails"])
    assert emb.batches == [["docker build fails", "flaky test"]]          # one pass, no repeats, no cached text
    assert np.array_equal(vectors[0], single) and np.array_equal(vectors[1], vectors[3])
    assert np.array_equal(vectors[2], emb.embed_one("flaky test"))
    emb.batches.clear()
    cache.embed_many(emb, ["flaky test", "docker build fails"])
    assert emb.batches == []
