"""Choosing the embedder from :class:`ultron.settings.Settings`.

Reads the ``embedding_*`` fields with ``getattr`` defaults, so it works with a Settings
that does not (yet) declare them:

==========================  ==============================  ==========================================
field                       environment variable            default
==========================  ==============================  ==========================================
``embedding_provider``      ULTRON_EMBEDDING_PROVIDER       ``"local"`` (or ``"openai"``, ``"hash"``)
``embedding_model``         ULTRON_EMBEDDING_MODEL          openai: ``"text-embedding-v4"``
``embedding_base_url``      ULTRON_EMBEDDING_BASE_URL       ``llm_base_url``
``embedding_api_key``       ULTRON_EMBEDDING_API_KEY        ``llm_api_key``
``embedding_dim``           ULTRON_EMBEDDING_DIM            None: the model's / the first answer's (*)
``embedding_batch_size``    ULTRON_EMBEDDING_BATCH_SIZE     None: 10 for DashScope, else 64
==========================  ==============================  ==========================================

(*) A given dimension is checked against every answer, and an ``openai`` embedder also sends
it as the ``dimensions`` request field, so the endpoint must be able to produce that size.
"""

from __future__ import annotations

from typing import Any

from ultron.embeddings.base import Embedder
from ultron.llm.usage import LLMUsage
from ultron.settings import SettingsError

PROVIDERS = ("local", "openai", "hash")
DEFAULT_OPENAI_MODEL = "text-embedding-v4"
DEFAULT_BATCH_SIZE = 64
#: DashScope's text-embedding-v3/v4 accept at most 10 inputs per request.
DASHSCOPE_BATCH_SIZE = 10
LOCAL_MODEL_ALIASES = ("all-minilm-l6-v2", "sentence-transformers/all-minilm-l6-v2", "local:all-minilm-l6-v2")


def _opt(settings: Any, name: str, default: Any = None) -> Any:
    value = getattr(settings, name, default)
    if isinstance(value, str):
        value = value.strip()
    return default if value in (None, "") else value


def build_embedder(settings: Any, *, usage: LLMUsage | None = None) -> Embedder:
    """The embedder ``settings.embedding_provider`` names: ``local`` (default) | ``openai`` | ``hash``."""
    provider = str(_opt(settings, "embedding_provider", "local")).lower()
    model = _opt(settings, "embedding_model")
    dim = _opt(settings, "embedding_dim")
    dim = int(dim) if dim is not None else None
    batch_size = _opt(settings, "embedding_batch_size")

    if provider == "local":
        from ultron.embeddings.local import DIM, MODEL_NAME, LocalMiniLMEmbedder

        if model is not None and str(model).lower() not in LOCAL_MODEL_ALIASES:
            raise SettingsError(f"ULTRON_EMBEDDING_MODEL={model!r}: the local provider only has {MODEL_NAME}")
        if dim is not None and dim != DIM:
            raise SettingsError(f"ULTRON_EMBEDDING_DIM={dim}: {MODEL_NAME} has {DIM} dimensions")
        return LocalMiniLMEmbedder(batch_size=int(batch_size or DEFAULT_BATCH_SIZE))

    if provider == "hash":
        from ultron.embeddings.hashing import HashingEmbedder

        return HashingEmbedder(dim=dim or 384)

    if provider == "openai":
        from ultron.embeddings.remote import OpenAIEmbedder

        base_url = _opt(settings, "embedding_base_url") or _opt(settings, "llm_base_url")
        api_key = _opt(settings, "embedding_api_key") or _opt(settings, "llm_api_key")
        if batch_size is None:
            batch_size = DASHSCOPE_BATCH_SIZE if "dashscope" in str(base_url or "").lower() else DEFAULT_BATCH_SIZE
        return OpenAIEmbedder(
            base_url=base_url,
            api_key=api_key,
            model=str(model or DEFAULT_OPENAI_MODEL),
            dim=dim,
            batch_size=int(batch_size),
            timeout_seconds=float(_opt(settings, "llm_timeout_seconds", 60.0)),
            max_retries=int(_opt(settings, "llm_max_retries", 3)),
            retry_base_seconds=float(_opt(settings, "llm_retry_base_seconds", 1.0)),
            usage=usage,
        )

    raise SettingsError(f"ULTRON_EMBEDDING_PROVIDER={provider!r}: use one of {', '.join(PROVIDERS)}")
