"""The real LLM: the ``openai`` client against any OpenAI-compatible endpoint.

What this adds over a bare ``chat.completions.create``:

* retries with jittered exponential backoff on 429, 5xx, timeouts, dropped connections
  and garbled 200s (``ultron.llm.retry``; the client's own retries are off so the policy
  and its counts are ours);
* JSON output mode where the server supports it, switched off for the rest of the
  process the first time a server rejects ``response_format``;
* lenient JSON extraction (with repair of almost-JSON) and a caller-supplied validator
  for every answer, with one retry of the call when the answer is unusable: no choice,
  no message, no content, an answer cut off by the token limit, or one that fails
  validation;
* usage accounting (calls, tokens, retries, failures), per model and task, for the run's
  metadata and the store.

Every way a reply can go wrong ends as :class:`LLMUnavailable` or :class:`LLMInvalidAnswer`,
which callers already handle by leaving the work pending or falling back to the rules.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any, Callable, TypeVar

from ultron.llm.errors import LLMInvalidAnswer
from ultron.llm.jsonparse import NoJSON, parse_lenient
from ultron.llm.retry import GarbledResponse, as_count, call_with_retries
from ultron.llm.tokens import count_tokens
from ultron.llm.usage import LLMUsage

log = logging.getLogger("ultron.llm")
T = TypeVar("T")


class UnusableReply(ValueError):
    """A well-formed completion that holds no usable answer (re-asked, like a failed validation)."""


@dataclass(frozen=True)
class Reply:
    text: str | None
    finish_reason: str | None


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
        self, system: str, user: str, validate: Callable[[Any], T], *, purpose: str, attempts: int = 2,
        task: str = "",
    ) -> T:
        """Ask, parse and validate; an unusable answer is asked again once (``attempts`` = 2).
        ``purpose`` names the work in logs and errors; ``task`` is its label in the usage counts."""
        problem = "no attempt made"
        for attempt in range(1, attempts + 1):
            reply = self._chat(system, user, purpose, task)
            try:
                return validate(_parse(reply))
            except (NoJSON, ValueError, TypeError, KeyError, IndexError, AttributeError, RecursionError) as exc:
                # AttributeError & co.: a validator meeting a value of a shape it did not expect
                problem = f"{type(exc).__name__}: {str(exc)[:300]}"
                self.usage.record_failure(f"{purpose}: invalid answer (attempt {attempt}): {problem}",
                                          model=self.model, task=task)
                log.warning("%s: invalid answer from %s (attempt %d/%d): %s", purpose, self.model, attempt, attempts, problem)
        raise LLMInvalidAnswer(f"{purpose}: {self.model} gave no valid answer in {attempts} attempts; last: {problem}")

    def _chat(self, system: str, user: str, purpose: str, task: str = "") -> Reply:
        messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]

        def request() -> Reply:
            kwargs: dict[str, Any] = {"model": self.model, "messages": messages, "temperature": 0}
            if self.json_mode:
                kwargs["response_format"] = {"type": "json_object"}
            response = self._client.chat.completions.create(**kwargs)
            reply = _reply_of(response)
            u = getattr(response, "usage", None)
            prompt = as_count(getattr(u, "prompt_tokens", None)) or count_tokens(system) + count_tokens(user)
            completion = as_count(getattr(u, "completion_tokens", None)) or count_tokens(reply.text or "")
            self.usage.record_call(prompt, completion, model=self.model, task=task)
            return reply

        def drop_json_mode(exc: Exception) -> bool:
            if self.json_mode and "response_format" in str(exc).lower():
                log.info("%s does not support JSON mode; continuing without it", self.model)
                self.json_mode = False
                return True
            return False

        return call_with_retries(request, purpose=purpose, model=self.model, max_retries=self.max_retries,
                                 retry_base_seconds=self.retry_base_seconds, usage=self.usage, sleep=self._sleep,
                                 drop_feature=drop_json_mode, task=task)


def _reply_of(response: Any) -> Reply:
    """The first choice's text and finish reason, read without trusting the response's shape.

    Not a chat completion at all (the openai client hands back the body as a str when the
    content type is not JSON, e.g. a proxy's HTML page): GarbledResponse, retried as a
    transport fault. A completion without choice, message or text content: a Reply with
    no text, which the caller re-asks."""
    from openai.types.chat import ChatCompletion

    if not isinstance(response, ChatCompletion):
        raise GarbledResponse(f"expected a chat completion, got {type(response).__name__}: {str(response)[:80]!r}")
    choices = getattr(response, "choices", None)
    if not isinstance(choices, list) or not choices:
        return Reply(None, "no choices")
    first = choices[0]
    finish = getattr(first, "finish_reason", None)
    message = getattr(first, "message", None)
    content = getattr(message, "content", None)
    return Reply(content if isinstance(content, str) else None, finish if isinstance(finish, str) else None)


def _parse(reply: Reply) -> Any:
    if reply.finish_reason == "length":
        # cut off by the token limit: whatever JSON it holds is a fragment
        raise UnusableReply("the answer was cut off at the token limit (finish_reason=length)")
    if reply.text is None and reply.finish_reason == "no choices":
        raise UnusableReply("the response held no choices")
    return parse_lenient(reply.text)
