"""One retry policy for every call to an OpenAI-compatible endpoint (chat and embeddings).

Retries with exponential backoff on 429, 5xx, timeouts and dropped connections,
honouring ``Retry-After`` (capped); other 4xx errors are final. A 400 that a caller
recognises as "this server lacks an optional feature" (JSON mode, ``dimensions``)
repeats the request without counting as a retry.
"""

from __future__ import annotations

import logging
import math
from typing import Callable, TypeVar

from ultron.llm.errors import LLMUnavailable
from ultron.llm.usage import LLMUsage

log = logging.getLogger("ultron.llm")
T = TypeVar("T")
RETRY_AFTER_CAP_SECONDS = 30.0


def call_with_retries(
    request: Callable[[], T], *, purpose: str, model: str, max_retries: int, retry_base_seconds: float,
    usage: LLMUsage, sleep: Callable[[float], None], drop_feature: Callable[[Exception], bool] = lambda exc: False,
) -> T:
    """``request()`` until it succeeds; raises LLMUnavailable (recorded in ``usage``) when it gives up."""
    import openai

    delay = retry_base_seconds
    last = "no request sent"
    attempt = 0
    while attempt <= max_retries:
        try:
            return request()
        except openai.BadRequestError as exc:
            if drop_feature(exc):
                continue  # the same request without the optional feature: not a retry
            last = f"request rejected (400): {short(exc)}"
            break
        except (openai.RateLimitError, openai.InternalServerError, openai.APITimeoutError,
                openai.APIConnectionError) as exc:
            last, wait = describe(exc), retry_after(exc, delay)
        except openai.APIStatusError as exc:
            if exc.status_code < 500 and exc.status_code != 429:
                last = f"HTTP {exc.status_code}: {short(exc)}"
                break
            last, wait = describe(exc), retry_after(exc, delay)
        attempt += 1
        if attempt > max_retries:
            break
        usage.record_retry()
        log.warning("%s: %s; retry %d/%d in %.2fs", purpose, last, attempt, max_retries, wait)
        sleep(wait)
        delay *= 2
    usage.record_failure(f"{purpose}: {last}")
    raise LLMUnavailable(f"{purpose}: {model} unavailable: {last}")


def retry_after(exc: Exception, default: float) -> float:
    response = getattr(exc, "response", None)
    header = response.headers.get("retry-after") if response is not None else None
    try:
        wait = float(header) if header else default
    except ValueError:
        return default
    return min(wait, RETRY_AFTER_CAP_SECONDS) if math.isfinite(wait) and wait >= 0 else default


def describe(exc: Exception) -> str:
    status = getattr(exc, "status_code", None)
    kind = type(exc).__name__
    return f"{kind} (HTTP {status})" if status else kind


def short(exc: Exception) -> str:
    return str(exc)[:300]
