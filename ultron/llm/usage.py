"""Counting what LLM work cost, so each run can report calls, tokens and failures."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any


@dataclass
class LLMUsage:
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    failures: int = 0
    retries: int = 0
    errors: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    MAX_ERRORS = 50

    def record_call(self, prompt_tokens: int, completion_tokens: int) -> None:
        with self._lock:
            self.calls += 1
            self.prompt_tokens += prompt_tokens
            self.completion_tokens += completion_tokens

    def record_retry(self) -> None:
        with self._lock:
            self.retries += 1

    def record_failure(self, error: str) -> None:
        with self._lock:
            self.failures += 1
            if len(self.errors) < self.MAX_ERRORS:
                self.errors.append(error)

    def snapshot(self) -> "LLMUsage":
        with self._lock:
            return LLMUsage(self.calls, self.prompt_tokens, self.completion_tokens, self.failures,
                            self.retries, list(self.errors))

    def since(self, before: "LLMUsage") -> "LLMUsage":
        now = self.snapshot()
        return LLMUsage(now.calls - before.calls, now.prompt_tokens - before.prompt_tokens,
                        now.completion_tokens - before.completion_tokens, now.failures - before.failures,
                        now.retries - before.retries, now.errors[len(before.errors):])

    def to_dict(self) -> dict[str, Any]:
        return {"calls": self.calls, "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens, "failures": self.failures,
                "retries": self.retries, "errors": list(self.errors)}
