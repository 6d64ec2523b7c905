"""SQL for ``llm_usage`` (revision 0014): what LLM work cost, per UTC day, provider, model and task.

Workers add deltas (:func:`add_usage`); readers (the overview page, which does no LLM work
itself) ask for a window of the last ``days`` days: day by day (:func:`usage_by_day`) or
summed, with a breakdown per provider, model and task (:func:`usage_totals`). A day is a
UTC day, whatever the server's or the session's time zone.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Iterable, Mapping

import sqlalchemy as sa

#: the counters of a row, in the table's order
COUNTS = ("calls", "prompt_tokens", "completion_tokens", "failures", "retries", "fallbacks")
#: today, as a UTC day
TODAY = "(now() AT TIME ZONE 'UTC')::date"

_SUMS = ", ".join(f"COALESCE(SUM(u.{c}), 0)::bigint AS {c}" for c in COUNTS)


def add_usage(conn: sa.Connection, rows: Iterable[Mapping[str, Any]]) -> int:
    """Add each row's counts to its (day, provider, model, task) row, creating it at zero
    first. A row: ``provider``, ``model``, ``task``, any of :data:`COUNTS` (missing ones
    are 0) and optionally ``day`` (a date; today in UTC when absent or None). Rows whose
    counts are all zero are skipped. Returns how many rows were written.

    Concurrent writers never lose a count (the addition happens in the UPDATE), and rows
    are written in key order, so two writers adding to the same rows cannot deadlock."""
    params = []
    for row in rows:
        counts = {c: int(row.get(c) or 0) for c in COUNTS}
        if any(v < 0 for v in counts.values()):
            raise ValueError(f"usage counts are deltas to add, never negative: {counts}")
        if not any(counts.values()):
            continue
        day = row.get("day")
        if day is not None and not isinstance(day, dt.date):
            raise TypeError(f"day must be a date, not {type(day).__name__}")
        params.append({"day": day, "provider": str(row["provider"]), "model": str(row.get("model") or ""),
                       "task": str(row.get("task") or ""), **counts})
    if not params:
        return 0
    params.sort(key=lambda p: (p["day"] or dt.date.max, p["provider"], p["model"], p["task"]))
    columns = ", ".join(COUNTS)
    values = ", ".join(f":{c}" for c in COUNTS)
    added = ", ".join(f"{c} = llm_usage.{c} + EXCLUDED.{c}" for c in COUNTS)
    conn.execute(sa.text(
        f"INSERT INTO llm_usage (day, provider, model, task, {columns}) "
        f"VALUES (COALESCE(CAST(:day AS date), {TODAY}), :provider, :model, :task, {values}) "
        f"ON CONFLICT (day, provider, model, task) DO UPDATE SET {added}, updated_at = now()"), params)
    return len(params)


def _window(days: int) -> int:
    if isinstance(days, bool) or not isinstance(days, int) or days < 1:
        raise ValueError(f"days must be a whole number >= 1, not {days!r}")
    return days


def usage_by_day(conn: sa.Connection, days: int) -> list[dict[str, Any]]:
    """One dict per UTC day of the last ``days`` days (today included), oldest first, quiet
    days with zeros: ``{"day": date, "calls", "prompt_tokens", "completion_tokens",
    "failures", "retries", "fallbacks"}`` (ints), summed over providers, models and tasks."""
    rows = conn.execute(sa.text(
        f"SELECT d.day::date AS day, {_SUMS} "
        f"FROM generate_series({TODAY} - (:days - 1), {TODAY}, interval '1 day') AS d(day) "
        "LEFT JOIN llm_usage u ON u.day = d.day::date GROUP BY d.day ORDER BY d.day"), {"days": _window(days)})
    return [dict(r._mapping) for r in rows]


def usage_totals(conn: sa.Connection, days: int) -> dict[str, Any]:
    """The last ``days`` UTC days (today included) summed: ``{"since": date, "until": date,
    "calls", "prompt_tokens", "completion_tokens", "failures", "retries", "fallbacks",
    "by_task": [...]}``, where ``by_task`` holds one dict per (provider, model, task) seen in
    the window, ``{"provider", "model", "task", <the same six counts>}``, most calls first."""
    params = {"days": _window(days)}
    since, until = conn.execute(sa.text(f"SELECT {TODAY} - (:days - 1), {TODAY}"), params).one()
    totals = conn.execute(sa.text(f"SELECT {_SUMS} FROM llm_usage u WHERE u.day BETWEEN :since AND :until"),
                          {"since": since, "until": until}).one()
    by_task = conn.execute(sa.text(
        f"SELECT u.provider, u.model, u.task, {_SUMS} FROM llm_usage u WHERE u.day BETWEEN :since AND :until "
        "GROUP BY u.provider, u.model, u.task ORDER BY calls DESC, fallbacks DESC, u.provider, u.model, u.task"),
        {"since": since, "until": until})
    return {"since": since, "until": until, **dict(totals._mapping), "by_task": [dict(r._mapping) for r in by_task]}
