"""What every service works with, built once per client and shared.

Services used to borrow these from each other (the cluster and skill services held a
MemoryService for its database, provider, embedder and redactor). Now the SDK builds
one context and hands it to each service; nothing is built twice and no stage reaches
into another stage's object. Collaborators are built lazily: loading MiniLM or presidio
costs seconds and many commands need neither.
"""

from __future__ import annotations

import functools
import logging
import time
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Callable, Iterator, TypeVar

from ultron.db import llm_usage as usage_store
from ultron.db import memories as memory_store
from ultron.db.database import Database
from ultron.providers import FallbackProvider, LLMProvider, build_provider
from ultron.settings import Settings

if TYPE_CHECKING:
    from ultron.embeddings import Embedder
    from ultron.redaction import Redactor

#: how often a long-running process re-reads the store's embedding profile
PROFILE_RECHECK_SECONDS = 60.0

log = logging.getLogger("ultron.context")
F = TypeVar("F", bound=Callable[..., Any])


class EmbeddingProfileMismatch(RuntimeError):
    """The store's vectors were built by another embedder; mixing spaces would corrupt search."""


class ServiceContext:
    """The database, settings, LLM provider (raw and with the rules fallback), embedder and
    redactor every service shares; ``provider``, ``embedder`` and ``redactor`` override what
    the settings would build."""

    def __init__(self, db: Database, settings: Settings, *, provider: LLMProvider | None = None,
                 embedder: "Embedder | None" = None, redactor: "Redactor | None" = None) -> None:
        self.db = db
        self.settings = settings
        self._provider = provider
        self._fallback: FallbackProvider | None = None
        self._embedder = embedder
        self._redactor = redactor
        self._profile_checked = False
        self._profile_checked_at = 0.0

    @property
    def provider(self) -> LLMProvider:
        """The configured provider; its failures propagate (LLMError)."""
        if self._provider is None:
            self._provider = build_provider(self.settings)
        return self._provider

    @property
    def fallback(self) -> FallbackProvider:
        """The configured provider with the rules as fallback (ultron.providers.fallback)."""
        if self._fallback is None:
            self._fallback = FallbackProvider(self.provider)
        return self._fallback

    # -- LLM usage in the store -------------------------------------------------------------

    def record_llm_usage(self) -> int:
        """Add what the LLM did since the last record to the store (``ultron.db.llm_usage``):
        one row per model and task, under the provider's name. Returns the rows written.

        Nothing when no provider was built, or when the rules provider did the work: it makes
        no call and has nothing to fall back from; a fallback is the rules standing in for a
        configured LLM that failed. Never raises: when the store cannot take the counts a
        warning is logged and they are kept for the next record, so a step never fails for
        its bookkeeping. Counts are taken once (``LLMUsage.take_unrecorded``), so nested or
        concurrent batches sharing the provider never store one twice."""
        provider = self._provider
        if provider is None:
            return 0
        usage = provider.usage
        taken = usage.take_unrecorded()
        if not taken:
            return 0
        rows = [{"provider": provider.name, "model": model, "task": task, **counts.to_dict()}
                for (model, task), counts in taken.items()]
        try:
            with self.db.engine.begin() as conn:
                return usage_store.add_usage(conn, rows)
        except Exception as exc:  # noqa: BLE001 - bookkeeping must not fail the work it counts
            usage.give_back(taken)
            log.warning("LLM usage not recorded (kept for the next batch): %s: %s", type(exc).__name__, exc)
            return 0

    @contextmanager
    def llm_batch(self) -> Iterator[None]:
        """Around a batch of work that may ask the LLM: its usage is recorded when the batch
        ends, also when it raises (:meth:`record_llm_usage`)."""
        try:
            yield
        finally:
            self.record_llm_usage()

    @property
    def embedder(self) -> "Embedder":
        if self._embedder is None:
            from ultron.embeddings import build_embedder

            self._embedder = build_embedder(self.settings)
        return self._embedder

    @property
    def redactor(self) -> "Redactor":
        if self._redactor is None:
            from ultron.redaction import get_redactor

            self._redactor = get_redactor()
        return self._redactor

    def check_embedding_profile(self) -> None:
        """Refuse to mix vector spaces: the first embedder to write owns the store (memories
        and skills share it)."""
        if self._profile_checked and time.monotonic() - self._profile_checked_at < PROFILE_RECHECK_SECONDS:
            return
        name, dim = self.embedder.name, self.embedder.dim
        if self._profile_checked:
            # A long-running server re-reads the profile now and then: after `ultron reembed`
            # switched the store to another embedder, it must stop writing the old vectors.
            with self.db.engine.connect() as conn:
                profile = memory_store.get_profile(conn)
            if profile == (name, dim):
                self._profile_checked_at = time.monotonic()
                return
            self._profile_checked = False
        with self.db.engine.begin() as conn:
            column = memory_store.column_dim(conn)
            if dim != column:
                raise EmbeddingProfileMismatch(
                    f"embedder {name} gives {dim}-d vectors but memory_records.embedding holds {column}-d; "
                    f"use a {column}-d embedder (for an OpenAI-compatible one, a model that accepts "
                    f"dimensions={column}, e.g. text-embedding-3-small)")
            memory_store.lock_profile(conn)
            profile = memory_store.get_profile(conn)
            if profile is None:
                memory_store.set_profile(conn, name, dim)
            elif profile != (name, dim):
                raise EmbeddingProfileMismatch(
                    f"the memory store was embedded with {profile[0]} ({profile[1]}-d) but this process uses "
                    f"{name} ({dim}-d); vector spaces are never mixed. Set ULTRON_EMBEDDING_PROVIDER/"
                    f"ULTRON_EMBEDDING_MODEL back to {profile[0]}, or start a new store (another ULTRON_HOME or "
                    f"ULTRON_DATABASE_URL) for the new embedder.")
        self._profile_checked = True
        self._profile_checked_at = time.monotonic()


def records_llm_usage(method: F) -> F:
    """For a method of a service holding its :class:`ServiceContext` as ``self.ctx``: the LLM
    work the call did is recorded in the store when it returns or raises (``ctx.llm_batch``)."""

    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        with self.ctx.llm_batch():
            return method(self, *args, **kwargs)

    return wrapper  # type: ignore[return-value]
