"""Every prompt Ultron sends a model, one module per task family.

Each module holds a task's system prompt, how its user message is built, and the
validator its answer must pass (the schema). The providers in ``ultron.providers``
only send them; a new LLM task is a prompt + validator here, a method on the
provider interface, and its offline twin in ``ultron.heuristics``.
"""
