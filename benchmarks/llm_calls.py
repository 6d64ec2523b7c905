"""LLM calls and tokens per session, on a counting fake OpenAI-compatible server.

Ingests ../shared/data into a private ULTRON_HOME, then segments and labels every
session with the real OpenAI provider pointed at a local fake server. The fake
answers segmentation the way the offline segmenter would (so window overlap
behaves as with a real model) and the judge with a fixed rubric. It prints calls
and tokens per session next to the minimum the algorithm needs: zero calls for
sessions of <= 2 messages, and one call per window the budget forces.

    python benchmarks/llm_calls.py [--max-input-tokens N] [--reserve-tokens N]
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _support import machine_line, private_home  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"
RENDERED = re.compile(r"^\[(\d+)\] (system|user|assistant|tool)(?: \(sub-agent\))?: (.*)$")


def responder_factory():
    from ultron.heuristics.segmenter import segment_window
    from ultron.sessions.messages import Message
    from ultron.testing.fake_openai import Reply

    def respond(body):
        system, user = body["messages"][0]["content"], body["messages"][1]["content"]
        if "grade" in system:
            return Reply.json({"goal_achieved": 0.8, "correctness": 0.8, "efficiency": 0.7, "safety": 1.0,
                               "rationale": "fake judge"})
        msgs, current = [], None
        for line in user.split("\n"):
            m = RENDERED.match(line)
            if m:
                current = Message(m.group(2), m.group(3))
                msgs.append(current)
            elif current is not None:
                current.content += "\n" + line
        tasks = segment_window(msgs)
        return Reply.json({"tasks": [{"start": s, "end": e, "topic": t} for s, e, t in tasks]})

    return respond


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--max-input-tokens", type=int, default=None)
    ap.add_argument("--reserve-tokens", type=int, default=None)
    args = ap.parse_args()
    if not SHARED.is_dir():
        print(f"{SHARED} not found: nothing to measure")
        return 0
    with private_home("ultron-llmcalls-") as home:
        return _run(args, home)


def _run(args: argparse.Namespace, home: Path) -> int:
    from ultron.prompts.render import render_message
    from ultron.providers import OpenAIProvider
    from ultron.llm.tokens import count_tokens
    from ultron.sdk import Ultron
    from ultron.settings import Settings
    from ultron.testing.fake_openai import FakeOpenAI
    from ultron.trajectory.segmentation import SHORT_SESSION
    from ultron.context import ServiceContext
    from ultron.trajectory.service import TrajectoryService

    with FakeOpenAI(responder_factory()) as server:
        overrides = {}
        if args.max_input_tokens:
            overrides["llm_max_input_tokens"] = args.max_input_tokens
        if args.reserve_tokens:
            overrides["llm_prompt_reserve_tokens"] = args.reserve_tokens
        settings = Settings.from_env(llm_provider="openai", llm_base_url=server.url, llm_api_key="k",
                                     **overrides)
        client = Ultron(settings)
        client.ingest([SHARED], "bench")
        service = TrajectoryService(ServiceContext(client.db, settings, provider=OpenAIProvider(settings)))
        budget = settings.segment_budget_tokens

        # The minimum: sessions over 2 messages need at least ceil(total tokens / budget) windows.
        with client.db.engine.connect() as conn:
            from ultron.db import segments as store
            from ultron.db.sessions import iter_messages

            sessions = store.pending_sessions(conn, 10_000)
            needed, sizes, tokens_total = 0, [], 0
            for s in sessions:
                msgs = list(iter_messages(conn, s.record_id))
                sizes.append(len(msgs))
                if len(msgs) > SHORT_SESSION:
                    tok = sum(count_tokens(render_message(i + 1, m)) for i, m in enumerate(msgs))
                    tokens_total += tok
                    needed += max(1, -(-tok // budget))

        t0 = time.perf_counter()
        seg_results = service.segment_pending_sessions(batch_size=10_000)
        seg_secs = time.perf_counter() - t0
        seg_usage = service.usage.snapshot()
        t0 = time.perf_counter()
        labels = service.label_pending_segments(batch_size=100_000)
        label_secs = time.perf_counter() - t0
        all_usage = service.usage.snapshot()

    n = len(seg_results)
    windows = sum(r.windows for r in seg_results)
    short = sum(1 for size in sizes if size <= SHORT_SESSION)
    print(machine_line())
    print(f"data: {SHARED} ({n} sessions, {sum(sizes):,} messages, median {statistics.median(sizes):.0f} "
          f"messages/session; {short} sessions of <= {SHORT_SESSION} messages)")
    print(f"window budget: {budget:,} tokens (ULTRON_LLM_MAX_INPUT_TOKENS {settings.llm_max_input_tokens:,} - "
          f"ULTRON_LLM_PROMPT_RESERVE_TOKENS {settings.llm_prompt_reserve_tokens:,})\n")
    rows = [
        ("segmentation", seg_usage.calls, seg_usage.prompt_tokens, seg_usage.completion_tokens, seg_secs),
        ("quality judge", all_usage.calls - seg_usage.calls, all_usage.prompt_tokens - seg_usage.prompt_tokens,
         all_usage.completion_tokens - seg_usage.completion_tokens, label_secs),
    ]
    print(f"{'task':14} {'calls':>7} {'calls/session':>14} {'prompt tok/session':>19} "
          f"{'completion tok/session':>23} {'secs':>6}")
    for name, calls, prompt, completion, secs in rows:
        print(f"{name:14} {calls:7,} {calls / n:14.2f} {prompt / n:19,.0f} {completion / n:23,.0f} {secs:6.1f}")
    print(f"\nsegmentation windows: {windows} for {n} sessions; minimum the budget forces: {needed} "
          f"(ratio {windows / max(1, needed):.2f}x); calls for sessions of <= {SHORT_SESSION} messages: 0 by design")
    print(f"segments labelled: {sum(1 for lb in labels if lb.status == 'labeled')} "
          f"(one judge call each); failures: {all_usage.failures}, retries: {all_usage.retries}")
    print(f"conversation tokens over sessions needing a call: {tokens_total:,}; segmentation prompt tokens "
          f"sent: {seg_usage.prompt_tokens:,} (fake server counts 4 chars/token)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
