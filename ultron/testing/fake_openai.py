"""A real local HTTP server speaking the OpenAI chat-completions protocol, scripted.

Tests and benchmarks point the real ``openai`` client at it (never patching the
client): each request takes the next scripted reply — JSON, prose-wrapped JSON,
garbage, an empty answer, an HTTP error status, or a stall past the client's
timeout — and falls back to a responder function when the script is empty.
Every request is recorded, so callers can count calls and tokens.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable


@dataclass
class Reply:
    """One scripted reply. Exactly one of content / status applies; ``delay`` stalls first."""

    content: str | None = None
    status: int = 200
    error: str = "scripted error"
    delay: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)

    @classmethod
    def json(cls, value: Any) -> "Reply":
        return cls(content=json.dumps(value))

    @classmethod
    def text(cls, text: str) -> "Reply":
        return cls(content=text)

    @classmethod
    def http(cls, status: int, error: str = "scripted error", **headers: str) -> "Reply":
        return cls(status=status, error=error, headers=headers)

    @classmethod
    def stall(cls, seconds: float, then: "Reply | None" = None) -> "Reply":
        base = then or cls.json({})
        return cls(content=base.content, status=base.status, error=base.error, delay=seconds)


Responder = Callable[[dict[str, Any]], "Reply"]


class FakeOpenAI:
    def __init__(self, responder: Responder | None = None, *, reject_json_mode: bool = False) -> None:
        self.responder = responder
        self.reject_json_mode = reject_json_mode
        self.requests: list[dict[str, Any]] = []
        self._script: deque[Reply] = deque()
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def script(self, *replies: Reply) -> None:
        with self._lock:
            self._script.extend(replies)

    @property
    def calls(self) -> int:
        return len(self.requests)

    def __enter__(self) -> "FakeOpenAI":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _next(self, body: dict[str, Any]) -> Reply:
        with self._lock:
            self.requests.append(body)
            if self._script:
                return self._script.popleft()
        if self.responder is not None:
            return self.responder(body)
        return Reply.http(500, "no scripted reply left")

    def _handler(self):
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:  # keep test output clean
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server naming
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                if not self.path.endswith("/chat/completions"):
                    return self._send(404, {"error": {"message": f"unknown path {self.path}"}})
                if fake.reject_json_mode and "response_format" in body:
                    with fake._lock:
                        fake.requests.append(body)
                    return self._send(400, {"error": {"message": "response_format is not supported by this model",
                                                      "type": "invalid_request_error"}})
                reply = fake._next(body)
                if reply.delay:
                    time.sleep(reply.delay)
                if reply.status != 200:
                    return self._send(reply.status, {"error": {"message": reply.error, "type": "server_error"}},
                                      reply.headers)
                prompt = sum(len(str(m.get("content", ""))) for m in body.get("messages", [])) // 4
                completion = len(reply.content or "") // 4
                self._send(200, {
                    "id": "chatcmpl-fake", "object": "chat.completion", "created": int(time.time()),
                    "model": body.get("model", "fake"),
                    "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": reply.content}}],
                    "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                              "total_tokens": prompt + completion},
                })

            def _send(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    for k, v in (headers or {}).items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout test)

        return Handler
