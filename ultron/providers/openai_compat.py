"""Every task asked of an OpenAI-compatible endpoint: a prompt from ``ultron.prompts``,
sent through the ``ultron.llm`` client, its answer checked by the prompt's validator. Its
usage is counted per model and task, the task named after the interface method."""

from __future__ import annotations

from typing import Any

from ultron.llm.client import ChatJSONClient
from ultron.llm.tokens import truncate_to_tokens
from ultron.llm.usage import LLMUsage
from ultron.prompts import judge as judge_prompt
from ultron.prompts import memory as memory_prompt
from ultron.prompts import segmentation as segment_prompt
from ultron.prompts.clusters import LABEL_SYSTEM, validate_label
from ultron.prompts.render import memory_text, render_message, transcript
from ultron.prompts.skills import SKILL_SYSTEM, skill_prompt, validate_skill
from ultron.sessions.messages import Message
from ultron.settings import Settings


class OpenAIProvider:
    name = "openai"

    def __init__(self, settings: Settings, usage: LLMUsage | None = None) -> None:
        self.usage = usage if usage is not None else LLMUsage()
        self.budget = settings.segment_budget_tokens
        common = dict(
            base_url=settings.llm_base_url, api_key=settings.llm_api_key,
            timeout_seconds=settings.llm_timeout_seconds, max_retries=settings.llm_max_retries,
            retry_base_seconds=settings.llm_retry_base_seconds, usage=self.usage,
        )
        self.client = ChatJSONClient(model=settings.llm_model, **common)
        self.judge_client = (
            self.client if settings.judge_model == settings.llm_model
            else ChatJSONClient(model=settings.judge_model, **common)
        )

    def model_for(self, task: str) -> str:
        """The model that does ``task`` (a method name of the provider interface)."""
        return (self.judge_client if task == "judge" else self.client).model

    def segment(self, window: list[Message]) -> list[segment_prompt.WindowTask]:
        n = len(window)
        body = "\n".join(render_message(i, m) for i, m in enumerate(window, 1))
        return self.client.complete_json(segment_prompt.SEGMENT_SYSTEM.format(n=n), body,
                                         lambda v: segment_prompt.validate_cover(v, n), purpose="segmentation",
                                         task="segment")

    def judge(self, messages: list[Message]) -> dict[str, Any] | None:
        return self.judge_client.complete_json(judge_prompt.JUDGE_SYSTEM, transcript(messages, self.budget),
                                               judge_prompt.validate_rubric, purpose="quality judge", task="judge")

    def extract_memories(self, messages: list[Message], task_type: str | None) -> list[dict[str, Any]]:
        header = f"Task type: {task_type}\n" if task_type else ""
        return self.client.complete_json(memory_prompt.EXTRACT_SYSTEM, header + transcript(messages, self.budget),
                                         memory_prompt.validate_memories, purpose="memory extraction",
                                         task="extract_memories")

    def extract_from_text(self, text: str) -> list[dict[str, Any]]:
        return self.client.complete_json(memory_prompt.TEXT_EXTRACT_SYSTEM, truncate_to_tokens(text, self.budget),
                                         memory_prompt.validate_memories, purpose="text extraction",
                                         task="extract_from_text")

    def classify_memory(self, content: str, context: str, resolution: str, tags: list[str]) -> str:
        body = memory_text({"content": content, "context": context, "resolution": resolution}) + f"\ntags: {tags}"
        return self.client.complete_json(memory_prompt.CLASSIFY_SYSTEM, body, memory_prompt.validate_type,
                                         purpose="memory type", task="classify_memory")

    def summarize(self, content: str, context: str, resolution: str) -> tuple[str, str]:
        body = memory_text({"content": content, "context": context, "resolution": resolution})
        return self.client.complete_json(memory_prompt.SUMMARY_SYSTEM, body, memory_prompt.validate_summaries,
                                         purpose="memory summary", task="summarize")

    def same_memory(self, a: dict[str, str], b: dict[str, str]) -> bool:
        body = "A:\n" + memory_text(a) + "\n\nB:\n" + memory_text(b)
        return self.client.complete_json(memory_prompt.SAME_SYSTEM, body, memory_prompt.validate_same,
                                         purpose="duplicate check", task="same_memory")

    def merge_memories(self, existing: dict[str, str], incoming: dict[str, str]) -> dict[str, str]:
        body = "EXISTING:\n" + memory_text(existing) + "\n\nINCOMING:\n" + memory_text(incoming)
        return self.client.complete_json(memory_prompt.MERGE_SYSTEM, body, memory_prompt.validate_merged,
                                         purpose="memory merge", task="merge_memories")

    def label_cluster(self, texts: list[str]) -> str:
        body = "\n".join(f"- {t}" for t in texts)
        return self.client.complete_json(LABEL_SYSTEM, body, validate_label, purpose="cluster topic",
                                         task="label_cluster")

    def synthesize_skill(self, topic: str, memories: list[dict[str, Any]]) -> dict[str, Any]:
        body, refs = skill_prompt(topic, memories, self.budget)
        return self.client.complete_json(SKILL_SYSTEM, body, lambda v: validate_skill(v, refs),
                                         purpose="skill synthesis", task="synthesize_skill")
