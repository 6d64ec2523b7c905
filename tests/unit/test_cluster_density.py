"""HDBSCAN on embeddings: the edge cases of a real store and both pipelines."""

import math

import numpy as np
import pytest

from ultron.clusters import density


def blobs(n_per: int, k: int, dim: int = 384, spread: float = 0.6, seed: int = 3) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    centres = rng.normal(0, 1, (k, dim))
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    truth = np.repeat(np.arange(k), n_per)
    x = centres[truth] + rng.normal(0, spread / math.sqrt(dim), (len(truth), dim))
    return x.astype(np.float32), truth


def same_partition(labels: np.ndarray, truth: np.ndarray) -> bool:
    pairs = {(int(a), int(b)) for a, b in zip(labels, truth)}
    return len(pairs) == len({a for a, _ in pairs}) == len({b for _, b in pairs})


@pytest.mark.parametrize("n", [0, 1, 2])
def test_fewer_rows_than_a_cluster_are_noise(n):
    x = np.ones((n, 384), dtype=np.float32)
    assert density.cluster_labels(x, 3).tolist() == [-1] * n


def test_identical_vectors_are_one_cluster():
    x = np.tile(np.arange(1, 385, dtype=np.float32), (5, 1))
    assert density.cluster_labels(x, 3).tolist() == [0] * 5


def test_two_groups_of_duplicates():
    a, b = np.zeros(384), np.zeros(384)
    a[0], b[1] = 1, 1
    x = np.vstack([np.tile(a, (4, 1)), np.tile(b, (4, 1))])
    labels = density.cluster_labels(x, 3)
    assert same_partition(labels, np.array([0] * 4 + [1] * 4))


def test_zero_rows_do_not_crash():
    x, _ = blobs(4, 2)
    x = np.vstack([x, np.zeros((1, 384), dtype=np.float32)])
    assert len(density.cluster_labels(x, 3)) == 9


def test_separate_topics_are_found_exactly():
    x, truth = blobs(6, 4)
    labels = density.cluster_labels(x, 3)
    assert labels.max() == 3 and same_partition(labels, truth)


def test_one_topic_is_one_cluster_not_all_noise():
    x, _ = blobs(6, 1)
    labels = density.cluster_labels(x, 3)
    assert labels.tolist() == [0] * 6
    unrelated = np.random.default_rng(1).normal(0, 1, (10, 384))
    assert density.cluster_labels(unrelated, 3).max() == -1  # no topic at all: all noise


def test_scale_does_not_matter_cosine_does():
    x, truth = blobs(5, 3)
    scaled = x * np.array([[0.1], [7.0], [1.0], [300.0], [2.0]] * 3, dtype=np.float32)
    assert same_partition(density.cluster_labels(scaled, 3), truth)


def test_the_reduced_pipeline_finds_the_same_topics():
    x, truth = blobs(8, 12, seed=5)
    labels = density.cluster_labels(x, 3, exact_max=10, pca_dims=32)
    assert same_partition(labels, truth)
    assert density.pipeline_for(density.EXACT_MAX).startswith("exact")
    assert density.pipeline_for(density.EXACT_MAX + 1).startswith("pca")


def test_labels_are_deterministic():
    x, _ = blobs(6, 5)
    assert density.cluster_labels(x, 3, exact_max=10).tolist() == density.cluster_labels(x, 3, exact_max=10).tolist()


def test_centroid_is_the_unit_mean_direction():
    c = density.centroid(np.array([[2.0, 0.0], [0.0, 5.0]]))
    assert np.allclose(c, [math.sqrt(0.5), math.sqrt(0.5)], atol=1e-6)


def test_bad_shape_is_a_clear_error():
    with pytest.raises(ValueError, match="2-d"):
        density.cluster_labels(np.ones(384), 3)
