"""Density clustering of memory embeddings with HDBSCAN, sized to the store.

Embeddings are unit-normalised first, so Euclidean distance orders pairs exactly as
cosine distance does (``|a - b|² = 2 - 2 cos``) and HDBSCAN's fast Euclidean trees apply.

Two pipelines, chosen by the number of vectors (measured in ``benchmarks/clustering.py``):

* up to :data:`EXACT_MAX` vectors: HDBSCAN's ``generic`` algorithm on the raw 384-d
  vectors. It builds the dense pairwise matrix with BLAS, which at this size is both the
  fastest path and exact; its memory (about 18·n² bytes) is what caps it.
* above that: PCA down to :data:`PCA_DIMS` dimensions, then HDBSCAN's Prim KD-tree
  algorithm (what HDBSCAN itself picks above 60 dimensions; its Borůvka KD-tree is
  three times slower here). Raw 384-d vectors defeat the tree (every query visits most
  leaves); 128 dimensions keep the clusters that matter (size >= 5) at a fraction of the
  cost. At 64 or 96 dimensions it is faster still but loses small clusters to noise.
  Measured on 2 cores: 5,000 memories 0.6 s exact vs 7.4 s for plain HDBSCAN on raw
  vectors; 20,000 memories 42 s vs 143 s, recovering 99.3% vs 99.8% of the topics.

HDBSCAN finds clusters as dense regions *against a sparser background*; a small store
about one topic has no background, and HDBSCAN calls it all noise (asked to allow a
single cluster, it keeps an arbitrary dense core of three). So when it finds nothing,
the store gets one cluster of the memories whose cosine to their common centre reaches
the threshold that admits an upload to a cluster between runs, if there are enough of them.
"""

from __future__ import annotations

import hashlib
import warnings

import numpy as np

#: Largest store clustered exactly on raw vectors (dense matrix about 650 MB at 6,000).
EXACT_MAX = 6000
#: Dimensions kept by PCA for larger stores.
PCA_DIMS = 128
#: Rows whose spread is below this are one point (identical memories).
IDENTICAL_SPREAD = 1e-6
NOISE = -1


def normalise(vectors: np.ndarray) -> np.ndarray:
    """float64 unit rows; a zero row stays zero (it ends up as noise, never a crash)."""
    m = np.asarray(vectors, dtype=np.float64)
    if m.ndim != 2:
        raise ValueError(f"expected a 2-d array of embeddings, got shape {m.shape}")
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    return m / np.where(norms > 0, norms, 1.0)


def centroid(vectors: np.ndarray) -> np.ndarray:
    """Normalised mean direction of unit vectors (the cosine centre of a cluster)."""
    mean = normalise(vectors).mean(axis=0)
    norm = np.linalg.norm(mean)
    return (mean / norm if norm > 0 else mean).astype(np.float32)


def pipeline_for(n: int) -> str:
    """Which pipeline :func:`cluster_labels` uses for ``n`` vectors (reported in run metadata)."""
    return "exact (generic, raw 384-d)" if n <= EXACT_MAX else f"pca{PCA_DIMS} + prims_kdtree"


def reduce_dims(x: np.ndarray, dims: int = PCA_DIMS) -> np.ndarray:
    """PCA to ``dims`` (deterministic: fixed random_state), then unit rows again."""
    from sklearn.decomposition import PCA

    keep = min(dims, x.shape[1], x.shape[0] - 1)
    if keep >= x.shape[1]:
        return x
    return normalise(PCA(keep, svd_solver="randomized", random_state=0).fit_transform(x))


def cluster_labels(vectors: np.ndarray, min_cluster_size: int, min_samples: int | None = None, *,
                   single_topic_cosine: float = 0.75, exact_max: int = EXACT_MAX,
                   pca_dims: int = PCA_DIMS) -> np.ndarray:
    """One label per row (``-1`` = noise), labels numbered 0..k-1.

    Handles the edge cases a real store has: fewer rows than a cluster needs (all
    noise), all rows identical (one cluster), and a store about one topic (one cluster
    of the rows within ``single_topic_cosine`` of its centre, see the module docstring).

    The result does not depend on the row order: HDBSCAN's does (ties in its spanning
    tree, label numbering), so the rows are clustered in a canonical order of their own
    values and the labels mapped back."""
    x = normalise(vectors)
    order = canonical_order(x)
    labels = np.empty(len(x), dtype=np.int64)
    labels[order] = _cluster_sorted(x[order], min_cluster_size, min_samples, single_topic_cosine, exact_max,
                                    pca_dims)
    return labels


def canonical_order(x: np.ndarray) -> np.ndarray:
    """Row indices sorted by the rows' values (a hash of their bytes, then the bytes): the
    same set of vectors gets the same order whatever order it came in. Equal rows are
    interchangeable, so their relative order does not matter."""
    rows = np.ascontiguousarray(x)
    keys = [(hashlib.blake2b(r.tobytes(), digest_size=8).digest(), r.tobytes()) for r in rows]
    return np.array(sorted(range(len(keys)), key=keys.__getitem__), dtype=np.int64)


def _cluster_sorted(x: np.ndarray, min_cluster_size: int, min_samples: int | None, single_topic_cosine: float,
                    exact_max: int, pca_dims: int) -> np.ndarray:
    n = len(x)
    min_cluster_size = max(2, int(min_cluster_size))
    if n < min_cluster_size:
        return np.full(n, NOISE, dtype=np.int64)
    if float(np.ptp(x, axis=0).max()) < IDENTICAL_SPREAD:
        return np.zeros(n, dtype=np.int64)
    samples = max(1, min(int(min_samples or min_cluster_size), n - 1))
    if n <= exact_max:
        data, algorithm = x, "generic"
    else:
        data, algorithm = reduce_dims(x, pca_dims), "prims_kdtree"
    labels = _hdbscan(data, min_cluster_size, samples, algorithm)
    if labels.max(initial=NOISE) == NOISE:
        labels = single_topic(x, single_topic_cosine, min_cluster_size)
    return labels


def single_topic(x: np.ndarray, cosine: float, min_cluster_size: int) -> np.ndarray:
    """One cluster of the rows within ``cosine`` of their centre (centre refined once), or all noise.

    The search starts from the densest small group (the row whose ``min_cluster_size - 1``
    nearest rows are closest, with them), not from the centre of everything: a small store of one topic plus
    a few unrelated memories would otherwise have its centre pulled away by them."""
    labels = np.full(len(x), NOISE, dtype=np.int64)
    if len(x) < min_cluster_size:
        return labels
    sims = x @ x.T
    k = min_cluster_size - 1
    nearest = np.sort(sims, axis=1)[:, ::-1][:, 1:k + 1]      # each row's k closest others
    seed = int(np.argmax(nearest.sum(axis=1)))
    inside = np.zeros(len(x), dtype=bool)
    inside[np.argsort(-sims[seed], kind="stable")[:k + 1]] = True
    # grow the group one row at a time (the closest to its centre) while every member stays
    # within ``cosine`` of the centre: a group of loosely similar memories has a tight centre
    centre = centroid(x[inside]).astype(np.float64)
    while not inside.all():
        closest = int(np.argmax(np.where(inside, -np.inf, x @ centre)))
        trial = inside.copy()
        trial[closest] = True
        trial_centre = centroid(x[trial]).astype(np.float64)
        if (x[trial] @ trial_centre).min() < cosine:
            break
        inside, centre = trial, trial_centre
    inside &= x @ centre >= cosine
    if inside.sum() >= min_cluster_size:
        labels[inside] = 0
    return labels


def _hdbscan(data: np.ndarray, min_cluster_size: int, min_samples: int, algorithm: str) -> np.ndarray:
    import hdbscan

    with warnings.catch_warnings():
        # duplicate rows give zero distances (infinite density); HDBSCAN copes but warns
        warnings.simplefilter("ignore", RuntimeWarning)
        model = hdbscan.HDBSCAN(min_cluster_size=min_cluster_size, min_samples=min_samples,
                                algorithm=algorithm, core_dist_n_jobs=1)
        return np.asarray(model.fit_predict(data), dtype=np.int64)
