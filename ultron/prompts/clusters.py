"""Cluster topics: a short label for a group of related memories."""

from __future__ import annotations

from typing import Any

from ultron.heuristics.topics import clean_label

LABEL_SYSTEM = """You name a cluster of related memories of AI agents (problems met, fixes, preferences).
Give the topic they share as a short label of 2 to 6 words, specific enough to tell it from other clusters
(e.g. "pandas import errors in Docker images"), not a sentence. Answer with JSON only: {"topic": "..."}"""


def validate_label(value: Any) -> str:
    topic = value.get("topic") if isinstance(value, dict) else value
    if not isinstance(topic, str) or not clean_label(topic):
        raise ValueError("expected {\"topic\": \"a short label\"}")
    return clean_label(topic)
