"""The labelled lesson corpus: sessions written as specs, with gold per turn.

``benchmarks/data/lessons/corpus/*.jsonl.gz`` holds one spec per line (format in the
corpus README and :mod:`ultron.testing.transcripts`): the turns, the session's success,
its lessons (shape, type, key terms, the turns that carry it) and the third parties'
wishes (the turns that hold them). This module renders a spec the way an agent would
have written it, reads it back through the real parser, and labels each unit the lesson
model sees: a lesson shape, ``third_party`` or ``none``.
"""

from __future__ import annotations

import gzip
import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from ultron.vocabulary import LESSON_SHAPE_TYPES, LESSON_SHAPES
from ultron.learned.units import RepeatIndex, Unit, featurize, strip_repeated, units_of

SHAPES: tuple[str, ...] = LESSON_SHAPES
TYPE_OF_SHAPE: dict[str, str] = LESSON_SHAPE_TYPES
NONE, THIRD_PARTY = "none", "third_party"
CLASSES: tuple[str, ...] = (NONE, THIRD_PARTY) + SHAPES
REPO_ROOT = Path(__file__).resolve().parents[2]
CORPUS = REPO_ROOT / "benchmarks" / "data" / "lessons" / "corpus"


LEGACY = ("dev", "holdout", "holdout2", "holdout3")


def load(paths: Iterable[Path] | None = None, legacy: bool = True) -> list[dict[str, Any]]:
    """Every spec of the corpus files (``*.jsonl.gz``) and, with ``legacy``, of the four older
    splits (``benchmarks/data/lessons/<split>/*.json``, author ``legacy-<split>``), normalised
    (:func:`normalise`)."""
    out: list[dict[str, Any]] = []
    for path in sorted(paths if paths is not None else CORPUS.glob("*.jsonl.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            out.extend(normalise(json.loads(line)) for line in fh if line.strip())
    if legacy and paths is None:
        for split in LEGACY:
            for path in sorted((CORPUS.parent / split).glob("*.json")):
                data = json.loads(path.read_text(encoding="utf-8"))
                for spec in data if isinstance(data, list) else [data]:
                    out.append(normalise({**spec, "author": f"legacy-{split}"}))
    return out


def normalise(spec: dict[str, Any]) -> dict[str, Any]:
    """Older specs hold one lesson in top-level fields (shape, type, lesson, key_terms) and
    no turns for it: give them a ``lessons`` list whose turns are those holding the most key
    terms (written down in the corpus README)."""
    spec = dict(spec)
    if "lessons" not in spec:
        shape = spec.get("shape")
        if shape and shape != "negative":
            terms = [t.lower() for t in spec.get("key_terms") or []]
            counts = [sum(1 for t in terms if t in json.dumps(turn, ensure_ascii=False).lower())
                      for turn in spec["turns"]]
            best = max(counts) if counts else 0
            turns = [i for i, c in enumerate(counts) if best and c >= max(1, best - 1)][:3]
            spec["lessons"] = [{"shape": shape, "type": spec.get("type"), "lesson": spec.get("lesson"),
                                "key_terms": spec.get("key_terms") or [], "turns": turns}]
        else:
            spec["lessons"] = []
    spec.setdefault("third_party", [])
    spec.setdefault("negative_kind", None if spec["lessons"] else "unlabelled")
    spec.setdefault("author", spec.get("id", "x").split("-")[0])
    return spec


def shape_of(spec: dict[str, Any]) -> str:
    """The session's headline shape: its first lesson's, or ``negative``."""
    return spec["lessons"][0]["shape"] if spec["lessons"] else "negative"


@dataclass
class Labelled:
    spec: dict[str, Any]
    units: list[Unit]
    labels: list[str]
    turn_of_unit: list[int]


def render_messages(spec: dict[str, Any], fmt: str | None = None) -> list[Any]:
    from ultron.sessions.parsing import SessionParser
    from ultron.testing.transcripts import render_jsonl

    data = render_jsonl(spec, fmt or spec.get("format") or "openai").encode("utf-8")
    return list(SessionParser().messages(io.BytesIO(data)))


def label_units(spec: dict[str, Any], fmt: str | None = None, repeats: RepeatIndex | None = None,
                task_type: str | None = None) -> Labelled | None:
    """The spec's units with their gold class; ``None`` when its turns and units do not line
    up one to one (a turn the parser reads as harness text, say)."""
    msgs = render_messages(spec, fmt)
    if repeats is not None:
        msgs = strip_repeated(msgs, repeats)
    if not msgs:
        return None
    d, units = units_of(msgs)
    index = [i for i, t in enumerate(spec["turns"]) if t["role"] == "user" or t.get("text") or t.get("calls")]
    if len(units) != len(index) or any(u.role != spec["turns"][i]["role"] for u, i in zip(units, index)):
        return None
    if task_type is None:
        from ultron.heuristics import classify_task_type
        task_type = classify_task_type(msgs)
    featurize(d, units, task_type)
    gold: dict[int, str] = {}
    for lesson in spec["lessons"]:
        for t in lesson.get("turns") or []:
            gold.setdefault(t, lesson["shape"])
    for tp in spec.get("third_party") or []:
        for t in tp.get("turns") or []:
            gold.setdefault(t, THIRD_PARTY)
    return Labelled(spec, units, [gold.get(t, NONE) for t in index], index)


def repeat_index(specs: Iterable[dict[str, Any]], min_sessions: int = 3) -> RepeatIndex:
    """Sentences of the sessions' openings (system prompt, first request) counted per session."""
    counts: dict[int, int] = {}
    for spec in specs:
        first = next((t["text"] for t in spec["turns"] if t["role"] == "user"), "")
        for k in RepeatIndex.keys([spec.get("system") or "", first]):
            counts[k] = counts.get(k, 0) + 1
    return RepeatIndex(counts, min_sessions)


__all__ = ["CLASSES", "CORPUS", "SHAPES", "TYPE_OF_SHAPE", "Labelled", "label_units", "load", "normalise",
           "repeat_index", "shape_of"]
