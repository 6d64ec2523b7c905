"""The database, as Dagster sees it: a resource that hands out a connected Ultron client."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import dagster as dg

from ultron.sdk import Ultron
from ultron.settings import Settings


class UltronResource(dg.ConfigurableResource):
    """Ultron's Postgres (embedded unless ``database_url`` / ULTRON_DATABASE_URL is set).

    Fields left unset fall back to the ``ULTRON_*`` environment, so the same
    definitions serve `ultron dev`, tests (which pass ``home``) and deployments.
    """

    home: Optional[str] = None
    database_url: Optional[str] = None

    def settings(self) -> Settings:
        overrides: dict[str, object] = {}
        if self.home:
            overrides["home"] = Path(self.home).resolve()
        if self.database_url:
            overrides["database_url"] = self.database_url
        return Settings.from_env(**overrides)

    def client(self, llm=None) -> Ultron:
        """The SDK facade the assets call (the same services agents use), with the
        provider the ``llm`` resource configures when one is given."""
        settings = self.settings()
        provider = llm.get_provider(settings) if llm is not None else None
        return Ultron(settings, provider=provider)

    def trajectory_service(self, llm=None):
        """The trajectory service (segmentation, quality), with the provider the ``llm`` resource configures."""
        return self.client(llm).trajectory_service
