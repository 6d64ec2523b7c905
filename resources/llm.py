"""The LLM, as Dagster sees it: a resource that builds the configured provider."""

from typing import Optional

import dagster as dg

from ultron.providers import LLMProvider, build_provider
from ultron.settings import Settings


class LLMResource(dg.ConfigurableResource):
    """OpenAI-compatible endpoint or the offline rules provider.

    Unset fields fall back to ULTRON_LLM_* (and DASHSCOPE_API_KEY); with nothing
    configured, ``provider`` resolves to ``rules`` and no network is used.
    """

    provider: Optional[str] = None
    base_url: Optional[str] = None
    #: set from dg.EnvVar in the definitions, so the key never shows in run config or the UI
    api_key: Optional[str] = None
    model: Optional[str] = None
    quality_model: Optional[str] = None

    def apply(self, settings: Settings) -> Settings:
        overrides = {k: v for k, v in {
            "llm_provider": self.provider, "llm_base_url": self.base_url, "llm_api_key": self.api_key,
            "llm_model": self.model, "quality_llm_model": self.quality_model,
        }.items() if v is not None}
        if not overrides:
            return settings
        import dataclasses

        return dataclasses.replace(settings, **overrides)

    def get_provider(self, settings: Settings | None = None) -> LLMProvider:
        return build_provider(self.apply(settings or Settings.from_env()))
