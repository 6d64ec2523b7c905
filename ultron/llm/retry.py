"""One retry policy for every call to an OpenAI-compatible endpoint (chat and embeddings).

Retries on 429, 5xx, timeouts, dropped connections and garbled 200s (a proxy's HTML error
page, a body cut off mid-JSON, JSON that is not an API response at all), honouring
``Retry-After`` (capped); other 4xx errors are final. The backoff is exponential with full
jitter, so many workers that failed together do not retry together. A 400 that a caller
recognises as "this server lacks an optional feature" (JSON mode, ``dimensions``) repeats
the request without counting as a retry.

Whatever goes wrong in the transport, the caller sees :class:`LLMUnavailable` and nothing
else: one bad reply must not abort a whole maintenance run.
"""

from __future__ import annotations

import logging
import math
import random
from typing import Any, Callable, TypeVar

from ultron.llm.errors import LLMUnavailable
from ultron.llm.usage import LLMUsage

log = logging.getLogger("ultron.llm")
T = TypeVar("T")
RETRY_AFTER_CAP_SECONDS = 30.0
#: no computed backoff waits longer than this (Retry-After has its own cap)
BACKOFF_CAP_SECONDS = 30.0


class GarbledResponse(Exception):
    """A 200 whose body is not the API's answer (HTML, truncated JSON, the wrong shape).
    Raised by a request function; call_with_retries treats it like a 5xx, since proxies
    and overloaded gateways produce these and they pass."""


def call_with_retries(
    request: Callable[[], T], *, purpose: str, model: str, max_retries: int, retry_base_seconds: float,
    usage: LLMUsage, sleep: Callable[[float], None], drop_feature: Callable[[Exception], bool] = lambda exc: False,
    jitter: Callable[[float], float] | None = None, task: str = "",
) -> T:
    """``request()`` until it succeeds; raises LLMUnavailable (recorded in ``usage``) when it gives up.

    ``jitter`` maps the exponential ceiling to the actual wait (full jitter by default:
    uniform in [0, ceiling]); tests inject ``sleep`` to stay fast. Retries and the failure
    count for ``(model, task)`` in ``usage``."""
    import openai

    spread = jitter or full_jitter
    ceiling = retry_base_seconds
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
            last, wait = describe(exc), retry_after(exc, spread(ceiling))
        except openai.APIStatusError as exc:
            if exc.status_code < 500 and exc.status_code != 429:
                last = f"HTTP {exc.status_code}: {short(exc)}"
                break
            last, wait = describe(exc), retry_after(exc, spread(ceiling))
        except (GarbledResponse, openai.APIError, ValueError) as exc:
            # ValueError: the openai client decoding a body that is not JSON (JSONDecodeError,
            # UnicodeDecodeError); APIError: its other complaints about a response
            last, wait = f"garbled response ({type(exc).__name__}: {short(exc)[:120]})", spread(ceiling)
        attempt += 1
        if attempt > max_retries:
            break
        usage.record_retry(model=model, task=task)
        log.warning("%s: %s; retry %d/%d in %.2fs", purpose, last, attempt, max_retries, wait)
        sleep(wait)
        ceiling = min(ceiling * 2, BACKOFF_CAP_SECONDS)
    usage.record_failure(f"{purpose}: {last}", model=model, task=task)
    raise LLMUnavailable(f"{purpose}: {model} unavailable: {last}")


def full_jitter(ceiling: float) -> float:
    """A wait drawn uniformly from [0, ceiling] ("full jitter")."""
    return random.uniform(0.0, max(ceiling, 0.0))


def retry_after(exc: Exception, default: float) -> float:
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    header = headers.get("retry-after") if headers is not None else None
    try:
        wait = float(header) if header else default
    except ValueError:
        return default
    return min(wait, RETRY_AFTER_CAP_SECONDS) if math.isfinite(wait) and wait >= 0 else default


def as_count(value: Any) -> int:
    """A token count from a server's usage block, or 0 when it is missing or not a number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return 0
    return max(int(value), 0)


def describe(exc: Exception) -> str:
    status = getattr(exc, "status_code", None)
    kind = type(exc).__name__
    return f"{kind} (HTTP {status})" if status else kind


def short(exc: Exception) -> str:
    return str(exc)[:300]
