"""What a started `ultron serve` holds in memory: no torch (the local embedder) until a
request needs it, never spaCy or Presidio's analyzer with the built-in redaction rules,
and under 600 MB (resident now and at its peak) after start, after the first search and
after searches and uploads; those still answer correctly, loading what they need then."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa

from tests.conftest import TEST_HOME

TOKEN = "footprint-token-0123456789abcdef"
MAX_RSS_MB = 600


def rss_mb(pid: int, field: str = "VmRSS") -> float:
    """Resident memory now (VmRSS) or at its peak so far (VmHWM), in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no {field} for {pid}")


def memory(pid: int) -> str:
    return f"VmRSS {rss_mb(pid):.0f} MB, VmHWM {rss_mb(pid, 'VmHWM'):.0f} MB"


def assert_under_limit(pid: int, after: str) -> None:
    figures = memory(pid)
    print(f"after {after}: {figures}")  # shown with -s: the figures the issue asks for
    assert rss_mb(pid) < MAX_RSS_MB and rss_mb(pid, "VmHWM") < MAX_RSS_MB, f"{figures} after {after}"


def mapped(pid: int, fragment: str) -> bool:
    """A shared library or extension module whose path contains ``fragment`` is mapped."""
    return any(fragment in line for line in Path(f"/proc/{pid}/maps").read_text().splitlines())


def imported(log: Path, module: str) -> bool:
    """``module`` was imported: the server runs with PYTHONPROFILEIMPORTTIME, so every import
    it ever made is a line of its log, pure-Python packages (Presidio) included."""
    return any(line.startswith("import time:") and line.rsplit("|", 1)[-1].strip() == module
               for line in log.read_text(errors="replace").splitlines())


@pytest.fixture
def serve(client, db, tmp_path):
    """`ultron serve` (the CLI command) on the test database, with the default local MiniLM
    embedder (the suite's hash embedder would never load torch) on an emptied store."""
    port = free_port()
    log = tmp_path / "serve.log"
    env = {**os.environ, "ULTRON_HOME": str(TEST_HOME), "ULTRON_LLM_PROVIDER": "rules", "ULTRON_API_TOKEN": TOKEN,
           "ULTRON_EMBEDDING_PROVIDER": "local", "PYTHONPROFILEIMPORTTIME": "1"}
    with open(log, "ab") as out:
        proc = subprocess.Popen([sys.executable, "-m", "ultron.cli", "serve", "--port", str(port)], env=env,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            assert proc.poll() is None, log.read_text(errors="replace")[-3000:]
            assert time.monotonic() < deadline, "no /health within 90 s"
            try:
                if httpx.get(url + "/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.2)
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=120) as http:
            yield proc, http, log
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        with db.engine.begin() as conn:  # the store now belongs to MiniLM: leave it empty for the next test
            conn.execute(sa.text("TRUNCATE memory_records, memory_contributions, embedding_profile, memory_lexemes, "
                                 "memory_corpus CASCADE"))


def free_port() -> int:
    """A free loopback port (closed again before the server binds it)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_started_server_holds_no_model_and_loads_each_on_first_use(serve):
    proc, http, log = serve
    time.sleep(3)  # anything started in the background at startup would show by now
    assert not mapped(proc.pid, "onnxruntime"), "the embedding model is loaded before any request"
    assert not imported(log, "onnxruntime") and not imported(log, "spacy") and not imported(log, "presidio_analyzer")
    assert_under_limit(proc.pid, "start")

    r = http.post("/memories/search", json={"query": "pip install fails behind a proxy"})
    assert r.status_code == 200 and r.json()["results"] == []
    assert mapped(proc.pid, "onnxruntime") and imported(log, "onnxruntime")  # the check sees a loaded model
    assert_under_limit(proc.pid, "the first search")

    uploaded = []
    for i in range(3):
        r = http.post("/memories/upload", json={
            "content": f"pip install times out behind the corporate proxy (host {i}); mail ops@example.com",
            "resolution": "export HTTPS_PROXY=http://proxy.internal:3128 before pip install"})
        assert r.status_code == 200, r.text
        uploaded.append(r.json()["id"])
    # Redaction with the built-in rules needs neither Presidio's analyzer nor spaCy, and the
    # embedder (ONNX Runtime) never needs torch.
    assert not imported(log, "spacy") and not imported(log, "presidio_analyzer") and not imported(log, "torch")
    found = http.post("/memories/search", json={"query": "pip install proxy timeout", "detail_level": "l1"}).json()
    assert [m["id"] for m in found["results"]][:1] in ([u] for u in uploaded)
    assert "ops@example.com" not in str(found) and "<EMAIL_ADDRESS>" in str(found)  # redacted on upload
    for _ in range(5):
        assert http.post("/memories/search", json={"query": "corporate proxy"}).status_code == 200
    assert_under_limit(proc.pid, "searches and uploads")
