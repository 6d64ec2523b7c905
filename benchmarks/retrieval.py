"""Retrieval quality of ``search_memories`` on LoCoMo (dev) and on the lessons set, with baselines.

Run from the repository root:

    python benchmarks/retrieval.py                                   # all of locomo-dev, MiniLM
    python benchmarks/retrieval.py --embedder hash --conversations 0 --limit-questions 20  # smoke
    python benchmarks/retrieval.py --skip-lessons

Protocol (issue 13, "Dev data and benchmark"; keep it fixed so runs compare):

* **Data**: ``../shared/data/locomo-dev/locomo-dev.json`` (LoCoMo conversations 0-4, CC BY-NC 4.0,
  see its README; read in place, never copied into the project). Absent: that part is skipped.
  A conversation is named by its index in that file (``--conversations 0 3``; its sample id,
  e.g. ``conv-26``, is accepted and printed too).
* **Store**: a throw-away ULTRON_HOME (own embedded Postgres, ``_support.private_home``) per run,
  default settings, the real MiniLM embedder (``--embedder hash`` for a quick smoke run only).
* **Upload**: every turn of every selected conversation, in order, through
  ``Ultron().upload_memory(content, context, tags=..., agent_id=None)`` with
  ``content = "<speaker>: <text>"`` (+ ``" [image: <blip_caption>]"`` when present),
  ``context = "<session date time>\\n<previous turn>\\n<turn before it>"`` (the two previous
  turns of the same session, each ``"<speaker>: <text>"``; fewer at a session's start) and
  ``tags = ["dia:<conv>:<dia_id>", "conv:<conv>"]`` (the store lower-cases tags). Upload may
  merge a turn into a near duplicate; a merged memory carries every contribution's tags.
* **Questions**: categories 1-4 (multi-hop, temporal, open-domain, single-hop). A question's
  evidence is the ids of its ``evidence`` list that name a turn of the conversation (malformed
  ids such as ``"D8:6; D9:17"`` or ``"D"`` are dropped); questions left with no evidence are
  skipped. Each is asked with ``search_memories(question, limit=10, tags=["conv:<conv>"])``.
* **Metric**: R@10 of a question = share of its evidence ids among the ``dia:<conv>:`` tags of
  the returned memories (tags of merged memories included); averaged over questions, overall,
  per category and per conversation.
* **Baselines** over the very same uploaded texts (``content + "\\n" + context``, one document
  per turn), each restricted to the question's conversation like the tag filter:
  BM25 (k1 1.2, b 0.75, idf ``ln(1 + (N - n + 0.5) / (n + 0.5))``, query terms counted with
  repetition, tokens = lower-cased runs of letters/digits, statistics per conversation),
  implemented here in Python; and exact cosine with the project's embedder
  (``ultron.embeddings.build_embedder``, the one the store uses), computed in numpy.
* **Latency**: p50/p95 of ``search_memories`` over the LoCoMo questions, end to end (query
  embedding, SQL, fusion, hit counting), in this process against the embedded server.
* **Lessons set** (on-mission): the ``benchmarks/data/lessons/dev/*.json`` specs (loaded with
  ``ultron.testing.transcripts.load_specs``), in a second throw-away store. Each lesson spec
  (shape != negative) is rendered in its own format and run through the offline pipeline of
  ``benchmarks/lessons.py`` (``Pipeline``: parse, segment, score, gate, extract, keep); every
  kept memory is uploaded with ``upload_memory(content, context, resolution, tags=its tags +
  ["lesson:<id>"])``. The query for a lesson is its ``lesson`` sentence with each of its
  ``key_terms`` removed (case-insensitive, longest term first, whitespace then collapsed): a
  paraphrase-like task description that cannot match on the exact key terms. This rule is
  mechanical on purpose (no hand-written paraphrases to drift). ``search_memories(query,
  limit=5)`` over the whole lessons store; a hit when any of the top 5 carries that lesson's
  tag. R@5 counts lessons whose session kept no memory as misses (their number is printed).

Printed: machine line, settings, upload summary, R@10 per method x category, per conversation,
search latency, and the lessons R@5 per shape.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _support import machine_line, private_home  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[1]
LOCOMO = REPO_ROOT.parent / "shared" / "data" / "locomo-dev" / "locomo-dev.json"
LESSONS_DEV = REPO_ROOT / "benchmarks" / "data" / "lessons" / "dev"
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
K = 10
LESSON_K = 5
BM25_K1, BM25_B = 1.2, 0.75
TOKEN = re.compile(r"[^\W_]+")


# -- LoCoMo data ---------------------------------------------------------------------------------

def sessions(conv: dict[str, Any]) -> list[tuple[str, list[dict[str, Any]]]]:
    """(date time, turns) of each session, in session-number order."""
    nums = sorted(int(m.group(1)) for k in conv if (m := re.fullmatch(r"session_(\d+)", k)))
    return [(str(conv.get(f"session_{n}_date_time") or ""), conv[f"session_{n}"] or []) for n in nums]


def line(turn: dict[str, Any]) -> str:
    return f"{turn['speaker']}: {turn['text']}"


def turns_of(conv: dict[str, Any]) -> list[dict[str, Any]]:
    """One upload per turn: content, context, dia id (the protocol's texts)."""
    out = []
    for date, turns in sessions(conv):
        for i, t in enumerate(turns):
            content = line(t) + (f" [image: {t['blip_caption']}]" if t.get("blip_caption") else "")
            prev = [line(turns[j]) for j in (i - 1, i - 2) if j >= 0]
            out.append({"dia_id": t["dia_id"], "content": content, "context": "\n".join([date] + prev)})
    return out


def questions_of(sample: dict[str, Any], dia_ids: set[str]) -> list[dict[str, Any]]:
    out = []
    for q in sample["qa"]:
        if q.get("category") not in CATEGORIES:
            continue
        evidence = list(dict.fromkeys(e for e in q.get("evidence") or [] if e in dia_ids))
        if evidence:
            out.append({"question": str(q["question"]), "category": q["category"], "evidence": evidence})
    return out


def select(data: list[dict[str, Any]], wanted: list[str] | None) -> list[tuple[str, dict[str, Any]]]:
    convs = [(str(i), s) for i, s in enumerate(data)]
    if not wanted:
        return convs
    out = []
    for w in wanted:
        found = [(c, s) for c, s in convs if w in (c, s.get("sample_id"))]
        if not found:
            raise SystemExit(f"--conversations: no conversation {w!r} in {LOCOMO} "
                             f"(use 0-{len(data) - 1} or a sample id)")
        out += [f for f in found if f not in out]
    return out


# -- baselines ------------------------------------------------------------------------------------

def tokens(text: str) -> list[str]:
    return TOKEN.findall(text.lower())


class BM25:
    """Okapi BM25 (k1 1.2, b 0.75) over one conversation's documents."""

    def __init__(self, docs: list[str]) -> None:
        self.tf = [Counter(tokens(d)) for d in docs]
        self.len = np.array([sum(tf.values()) for tf in self.tf], dtype=np.float64)
        self.avgdl = float(self.len.mean()) if len(docs) else 0.0
        df: Counter[str] = Counter()
        for tf in self.tf:
            df.update(tf.keys())
        n = len(docs)
        self.idf = {t: math.log(1 + (n - f + 0.5) / (f + 0.5)) for t, f in df.items()}
        self.postings: dict[str, list[tuple[int, int]]] = defaultdict(list)
        for i, tf in enumerate(self.tf):
            for t, c in tf.items():
                self.postings[t].append((i, c))
        self.norm = BM25_K1 * (1 - BM25_B + BM25_B * self.len / (self.avgdl or 1.0))

    def scores(self, query: str) -> np.ndarray:
        s = np.zeros(len(self.tf))
        for t in tokens(query):
            idf = self.idf.get(t)
            if idf is None:
                continue
            for i, c in self.postings[t]:
                s[i] += idf * c * (BM25_K1 + 1) / (c + self.norm[i])
        return s


def top(scores: np.ndarray, k: int) -> list[int]:
    return [int(i) for i in np.argsort(-scores, kind="stable")[:k]]


def recall(evidence: list[str], found: set[str]) -> float:
    return sum(1 for e in evidence if e in found) / len(evidence)


# -- today's search as of 86245b9 (the baseline this issue starts from) ---------------------------

LEGACY_SQL = """
    WITH ann AS (
        SELECT id, row_number() OVER (ORDER BY dist) AS ann_rank
        FROM (SELECT id, embedding <=> CAST(:q AS vector) AS dist FROM memory_records WHERE {cond}
              ORDER BY dist LIMIT :k) a
    ),
    fts AS (
        SELECT id, row_number() OVER (ORDER BY rank DESC) AS fts_rank
        FROM (SELECT id, ts_rank_cd(search_tsv, query) AS rank
              FROM (SELECT id, search_tsv FROM memory_records, websearch_to_tsquery('english', :text) AS q0
                    WHERE {cond} AND search_tsv @@ q0 LIMIT :fts_pool) pool,
                   websearch_to_tsquery('english', :text) AS query
              ORDER BY rank DESC LIMIT :k) f
    )
    SELECT m.id, m.tags, m.tier, ann.ann_rank, fts.fts_rank, 1 - (m.embedding <=> CAST(:q AS vector)) AS similarity
    FROM (SELECT id FROM ann UNION SELECT id FROM fts) c
    JOIN memory_records m ON m.id = c.id
    LEFT JOIN ann ON ann.id = c.id
    LEFT JOIN fts ON fts.id = c.id
"""


def legacy_search(conn: Any, vector: np.ndarray, query: str, tags: list[str] | None, limit: int,
                  min_score: float) -> list[dict[str, Any]]:
    """The search of 86245b9, reproduced for the baseline: ``ts_rank_cd`` over a GIN pool, HNSW,
    equal-weight RRF (k 60), the tier boost and the similarity floor (the time decay and feedback
    factor are 1 in a fresh store). Same store, same process, so the ratios are fair."""
    import sqlalchemy as sa

    k = max(limit * 4, 40)
    conn.exec_driver_sql(f"SET LOCAL hnsw.ef_search = {max(100, k)}")
    params = {"q": "[" + ",".join(f"{x:.7g}" for x in vector) + "]", "text": query, "k": k, "fts_pool": k * 10,
              "tags": tags}
    cond = "status = 'active'" + (" AND tags @> CAST(:tags AS text[])" if tags else "")
    rows = conn.execute(sa.text(LEGACY_SQL.format(cond=cond)), params).mappings().all()
    boost = {"HOT": 1.2, "WARM": 1.0, "COLD": 0.8}
    out = []
    for r in rows:
        if (r["similarity"] or 0) < min_score and r["fts_rank"] is None:
            continue
        rrf = sum(1.0 / (60 + r[key]) for key in ("ann_rank", "fts_rank") if r[key] is not None)
        out.append({**r, "score": rrf * boost.get(r["tier"], 1.0)})
    out.sort(key=lambda r: (-r["score"], -float(r["similarity"] or 0), r["id"]))
    top_rows = out[:limit]
    if top_rows:  # today's search counted hits too
        conn.execute(sa.text("UPDATE memory_records SET hit_count = hit_count + 1, last_hit_at = now() "
                             "WHERE id = ANY(:ids)"), {"ids": [r["id"] for r in top_rows]})
    return top_rows


# -- LoCoMo run -----------------------------------------------------------------------------------

def run_locomo(args: argparse.Namespace, settings_overrides: dict[str, Any]) -> None:
    if not LOCOMO.is_file():
        print(f"\nLoCoMo: {LOCOMO} is absent; the LoCoMo part is skipped "
              "(it needs ../shared/data/locomo-dev next to the repository)")
        return
    data = json.loads(LOCOMO.read_text(encoding="utf-8"))
    convs = select(data, args.conversations)
    with private_home("ultron-bench-retrieval-"):
        from ultron.sdk import Ultron
        from ultron.settings import Settings

        settings = Settings.from_env(**settings_overrides)
        client = Ultron(settings)
        embedder = client.context.embedder
        names = ", ".join(f"{c} ({s.get('sample_id')})" for c, s in convs)
        print(f"\nLoCoMo dev ({LOCOMO.parent.name}): conversations {names}")
        print(f"embedder {embedder.name}; search_min_score {settings.search_min_score}, dedup "
              f"{settings.dedup_similarity_threshold}/{settings.dedup_soft_threshold}, "
              f"hnsw ef_search {settings.hnsw_ef_search}; fusion {settings.search_fusion}, dense weight "
              f"{settings.search_dense_weight}, context weight {settings.search_context_weight}, resolution weight "
              f"{settings.search_resolution_weight}, lexical pool {settings.search_lexical_pool}")

        # upload
        per_conv: dict[str, dict[str, Any]] = {}
        t0 = time.perf_counter()
        for conv, sample in convs:
            turns = turns_of(sample["conversation"])
            ids = set()
            for t in turns:
                rec = client.upload_memory(t["content"], t["context"],
                                           tags=[f"dia:{conv}:{t['dia_id']}", f"conv:{conv}"], agent_id=None)
                ids.add(rec.id)
            qs = questions_of(sample, {t["dia_id"] for t in turns})
            if args.limit_questions is not None:
                qs = qs[:args.limit_questions]
            per_conv[conv] = {"sample_id": sample.get("sample_id"), "turns": turns, "memories": len(ids),
                              "questions": qs}
        upload_s = time.perf_counter() - t0
        n_turns = sum(len(p["turns"]) for p in per_conv.values())
        n_mem = sum(p["memories"] for p in per_conv.values())
        print(f"uploaded {n_turns} turns as {n_mem} memories ({n_turns - n_mem} merged into a near duplicate) "
              f"in {upload_s:.1f} s ({upload_s / max(n_turns, 1) * 1e3:.1f} ms/turn)")

        methods = ("search_memories", "today's search (86245b9: ts_rank_cd + RRF)",
                   "  lexical arm alone (dense weight 0)", "  dense arm alone (dense weight 1)",
                   "BM25 reference (content+context)", f"exact cosine ({embedder.name})")
        arms = {methods[2]: Ultron(Settings.from_env(**{**settings_overrides, "search_dense_weight": 0.0})),
                methods[3]: Ultron(Settings.from_env(**{**settings_overrides, "search_dense_weight": 1.0}))}
        results: list[dict[str, Any]] = []   # one per (question, method)
        latencies: list[float] = []
        legacy_latencies: list[float] = []
        t0 = time.perf_counter()
        for conv, p in per_conv.items():
            docs = [t["content"] + "\n" + t["context"] for t in p["turns"]]
            dia = [t["dia_id"] for t in p["turns"]]
            bm25 = BM25(docs)
            dv = np.asarray(embedder.embed(docs), dtype=np.float32)
            dv /= np.maximum(np.linalg.norm(dv, axis=1, keepdims=True), 1e-12)
            qs = p["questions"]
            qv = np.asarray(embedder.embed([q["question"] for q in qs]), dtype=np.float32) if qs else None
            prefix = f"dia:{conv}:"
            tags = [f"conv:{conv}"]

            def dia_of(tag_lists: Any) -> set[str]:
                return {tag[len(prefix):] for tl in tag_lists for tag in tl if tag.startswith(prefix)}

            for qi, q in enumerate(qs):
                t = time.perf_counter()
                hits = client.search_memories(q["question"], limit=K, tags=tags, agent_id=None)
                latencies.append(time.perf_counter() - t)
                t = time.perf_counter()
                with client.db.engine.begin() as conn:
                    legacy = legacy_search(conn, embedder.embed_one(q["question"]), q["question"], tags, K,
                                           settings.search_min_score)
                legacy_latencies.append(time.perf_counter() - t)
                evidence = [e.lower() for e in q["evidence"]]
                found_by = {
                    methods[0]: dia_of(h.record.tags for h in hits),
                    methods[1]: dia_of(r["tags"] for r in legacy),
                    **{m: dia_of(h.record.tags for h in c.search_memories(q["question"], limit=K, tags=tags,
                                                                            agent_id=None))
                       for m, c in arms.items()},
                    methods[4]: {dia[i].lower() for i in top(bm25.scores(q["question"]), K)},
                    methods[5]: {dia[i].lower() for i in top(dv @ (qv[qi] / max(np.linalg.norm(qv[qi]), 1e-12)),
                                                             K)},
                }
                for m, f in found_by.items():
                    results.append({"conv": conv, "category": q["category"], "method": m,
                                    "recall": recall(evidence, f)})
        eval_s = time.perf_counter() - t0

        def mean(rows: list[dict[str, Any]]) -> str:
            return f"{statistics.fmean(r['recall'] for r in rows):.3f}" if rows else "-"

        n_q = sum(len(p["questions"]) for p in per_conv.values())
        cats = Counter(q["category"] for p in per_conv.values() for q in p["questions"])
        print(f"\nR@{K} on {n_q} questions (categories 1-4 with evidence in the conversation)")
        head = f"  {'method':<44}{'all':>7}" + "".join(f"{f'{n}({c})':>16}" for c, n in CATEGORIES.items())
        print(head)
        print(f"  {'questions':<44}{n_q:>7}" + "".join(f"{cats.get(c, 0):>16}" for c in CATEGORIES))
        for m in methods:
            rows = [r for r in results if r["method"] == m]
            print(f"  {m:<44}{mean(rows):>7}"
                  + "".join(f"{mean([r for r in rows if r['category'] == c]):>16}" for c in CATEGORIES))

        print(f"\nR@{K} per conversation (all categories)")
        short = ("search", "today", "lexical", "dense", "BM25 ref", "cosine")
        print(f"  {'conv':<16}{'turns':>7}{'memories':>10}{'questions':>11}" + "".join(f"{s:>14}" for s in short))
        for conv, p in per_conv.items():
            rows = [r for r in results if r["conv"] == conv]
            name = f"{conv} ({p['sample_id']})"
            print(f"  {name:<16}{len(p['turns']):>7}{p['memories']:>10}"
                  f"{len(p['questions']):>11}"
                  + "".join(f"{mean([r for r in rows if r['method'] == m]):>14}" for m in methods))

        if latencies:
            ms = sorted(x * 1e3 for x in latencies)
            p95 = ms[min(len(ms) - 1, int(round(0.95 * (len(ms) - 1))))]
            old = sorted(x * 1e3 for x in legacy_latencies)
            old95 = old[min(len(old) - 1, int(round(0.95 * (len(old) - 1))))]
            print(f"\nlatency over {len(ms)} questions ({n_mem} memories in the store, end to end with the query "
                  f"embedding, uncached):\n  search_memories p50 {statistics.median(ms):.1f} ms, p95 {p95:.1f} ms; "
                  f"today's search p50 {statistics.median(old):.1f} ms, p95 {old95:.1f} ms; "
                  f"ratio p50 {statistics.median(ms) / statistics.median(old):.2f}")
        print(f"(evaluation incl. baselines {eval_s:.1f} s)")


# -- lessons set ------------------------------------------------------------------------------

def strip_terms(sentence: str, terms: list[str]) -> str:
    for term in sorted((t for t in terms if t), key=len, reverse=True):
        sentence = re.sub(re.escape(term), "", sentence, flags=re.IGNORECASE)
    return re.sub(r"\s+", " ", sentence).strip()


def run_lessons(settings_overrides: dict[str, Any]) -> None:
    from lessons import Pipeline, _transcripts  # benchmarks/lessons.py

    transcripts = _transcripts()
    specs = [s for s in transcripts.load_specs(LESSONS_DEV.glob("*.json")) if s.get("shape") != "negative"]
    if not specs:
        print(f"\nlessons set: no specs under {LESSONS_DEV}; skipped")
        return
    with private_home("ultron-bench-retrieval-lessons-"):
        from ultron.sdk import Ultron
        from ultron.settings import Settings

        client = Ultron(Settings.from_env(**settings_overrides))
        pipe = Pipeline()
        t0 = time.perf_counter()
        kept: dict[str, int] = {}
        n_up = 0
        for spec in specs:
            mems = pipe.memories(transcripts.render_jsonl(spec, spec.get("format") or "openai").encode("utf-8"))
            kept[spec["id"]] = len(mems)
            for m in mems:
                client.upload_memory(m["content"], m.get("context") or "", m.get("resolution") or "",
                                     tags=list(m.get("tags") or []) + [f"lesson:{spec['id']}"], agent_id=None)
                n_up += 1
        load_s = time.perf_counter() - t0
        by_shape: dict[str, list[bool]] = defaultdict(list)
        misses = []
        for spec in specs:
            query = strip_terms(spec["lesson"], spec.get("key_terms") or [])
            tag = f"lesson:{spec['id']}".lower()
            hits = client.search_memories(query, limit=LESSON_K, agent_id=None)
            hit = any(tag in h.record.tags for h in hits)
            by_shape[spec["shape"]].append(hit)
            if not hit:
                misses.append((spec["id"], kept[spec["id"]], query))
        print(f"\nLessons set (benchmarks/data/lessons/dev, {len(specs)} lesson sessions): {n_up} memories uploaded "
              f"in {load_s:.1f} s; {sum(1 for v in kept.values() if not v)} sessions kept no memory")
        print(f"  query = the lesson sentence minus its key terms; hit = lesson tag in the top {LESSON_K}")
        print(f"  {'shape':<16}{'lessons':>9}{'hits':>6}{f'R@{LESSON_K}':>7}")
        for shape, hs in sorted(by_shape.items()):
            print(f"  {shape:<16}{len(hs):>9}{sum(hs):>6}{sum(hs) / len(hs):>7.2f}")
        allh = [h for hs in by_shape.values() for h in hs]
        print(f"  {'ALL':<16}{len(allh):>9}{sum(allh):>6}{sum(allh) / len(allh):>7.3f}")
        if misses:
            print("  misses (id, memories kept, query):")
            for i, n, q in misses:
                print(f"    {i} [{n}] {q[:110]!r}")


def _setting_value(value: str) -> Any:
    for cast in (int, float):
        try:
            return cast(value)
        except ValueError:
            pass
    return value


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--conversations", nargs="+", metavar="CONV",
                    help="conversation indices (0-4) or sample ids; default: all of locomo-dev")
    ap.add_argument("--embedder", choices=("minilm", "hash"), default="minilm",
                    help="minilm (default settings) or hash (fast smoke run; meaningless figures)")
    ap.add_argument("--skip-lessons", action="store_true", help="only the LoCoMo part")
    ap.add_argument("--skip-locomo", action="store_true", help="only the lessons set")
    ap.add_argument("--limit-questions", type=int, metavar="N", help="at most N questions per conversation")
    ap.add_argument("--set", action="append", default=[], metavar="SETTING=VALUE",
                    help="a Settings override for this run, e.g. search_dense_weight=0.4 (repeatable)")
    args = ap.parse_args(argv)
    overrides: dict[str, Any] = {"embedding_provider": "hash"} if args.embedder == "hash" else {}
    for item in args.set:
        key, _, value = item.partition("=")
        overrides[key.strip()] = _setting_value(value.strip())
    print(machine_line())
    t0 = time.perf_counter()
    if not args.skip_locomo:
        run_locomo(args, overrides)
    if not args.skip_lessons:
        run_lessons(overrides)
    print(f"\ntotal {time.perf_counter() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
