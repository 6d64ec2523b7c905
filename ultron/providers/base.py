"""The provider interface: every task Ultron may hand to a model."""

from __future__ import annotations

from typing import Any, Protocol

from ultron.llm.usage import LLMUsage
from ultron.prompts.segmentation import WindowTask
from ultron.sessions.messages import Message


class LLMProvider(Protocol):
    name: str
    usage: LLMUsage

    def segment(self, window: list[Message]) -> list[WindowTask]:
        """Split a window into tasks covering 1..len(window). Raises LLMUnavailable/LLMInvalidAnswer."""

    def judge(self, messages: list[Message]) -> dict[str, Any] | None:
        """Rubric scores for one task, or None when this provider has no judge."""

    def extract_memories(self, messages: list[Message], task_type: str | None) -> list[dict[str, Any]]:
        """Memory candidates {content, context, resolution, tags, kind, tools_used, confidence}."""

    def extract_from_text(self, text: str) -> list[dict[str, Any]]:
        """Memory candidates from free text (ingest_text)."""

    def classify_memory(self, content: str, context: str, resolution: str, tags: list[str]) -> str:
        """One of MEMORY_TYPES."""

    def summarize(self, content: str, context: str, resolution: str) -> tuple[str, str]:
        """(L0 one-liner, L1 overview); the caller enforces the token limits."""

    def same_memory(self, a: dict[str, str], b: dict[str, str]) -> bool:
        """Confirm a near-duplicate in the soft similarity zone."""

    def merge_memories(self, existing: dict[str, str], incoming: dict[str, str]) -> dict[str, str]:
        """Merged {content, context, resolution}."""

    def label_cluster(self, texts: list[str]) -> str:
        """A short topic label for a cluster, from a few of its members' texts."""

    def synthesize_skill(self, topic: str, memories: list[dict[str, Any]]) -> dict[str, Any]:
        """A skill from a cluster's memories ({id, memory_type, content, context, resolution}), shaped by
        validate_skill: name, description, when_to_use, steps/pitfalls/branches citing memory ids."""
