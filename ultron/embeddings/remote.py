"""Embeddings from any OpenAI-compatible ``/embeddings`` endpoint (DashScope, OpenAI, vLLM, Ollama).

Same failure policy as the chat client (:mod:`ultron.llm.client`): the ``openai`` client's
own retries are off; 429, 5xx, timeouts, dropped connections and garbled 200s (an HTML
page, a truncated body, something that is not an embeddings response) are retried here
with jittered exponential backoff (``Retry-After`` honoured), then :class:`LLMUnavailable`
is raised.
Every answer is checked (one vector per input, the expected dimension, finite, non-zero)
and normalised; an answer that fails the check raises :class:`LLMInvalidAnswer`.
"""

from __future__ import annotations

import base64
import logging
import threading
import time
from typing import Any, Callable

import numpy as np

from ultron.embeddings.base import check_texts
from ultron.llm.errors import LLMInvalidAnswer
from ultron.llm.retry import GarbledResponse, as_count, call_with_retries, short
from ultron.llm.usage import LLMUsage

log = logging.getLogger("ultron.embeddings")
#: Most OpenAI-compatible servers refuse "" as an input; it is sent as this instead.
EMPTY_INPUT = " "
#: Longer inputs are cut (endpoints reject inputs over ~8192 tokens; one char <= ~1 token).
MAX_INPUT_CHARS = 8000
DIM_PROBE_TEXT = "dimension probe"


class OpenAIEmbedder:
    """The ``openai`` client against an OpenAI-compatible embeddings endpoint.

    ``dim`` may be left out: it is then learned from the first answer (reading ``.dim``
    before any call sends one short probe request). When ``dim`` is given it is also sent
    as the ``dimensions`` request field (DashScope text-embedding-v3/v4 and OpenAI
    text-embedding-3 choose their output size from it); a server that rejects that field
    is asked again without it, for the rest of this embedder's life.
    """

    def __init__(
        self,
        *,
        base_url: str | None,
        api_key: str | None,
        model: str,
        dim: int | None = None,
        batch_size: int = 64,
        timeout_seconds: float = 60.0,
        max_retries: int = 3,
        retry_base_seconds: float = 1.0,
        max_input_chars: int = MAX_INPUT_CHARS,
        usage: LLMUsage | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        import openai

        if batch_size < 1:
            raise ValueError("batch_size must be positive")
        if dim is not None and dim < 1:
            raise ValueError("dim must be positive")
        self.model = model
        self.name = f"openai:{model}"
        self._dim = dim
        self._dim_lock = threading.Lock()
        self.send_dimensions = dim is not None
        self._dimensions_rejected: str | None = None
        self.batch_size = batch_size
        self.max_retries = max_retries
        self.retry_base_seconds = retry_base_seconds
        self.max_input_chars = max_input_chars
        self.usage = usage if usage is not None else LLMUsage()
        self._sleep = sleep
        self._client = openai.OpenAI(
            base_url=base_url, api_key=api_key or "not-needed", timeout=timeout_seconds, max_retries=0
        )

    def __repr__(self) -> str:
        return f"OpenAIEmbedder(model={self.model!r}, dim={self._dim}, base_url={str(self._client.base_url)!r})"

    @property
    def dim(self) -> int:
        if self._dim is None:
            self.embed([DIM_PROBE_TEXT])  # learns it (or raises)
        assert self._dim is not None
        return self._dim

    def embed(self, texts: list[str]) -> np.ndarray:
        texts = check_texts(texts)
        if not texts:
            return np.zeros((0, self._dim or 0), dtype=np.float32)
        inputs = [(t[: self.max_input_chars] if t.strip() else EMPTY_INPUT) for t in texts]
        parts = [self._embed_batch(inputs[i:i + self.batch_size]) for i in range(0, len(inputs), self.batch_size)]
        return np.concatenate(parts, axis=0)

    def embed_one(self, text: str) -> np.ndarray:
        return self.embed([text])[0]

    # -- one request, with retries --------------------------------------------------------

    def _embed_batch(self, batch: list[str]) -> np.ndarray:
        from openai.types import CreateEmbeddingResponse

        def request() -> Any:
            kwargs: dict[str, Any] = {"model": self.model, "input": batch, "encoding_format": "float"}
            if self.send_dimensions and self._dim is not None:
                kwargs["dimensions"] = self._dim
            response = self._client.embeddings.create(**kwargs)
            if not isinstance(response, CreateEmbeddingResponse):  # e.g. a str: the body was not JSON
                raise GarbledResponse(f"expected an embeddings response, got {type(response).__name__}: "
                                      f"{_clip(response)}")
            return response

        def drop_dimensions(exc: Exception) -> bool:
            if self.send_dimensions and self._dim is not None and "dimension" in str(exc).lower():
                log.info("%s does not accept dimensions=%s; continuing without it", self.model, self._dim)
                self.send_dimensions = False
                self._dimensions_rejected = short(exc)
                return True
            return False

        response = call_with_retries(request, purpose="embeddings", model=self.model, max_retries=self.max_retries,
                                     retry_base_seconds=self.retry_base_seconds, usage=self.usage,
                                     sleep=self._sleep, drop_feature=drop_dimensions, task="embed")
        u = getattr(response, "usage", None)
        self.usage.record_call(as_count(getattr(u, "prompt_tokens", 0)), 0, model=self.model, task="embed")
        try:
            return self._check(response, len(batch))
        except LLMInvalidAnswer as exc:
            self.usage.record_failure(f"embeddings: {exc}", model=self.model, task="embed")
            raise

    def _check(self, response: Any, expected: int) -> np.ndarray:
        """One finite, non-zero vector of the expected dimension per input, in input order."""
        raw = getattr(response, "data", None)
        data = list(raw) if isinstance(raw, list) else []
        if len(data) != expected:
            raise LLMInvalidAnswer(f"embeddings: {self.model} returned {len(data)} vectors for {expected} inputs")
        indices = [getattr(item, "index", None) for item in data]
        if all(isinstance(i, int) for i in indices):
            if sorted(indices) != list(range(expected)):
                raise LLMInvalidAnswer(f"embeddings: {self.model} returned indices {indices} for {expected} inputs")
            data = [item for _, item in sorted(zip(indices, data), key=lambda pair: pair[0])]
        rows = [_vector(getattr(item, "embedding", None)) for item in data]
        dims = {len(r) for r in rows}
        with self._dim_lock:
            want = self._dim if self._dim is not None else (dims.pop() if len(dims) == 1 else None)
            if want is None or any(len(r) != want for r in rows):
                hint = (f" (the server refused dimensions={self._dim}: {self._dimensions_rejected})"
                        if self._dimensions_rejected else "")
                raise LLMInvalidAnswer(
                    f"embeddings: {self.model} returned dimension(s) {sorted({len(r) for r in rows})}, "
                    f"expected {self._dim if self._dim is not None else 'one common dimension'}{hint}")
            if want < 1:
                raise LLMInvalidAnswer(f"embeddings: {self.model} returned empty vectors")
            matrix = np.vstack(rows)
            if not np.isfinite(matrix).all():
                raise LLMInvalidAnswer(f"embeddings: {self.model} returned non-finite numbers")
            norms = np.linalg.norm(matrix, axis=1, keepdims=True)
            if not (norms > 0).all():
                raise LLMInvalidAnswer(f"embeddings: {self.model} returned an all-zero vector")
            if self._dim is None:
                self._dim = want
                log.info("embeddings: %s answers with %d dimensions", self.model, want)
        return (matrix / norms).astype(np.float32)


def _vector(raw: Any) -> np.ndarray:
    """A float vector from a JSON list, or from base64 float32 if a server sent that anyway."""
    try:
        if isinstance(raw, str):
            return np.frombuffer(base64.b64decode(raw), dtype="<f4").astype(np.float64)
        if not isinstance(raw, (list, tuple)) or not all(
                isinstance(x, (int, float)) and not isinstance(x, bool) for x in raw):
            raise TypeError
        return np.asarray(raw, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise LLMInvalidAnswer(f"embeddings: an embedding is not a list of numbers: {_clip(raw)}") from exc


def _clip(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
