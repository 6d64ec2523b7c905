"""Counting what LLM work cost, so each run can report calls, tokens and failures, and the
store can keep them (``ultron.db.llm_usage``).

The totals are kept twice: overall, and per ``(model, task)``, where the model is the one the
client asked and the task a label the caller gives (the providers use the name of the
provider-interface method: ``summarize``, ``segment``, ...). ``fallbacks`` counts the times a
caller answered some other way because the LLM failed (``ultron.providers.fallback``).

:meth:`LLMUsage.take_unrecorded` hands out what was counted since the last take, so any
number of writers (batches, nested or in parallel threads) sharing one counter store each
count exactly once.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field, fields
from typing import Any

#: (model, task)
UsageKey = tuple[str, str]


@dataclass
class TaskUsage:
    """The counts of one (model, task)."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    failures: int = 0
    retries: int = 0
    fallbacks: int = 0

    def plus(self, other: "TaskUsage", sign: int = 1) -> "TaskUsage":
        return TaskUsage(*(getattr(self, f.name) + sign * getattr(other, f.name) for f in fields(self)))

    def is_zero(self) -> bool:
        return not any(getattr(self, f.name) for f in fields(self))

    def to_dict(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass
class LLMUsage:
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    failures: int = 0
    retries: int = 0
    errors: list[str] = field(default_factory=list)
    fallbacks: int = 0
    by_task: dict[UsageKey, TaskUsage] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)
    #: what take_unrecorded has handed out so far, per key
    _taken: dict[UsageKey, TaskUsage] = field(default_factory=dict, repr=False, compare=False)

    MAX_ERRORS = 50

    def _task(self, model: str, task: str) -> TaskUsage:
        return self.by_task.setdefault((model, task), TaskUsage())

    def record_call(self, prompt_tokens: int, completion_tokens: int, *, model: str = "", task: str = "") -> None:
        with self._lock:
            self.calls += 1
            self.prompt_tokens += prompt_tokens
            self.completion_tokens += completion_tokens
            t = self._task(model, task)
            t.calls += 1
            t.prompt_tokens += prompt_tokens
            t.completion_tokens += completion_tokens

    def record_retry(self, *, model: str = "", task: str = "") -> None:
        with self._lock:
            self.retries += 1
            self._task(model, task).retries += 1

    def record_failure(self, error: str, *, model: str = "", task: str = "") -> None:
        with self._lock:
            self.failures += 1
            self._task(model, task).failures += 1
            if len(self.errors) < self.MAX_ERRORS:
                self.errors.append(error)

    def record_fallback(self, *, model: str = "", task: str = "") -> None:
        """Another answer (the rules) stood in for the LLM's after it failed."""
        with self._lock:
            self.fallbacks += 1
            self._task(model, task).fallbacks += 1

    def snapshot(self) -> "LLMUsage":
        with self._lock:
            return LLMUsage(self.calls, self.prompt_tokens, self.completion_tokens, self.failures, self.retries,
                            list(self.errors), self.fallbacks,
                            {k: v.plus(TaskUsage()) for k, v in self.by_task.items()})

    def since(self, before: "LLMUsage") -> "LLMUsage":
        now = self.snapshot()
        by_task = {k: v.plus(before.by_task.get(k, TaskUsage()), -1) for k, v in now.by_task.items()}
        return LLMUsage(now.calls - before.calls, now.prompt_tokens - before.prompt_tokens,
                        now.completion_tokens - before.completion_tokens, now.failures - before.failures,
                        now.retries - before.retries, now.errors[len(before.errors):],
                        now.fallbacks - before.fallbacks, {k: v for k, v in by_task.items() if not v.is_zero()})

    def take_unrecorded(self) -> dict[UsageKey, TaskUsage]:
        """What was counted since the previous take, per (model, task) with anything in it,
        now marked as taken. A writer that then fails to store it calls :meth:`give_back`."""
        with self._lock:
            out = {}
            for key, now in self.by_task.items():
                delta = now.plus(self._taken.get(key, TaskUsage()), -1)
                if not delta.is_zero():
                    out[key] = delta
                    self._taken[key] = now.plus(TaskUsage())
            return out

    def give_back(self, taken: dict[UsageKey, TaskUsage]) -> None:
        """Un-take ``taken`` (from :meth:`take_unrecorded`): the next take hands it out again."""
        with self._lock:
            for key, delta in taken.items():
                self._taken[key] = self._taken.get(key, TaskUsage()).plus(delta, -1)

    def to_dict(self) -> dict[str, Any]:
        return {"calls": self.calls, "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens, "failures": self.failures,
                "retries": self.retries, "fallbacks": self.fallbacks, "errors": list(self.errors)}
