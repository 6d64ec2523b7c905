"""Fault: HDBSCAN's partition depended on the order the rows were read in (random uuids),
so the same memories clustered differently from run to run and store to store."""

from __future__ import annotations

import numpy as np

from ultron.clusters import density
from ultron.embeddings.hashing import HashingEmbedder

TOPICS = ["docker compose redis worker port", "pytest fixture postgres database", "git rebase merge conflict branch",
          "kubernetes pod crash loop restart", "python import error module path", "npm install package lock version"]


def _vectors() -> np.ndarray:
    """42 short memory texts over six topics, embedded: the data that gave 5 different
    partitions in 40 row orders before clustering was made order-independent."""
    rng = np.random.default_rng(0)
    texts = []
    for i in range(42):
        words = TOPICS[i % 6].split()
        rng.shuffle(words)
        texts.append(" ".join(words[: rng.integers(2, len(words) + 1)]) + " "
                     + rng.choice(["fix", "error", "setup", "debug", "note"]))
    return HashingEmbedder(384).embed(texts).astype(np.float64)


def test_shuffled_rows_give_identical_cluster_labels():
    x = _vectors()
    reference = density.cluster_labels(x, 3)
    assert reference.max() >= 1, "the data should form several clusters"
    for seed in range(40):
        perm = np.random.default_rng(seed).permutation(len(x))
        labels = density.cluster_labels(x[perm], 3)
        back = np.empty_like(labels)
        back[perm] = labels
        assert back.tolist() == reference.tolist(), f"row order {seed} changed the clusters"


def test_shuffled_rows_give_identical_labels_on_the_pca_pipeline():
    x = _vectors()
    reference = density.cluster_labels(x, 3, exact_max=10, pca_dims=16)
    for seed in range(10):
        perm = np.random.default_rng(seed).permutation(len(x))
        labels = density.cluster_labels(x[perm], 3, exact_max=10, pca_dims=16)
        back = np.empty_like(labels)
        back[perm] = labels
        assert back.tolist() == reference.tolist(), f"row order {seed} changed the clusters"
