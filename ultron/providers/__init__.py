"""LLM tasks behind one interface, with a real and an offline implementation.

``OpenAIProvider`` asks a model (``ultron.llm`` transport + ``ultron.prompts``);
``RulesProvider`` does the same tasks with the offline algorithms of
``ultron.heuristics``, so the whole pipeline runs (and is tested) with no key.
``FallbackProvider`` is the one place a failed LLM task falls back to the rules.
``build_provider(settings)`` picks one: ``ULTRON_LLM_PROVIDER=rules|openai|auto``.
"""

from __future__ import annotations

from ultron.llm.usage import LLMUsage
from ultron.providers.base import LLMProvider
from ultron.providers.fallback import Answer, FallbackProvider
from ultron.providers.openai_compat import OpenAIProvider
from ultron.providers.rules import RulesProvider
from ultron.settings import Settings

__all__ = ["Answer", "FallbackProvider", "LLMProvider", "OpenAIProvider", "RulesProvider", "build_provider"]


def build_provider(settings: Settings, usage: LLMUsage | None = None) -> LLMProvider:
    if settings.resolved_llm_provider == "openai":
        return OpenAIProvider(settings, usage)
    return RulesProvider(settings, usage)
