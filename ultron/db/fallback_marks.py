"""SQL for the fallback marks (revision 0007) on memory_records.

``fallback_tasks`` names the tasks (``classify_memory``, ``summarize``, ``merge_memories``)
whose result in a memory came from the rules because the LLM failed; maintenance redoes them
once the LLM answers again (``ultron.memory.redo``). The partial index on
``cardinality(fallback_tasks) > 0`` keeps finding the marked few cheap however large the store.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import sqlalchemy as sa

from ultron.db.memories import rewrite_sets


def marks_for(fell_back: dict[str, bool]) -> dict[str, list[str]]:
    """The marks to add (the rules answered) and to clear (the LLM did the task afresh), as
    :func:`update_fallback_marks` takes them."""
    return {"add": [t for t, fell in fell_back.items() if fell],
            "clear": [t for t, fell in fell_back.items() if not fell]}


def update_fallback_marks(conn: sa.Connection, memory_id: str, *, add: Sequence[str] = (),
                          clear: Sequence[str] = ()) -> None:
    """Add the tasks in ``add`` and drop those in ``clear`` (sorted, no repeats)."""
    add, clear = sorted(set(add)), sorted(set(clear) - set(add))
    if not add and not clear:
        return
    conn.execute(sa.text(
        "UPDATE memory_records SET fallback_tasks = ARRAY(SELECT DISTINCT t FROM unnest(fallback_tasks || "
        "CAST(:add AS text[])) t WHERE t <> ALL(CAST(:clear AS text[])) ORDER BY t) WHERE id = :id"),
        {"id": memory_id, "add": add, "clear": clear})


def marked_for_redo(conn: sa.Connection, limit: int) -> list[tuple[str, list[str]]]:
    """Memories holding a rules answer to redo, oldest mark first (through the partial index)."""
    rows = conn.execute(sa.text(
        "SELECT id, fallback_tasks FROM memory_records WHERE cardinality(fallback_tasks) > 0 "
        "ORDER BY updated_at, id LIMIT :n"), {"n": limit})
    return [(r.id, list(r.fallback_tasks)) for r in rows]


def apply_redo(conn: sa.Connection, memory_id: str, *, seen: dict[str, str], memory_type: str | None,
               body: dict[str, str] | None, summaries: tuple[str, str] | None, embedding: np.ndarray | None,
               marks: Sequence[str]) -> bool:
    """Write what a redo produced and set its remaining marks, only if the memory still reads
    ``seen`` (a merge or a forget since the redo read it wins; the next run tries again).
    False when the memory changed or is gone."""
    sets = ["fallback_tasks = CAST(:marks AS text[])", "updated_at = now()"]
    params: dict[str, Any] = {"id": memory_id, "marks": sorted(set(marks)), "c0": seen["content"],
                              "x0": seen["context"], "r0": seen["resolution"]}
    if memory_type is not None:
        sets.append("memory_type = :memory_type")
        params["memory_type"] = memory_type
    rewrite_sets(sets, params, body=body, summaries=summaries, embedding=embedding)
    row = conn.execute(sa.text(
        f"UPDATE memory_records SET {', '.join(sets)} WHERE id = :id AND content = :c0 AND context = :x0 "
        "AND resolution = :r0 RETURNING id"), params).first()
    return row is not None
