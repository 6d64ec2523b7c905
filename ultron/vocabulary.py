"""The words prompts, heuristics, storage and interfaces share.

Everything that names a kind of thing Ultron keeps (memory types, task types, tiers,
the judge's rubric, summary sizes) lives here once, so a prompt, an offline heuristic,
a database check and a CLI choice list can never disagree. A new memory type is one
entry in ``MEMORY_TYPE_MEANINGS`` (the classify prompt is built from it) plus the
heuristic that recognises it.
"""

from __future__ import annotations

#: memory type -> what it means; the classify prompt lists them in this order.
MEMORY_TYPE_MEANINGS: dict[str, str] = {
    "error": "an error and its fix",
    "security": "a security event or risk",
    "correction": "a correction of a mistake",
    "pattern": "an observed pattern or reusable procedure",
    "preference": "an explicit preference",
    "life": "a shareable everyday fact",
}
MEMORY_TYPES: tuple[str, ...] = tuple(MEMORY_TYPE_MEANINGS)

#: the shapes a lesson takes in a session, and the memory type each becomes. The lesson model
#: (ultron.learned), the extraction prompt and the lesson benchmark share them.
LESSON_SHAPE_TYPES: dict[str, str] = {
    "error_fix": "error",           # a call fails; later calls fix it
    "prose_fix": "error",           # an error met or reported; the fix given in words, usually confirmed
    "correction": "correction",     # the principal sets the agent right
    "preference": "preference",     # the principal's standing wish about how work is done
    "general_lesson": "pattern",    # a rule stated for next time, or a business rule seen applied
    "procedure": "pattern",         # a recurring task done through steps that worked
    "security": "security",         # a secret exposed or about to be, a dangerous action avoided
}
LESSON_SHAPES: tuple[str, ...] = tuple(LESSON_SHAPE_TYPES)

#: how reusable a memory is: a how-to, or a one-off event.
MEMORY_KINDS: tuple[str, ...] = ("procedural", "episodic")

#: what a task segment is about (the quality scorer's budgets are per type).
TASK_TYPES: tuple[str, ...] = ("code", "data", "ops", "writing", "qa", "customer_service", "other")

#: usage tiers a live memory can be in; ARCHIVED memories are out of search.
TIERS: tuple[str, ...] = ("HOT", "WARM", "COLD")
ARCHIVED = "ARCHIVED"

#: search result detail levels (full text comes from get_memory_details).
DETAIL_LEVELS: tuple[str, ...] = ("l0", "l1")

#: the LLM judge's criteria, each scored 0..1.
RUBRIC: tuple[str, ...] = ("goal_achieved", "correctness", "efficiency", "safety")

#: token limits of a memory's summaries (L0 one-liner, L1 overview), in cl100k tokens.
L0_TOKENS = 64
L1_TOKENS = 256
