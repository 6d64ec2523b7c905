"""Try the LLM; when it fails, do the task by the rules, and count it.

This is the only place that fallback is written. A service asks ``ctx.fallback`` for a
task when an answer by the rules is better than none (a memory's type and summaries, a
near-duplicate check, a rebuilt body, a skill), and asks ``ctx.provider`` directly when a
failure must stay visible (segmentation and the judge leave work pending; an upload's merge
is postponed to the next duplicate rather than done worse).
"""

from __future__ import annotations

import collections
import logging
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from ultron.llm.errors import LLMError
from ultron.llm.usage import LLMUsage
from ultron.prompts.segmentation import WindowTask
from ultron.providers.base import LLMProvider
from ultron.providers.rules import RulesProvider
from ultron.sessions.messages import Message

log = logging.getLogger("ultron.providers")
T = TypeVar("T")

#: how each task is named in the fallback log line
_TASK_NAMES = {
    "segment": "segmentation", "judge": "quality judge", "extract_memories": "memory extraction",
    "extract_from_text": "text extraction", "classify_memory": "memory type", "summarize": "summaries",
    "same_memory": "duplicate check", "merge_memories": "memory merge", "label_cluster": "cluster topic",
    "synthesize_skill": "skill synthesis",
}


@dataclass(frozen=True)
class Answer(Generic[T]):
    value: T
    by: str            # the name of the provider that answered
    fell_back: bool    # the configured provider failed and the rules answered


class FallbackProvider:
    """A provider whose every task falls back to :class:`RulesProvider` on ``LLMError``
    (an outage after retries, or an answer that failed validation). ``fallbacks`` counts
    them by task, and so does the primary's usage (``LLMUsage.record_fallback``, under the
    model that failed); with the rules configured there is nothing to fall back from and the
    rules' own errors propagate."""

    def __init__(self, primary: LLMProvider, rules: LLMProvider | None = None) -> None:
        self.primary = primary
        self.rules = rules if rules is not None else (primary if primary.name == "rules" else RulesProvider())
        self.fallbacks: collections.Counter[str] = collections.Counter()

    @property
    def name(self) -> str:
        return self.primary.name

    @property
    def usage(self) -> LLMUsage:
        return self.primary.usage

    def run(self, task: str, *args: Any) -> Answer[Any]:
        """``task`` (a method name of the provider interface) by the primary, else by the rules."""
        try:
            return Answer(getattr(self.primary, task)(*args), self.primary.name, False)
        except LLMError as exc:
            if self.rules is self.primary:
                raise
            self.count_fallback(task)
            log.warning("%s by rules (LLM unavailable or invalid: %s)", _TASK_NAMES.get(task, task), exc)
            return Answer(getattr(self.rules, task)(*args), self.rules.name, True)

    def count_fallback(self, task: str) -> None:
        """Count one ``task`` done by the rules because the primary failed: here, by task, and
        in the primary's usage under the model that failed (what ``ultron.db.llm_usage`` keeps).
        For callers that fall back on their own terms (cluster topics stop asking after an outage)."""
        self.fallbacks[task] += 1
        self.usage.record_fallback(model=_model_for(self.primary, task), task=task)

    # -- the provider interface, each task through run() ---------------------------------------

    def segment(self, window: list[Message]) -> list[WindowTask]:
        return self.run("segment", window).value

    def judge(self, messages: list[Message]) -> dict[str, Any] | None:
        return self.run("judge", messages).value

    def extract_memories(self, messages: list[Message], task_type: str | None) -> list[dict[str, Any]]:
        return self.run("extract_memories", messages, task_type).value

    def extract_from_text(self, text: str) -> list[dict[str, Any]]:
        return self.run("extract_from_text", text).value

    def classify_memory(self, content: str, context: str, resolution: str, tags: list[str]) -> str:
        return self.run("classify_memory", content, context, resolution, tags).value

    def summarize(self, content: str, context: str, resolution: str) -> tuple[str, str]:
        return self.run("summarize", content, context, resolution).value

    def same_memory(self, a: dict[str, str], b: dict[str, str]) -> bool:
        return self.run("same_memory", a, b).value

    def merge_memories(self, existing: dict[str, str], incoming: dict[str, str]) -> dict[str, str]:
        return self.run("merge_memories", existing, incoming).value

    def label_cluster(self, texts: list[str]) -> str:
        return self.run("label_cluster", texts).value

    def synthesize_skill(self, topic: str, memories: list[dict[str, Any]]) -> dict[str, Any]:
        return self.run("synthesize_skill", topic, memories).value


def _model_for(provider: LLMProvider, task: str) -> str:
    """The model ``provider`` asks for ``task`` (``OpenAIProvider.model_for``); "" for a
    provider that names none."""
    model_for = getattr(provider, "model_for", None)
    return model_for(task) if callable(model_for) else ""
