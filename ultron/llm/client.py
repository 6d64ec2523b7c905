"""The real LLM: the ``openai`` client against any OpenAI-compatible endpoint.

What this adds over a bare ``chat.completions.create``:

* retries with exponential backoff on 429, 5xx, timeouts and dropped connections
  (``ultron.llm.retry``; the client's own retries are off so the policy and its counts are ours);
* JSON output mode where the server supports it, switched off for the rest of the
  process the first time a server rejects ``response_format``;
* lenient JSON extraction and a caller-supplied validator for every answer, with one
  retry of the call when the answer is unusable;
* usage accounting (calls, tokens, retries, failures) for the run's metadata.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable, TypeVar

from ultron.llm.errors import LLMInvalidAnswer
from ultron.llm.retry import call_with_retries
from ultron.llm.jsonparse import NoJSON, parse_lenient
from ultron.llm.tokens import count_tokens
from ultron.llm.usage import LLMUsage

log = logging.getLogger("ultron.llm")
T = TypeVar("T")


class ChatJSONClient:
    def __init__(
        self,
        *,
        base_url: str | None,
        api_key: str | None,
        model: str,
        timeout_seconds: float = 60.0,
        max_retries: int = 3,
        retry_base_seconds: float = 1.0,
        usage: LLMUsage | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        import openai

        self.model = model
        self.max_retries = max_retries
        self.retry_base_seconds = retry_base_seconds
        self.usage = usage if usage is not None else LLMUsage()
        self._sleep = sleep
        self.json_mode = True
        # Local servers (vLLM, Ollama) accept any key; the client insists on one.
        self._client = openai.OpenAI(
            base_url=base_url, api_key=api_key or "not-needed", timeout=timeout_seconds, max_retries=0
        )

    def complete_json(
        self, system: str, user: str, validate: Callable[[Any], T], *, purpose: str, attempts: int = 2
    ) -> T:
        """Ask, parse and validate; an unusable answer is asked again once (``attempts`` = 2)."""
        problem = "no attempt made"
        for attempt in range(1, attempts + 1):
            text = self._chat(system, user, purpose)
            try:
                return validate(parse_lenient(text))
            except (NoJSON, ValueError, TypeError, KeyError) as exc:
                problem = f"{type(exc).__name__}: {exc}"
                self.usage.record_failure(f"{purpose}: invalid answer (attempt {attempt}): {problem}")
                log.warning("%s: invalid answer from %s (attempt %d/%d): %s", purpose, self.model, attempt, attempts, problem)
        raise LLMInvalidAnswer(f"{purpose}: {self.model} gave no valid answer in {attempts} attempts; last: {problem}")

    def _chat(self, system: str, user: str, purpose: str) -> str | None:
        messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]

        def request() -> str | None:
            kwargs: dict[str, Any] = {"model": self.model, "messages": messages, "temperature": 0}
            if self.json_mode:
                kwargs["response_format"] = {"type": "json_object"}
            response = self._client.chat.completions.create(**kwargs)
            text = response.choices[0].message.content if response.choices else None
            u = getattr(response, "usage", None)
            prompt = getattr(u, "prompt_tokens", None) or count_tokens(system) + count_tokens(user)
            completion = getattr(u, "completion_tokens", None) or count_tokens(text or "")
            self.usage.record_call(prompt, completion)
            return text

        def drop_json_mode(exc: Exception) -> bool:
            if self.json_mode and "response_format" in str(exc).lower():
                log.info("%s does not support JSON mode; continuing without it", self.model)
                self.json_mode = False
                return True
            return False

        return call_with_retries(request, purpose=purpose, model=self.model, max_retries=self.max_retries,
                                 retry_base_seconds=self.retry_base_seconds, usage=self.usage, sleep=self._sleep,
                                 drop_feature=drop_json_mode)
