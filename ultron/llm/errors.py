class LLMError(RuntimeError):
    """Base class for LLM problems a run reports instead of crashing."""


class LLMUnavailable(LLMError):
    """The endpoint could not be reached or kept failing (network, timeout, 429, 5xx).
    Work that needed it stays pending and is retried on the next run."""


class LLMInvalidAnswer(LLMError):
    """The model answered, but not with what the task asked for (after a retry)."""
