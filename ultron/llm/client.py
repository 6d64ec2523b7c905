"""The real LLM: the ``openai`` client against any OpenAI-compatible endpoint.

What this adds over a bare ``chat.completions.create``:

* retries with exponential backoff on 429, 5xx, timeouts and dropped connections
  (the client's own retries are off so the policy and its counts are ours);
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

from ultron.llm.errors import LLMInvalidAnswer, LLMUnavailable
from ultron.llm.jsonparse import NoJSON, parse_lenient
from ultron.llm.tokens import count_tokens
from ultron.llm.usage import LLMUsage

log = logging.getLogger("ultron.llm")
T = TypeVar("T")
RETRY_AFTER_CAP_SECONDS = 30.0


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

        self._openai = openai
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
        openai = self._openai
        messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        delay = self.retry_base_seconds
        last = "no request sent"
        attempt = 0
        while attempt <= self.max_retries:
            kwargs: dict[str, Any] = {"model": self.model, "messages": messages, "temperature": 0}
            if self.json_mode:
                kwargs["response_format"] = {"type": "json_object"}
            try:
                response = self._client.chat.completions.create(**kwargs)
            except openai.BadRequestError as exc:
                if self.json_mode and "response_format" in str(exc).lower():
                    log.info("%s does not support JSON mode; continuing without it", self.model)
                    self.json_mode = False
                    continue  # not a retry: the same request, minus response_format
                last = f"request rejected (400): {_short(exc)}"
                break
            except (openai.RateLimitError, openai.InternalServerError, openai.APITimeoutError,
                    openai.APIConnectionError) as exc:
                last = _describe(exc)
                wait = _retry_after(exc, delay)
            except openai.APIStatusError as exc:
                if exc.status_code >= 500 or exc.status_code == 429:
                    last = _describe(exc)
                    wait = _retry_after(exc, delay)
                else:
                    last = f"HTTP {exc.status_code}: {_short(exc)}"
                    break
            else:
                text = response.choices[0].message.content if response.choices else None
                u = getattr(response, "usage", None)
                prompt = getattr(u, "prompt_tokens", None) or count_tokens(system) + count_tokens(user)
                completion = getattr(u, "completion_tokens", None) or count_tokens(text or "")
                self.usage.record_call(prompt, completion)
                return text
            attempt += 1
            if attempt > self.max_retries:
                break
            self.usage.record_retry()
            log.warning("%s: %s; retry %d/%d in %.2fs", purpose, last, attempt, self.max_retries, wait)
            self._sleep(wait)
            delay *= 2
        self.usage.record_failure(f"{purpose}: {last}")
        raise LLMUnavailable(f"{purpose}: {self.model} unavailable: {last}")


def _retry_after(exc: Exception, default: float) -> float:
    response = getattr(exc, "response", None)
    header = response.headers.get("retry-after") if response is not None else None
    try:
        return min(float(header), RETRY_AFTER_CAP_SECONDS) if header else default
    except ValueError:
        return default


def _describe(exc: Exception) -> str:
    status = getattr(exc, "status_code", None)
    kind = type(exc).__name__
    return f"{kind} (HTTP {status})" if status else kind


def _short(exc: Exception) -> str:
    return str(exc)[:300]
