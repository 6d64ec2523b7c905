"""The offline provider: every task done without a model server, by the deterministic
algorithms of ``ultron.heuristics`` and, for memories from sessions, the learned lesson
model of ``ultron.learned`` (weights shipped in the package), its answer passed through
the same validators as a model's, so downstream code cannot tell the two apart. It has no judge: the deterministic quality
signals stand alone."""

from __future__ import annotations

from typing import Any

from ultron.heuristics import classify, extract, merge, segmenter, skill_synthesis, summarize, topics
from ultron.learned import lessons
from ultron.llm.usage import LLMUsage
from ultron.prompts.memory import validate_memories, validate_merged, validate_type
from ultron.prompts.segmentation import WindowTask, validate_cover
from ultron.prompts.skills import validate_skill
from ultron.sessions.messages import Message
from ultron.settings import Settings


class RulesProvider:
    name = "rules"

    def __init__(self, settings: Settings | None = None, usage: LLMUsage | None = None) -> None:
        self.usage = usage if usage is not None else LLMUsage()

    def segment(self, window: list[Message]) -> list[WindowTask]:
        tasks = [{"start": s, "end": e, "topic": t} for s, e, t in segmenter.segment_window(window)]
        return validate_cover({"tasks": tasks}, len(window))

    def judge(self, messages: list[Message]) -> dict[str, Any] | None:
        return None

    def extract_memories(self, messages: list[Message], task_type: str | None) -> list[dict[str, Any]]:
        """The learned lesson model decides (:mod:`ultron.learned.lessons`)."""
        return validate_memories({"memories": lessons.extract(messages, task_type)})

    def extract_from_text(self, text: str) -> list[dict[str, Any]]:
        return validate_memories({"memories": extract.extract_from_text(text)})

    def classify_memory(self, content: str, context: str, resolution: str, tags: list[str]) -> str:
        return validate_type(classify.classify_memory_type(content, context, resolution, tags))

    def summarize(self, content: str, context: str, resolution: str) -> tuple[str, str]:
        return (summarize.summarize_l0(content, context, resolution),
                summarize.overview_l1(content, context, resolution))

    def same_memory(self, a: dict[str, str], b: dict[str, str]) -> bool:
        return merge.is_same_memory(a, b)

    def merge_memories(self, existing: dict[str, str], incoming: dict[str, str]) -> dict[str, str]:
        return validate_merged(merge.merge_bodies(existing, incoming))

    def label_cluster(self, texts: list[str]) -> str:
        return topics.label_from_texts(texts)

    def synthesize_skill(self, topic: str, memories: list[dict[str, Any]]) -> dict[str, Any]:
        return validate_skill(skill_synthesis.synthesize(topic, memories), allow_no_steps=True)
