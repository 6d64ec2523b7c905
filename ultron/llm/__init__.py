"""The LLM transport, and nothing else: the OpenAI-compatible client (JSON mode, lenient
parsing, validation retries), the retry policy shared with remote embeddings, token
counting and usage accounting. It knows no prompt and no domain task: those live in
``ultron.prompts`` and ``ultron.providers``."""
