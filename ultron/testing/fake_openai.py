"""A real local HTTP server speaking the OpenAI chat-completions protocol, scripted.

Tests and benchmarks point the real ``openai`` client at it (never patching the
client): each request takes the next scripted reply — JSON, prose-wrapped JSON,
garbage, an empty answer, an HTTP error status, or a stall past the client's
timeout — and falls back to a responder function when the script is empty.
Every request is recorded, so callers can count calls and tokens.

It also answers ``POST .../embeddings``: by default with deterministic vectors (the
:class:`~ultron.embeddings.hashing.HashingEmbedder` of each input, ``embedding_dim``
wide unless the request asks for ``dimensions``). Embedding requests take scripted
replies from the same queue: ``Reply.http``/``Reply.stall`` fail or delay them,
``Reply.raw(payload)`` sends any body verbatim (wrong counts, wrong dimensions, ...);
``Reply.body(bytes, content_type)`` sends bytes that need not be JSON at all (a proxy's
HTML page, a body cut off mid-JSON, random bytes), to either endpoint;
other content replies just mean "the default vectors". They are recorded in
``requests`` like chat requests, and also in ``embedding_requests``.
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
    #: When set, this JSON body is sent verbatim (with ``status``) instead of a built answer.
    payload: Any = None
    #: When set, these bytes are the whole body (with ``status`` and ``content_type``).
    data: bytes | None = None
    content_type: str = "application/json"
    #: the chat answer's ``finish_reason`` ("length": cut off by the token limit)
    finish_reason: str = "stop"

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
        return cls(content=base.content, status=base.status, error=base.error, delay=seconds, payload=base.payload,
                   data=base.data, content_type=base.content_type, finish_reason=base.finish_reason)

    @classmethod
    def body(cls, data: bytes | str, content_type: str = "application/json", status: int = 200) -> "Reply":
        """Send ``data`` as the whole body, JSON or not (HTML pages, truncated JSON, noise)."""
        return cls(status=status, data=data.encode() if isinstance(data, str) else data, content_type=content_type)

    @classmethod
    def html(cls, page: str = "<html><body><h1>502 Bad Gateway</h1></body></html>") -> "Reply":
        """A proxy's error page, sent with status 200."""
        return cls.body(page, "text/html")

    @classmethod
    def cut(cls, value: Any, keep: float = 0.5) -> "Reply":
        """A complete chat answer for ``value`` whose body is cut off after ``keep`` of its bytes."""
        whole = json.dumps({"id": "chatcmpl-fake", "object": "chat.completion", "created": 0, "model": "fake",
                            "choices": [{"index": 0, "finish_reason": "stop",
                                         "message": {"role": "assistant", "content": json.dumps(value)}}]})
        return cls.body(whole[: max(1, int(len(whole) * keep))])

    @classmethod
    def raw(cls, payload: Any, status: int = 200, **headers: str) -> "Reply":
        """Send ``payload`` as the whole response body, e.g. a malformed embeddings answer."""
        return cls(status=status, payload=payload, headers=headers)


Responder = Callable[[dict[str, Any]], "Reply"]


class FakeOpenAI:
    def __init__(self, responder: Responder | None = None, *, reject_json_mode: bool = False,
                 embedding_dim: int = 384) -> None:
        self.responder = responder
        self.reject_json_mode = reject_json_mode
        self.embedding_dim = embedding_dim
        self.requests: list[dict[str, Any]] = []
        self.embedding_requests: list[dict[str, Any]] = []
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

    def _next_embedding(self, body: dict[str, Any]) -> Reply | None:
        """The next scripted reply for an embeddings request; None = the default vectors."""
        with self._lock:
            self.requests.append(body)
            self.embedding_requests.append(body)
            if self._script:
                return self._script.popleft()
        return None

    def embeddings_answer(self, body: dict[str, Any]) -> dict[str, Any]:
        """The default answer: one deterministic unit vector per input, in order."""
        import base64

        import numpy as np

        from ultron.embeddings.hashing import HashingEmbedder

        raw = body.get("input", [])
        if isinstance(raw, str) or (isinstance(raw, list) and raw and isinstance(raw[0], int)):
            raw = [raw]  # one text, or one pre-tokenised input
        texts = [t if isinstance(t, str) else json.dumps(t) for t in raw]
        dim = int(body.get("dimensions") or self.embedding_dim)
        vectors = HashingEmbedder(dim).embed(texts) if texts else np.zeros((0, dim), np.float32)
        as_base64 = body.get("encoding_format") == "base64"
        data = [{"object": "embedding", "index": i,
                 "embedding": (base64.b64encode(v.astype("<f4").tobytes()).decode() if as_base64
                               else [float(x) for x in v])}
                for i, v in enumerate(vectors)]
        tokens = sum(len(t) // 4 + 1 for t in texts)
        return {"object": "list", "data": data, "model": body.get("model", "fake"),
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}

    def _handler(self):
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:  # keep test output clean
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server naming
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                if self.path.endswith("/embeddings"):
                    return self._embeddings(body)
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
                if reply.data is not None:
                    return self._send_bytes(reply.status, reply.data, reply.content_type, reply.headers)
                if reply.payload is not None:
                    return self._send(reply.status, reply.payload, reply.headers)
                if reply.status != 200:
                    return self._send(reply.status, {"error": {"message": reply.error, "type": "server_error"}},
                                      reply.headers)
                prompt = sum(len(str(m.get("content", ""))) for m in body.get("messages", [])) // 4
                completion = len(reply.content or "") // 4
                self._send(200, {
                    "id": "chatcmpl-fake", "object": "chat.completion", "created": int(time.time()),
                    "model": body.get("model", "fake"),
                    "choices": [{"index": 0, "finish_reason": reply.finish_reason,
                                 "message": {"role": "assistant", "content": reply.content}}],
                    "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                              "total_tokens": prompt + completion},
                })

            def _embeddings(self, body: dict[str, Any]) -> None:
                reply = fake._next_embedding(body)
                if reply is not None and reply.delay:
                    time.sleep(reply.delay)
                if reply is not None and reply.data is not None:
                    return self._send_bytes(reply.status, reply.data, reply.content_type, reply.headers)
                if reply is not None and reply.payload is not None:
                    return self._send(reply.status, reply.payload, reply.headers)
                if reply is not None and reply.status != 200:
                    return self._send(reply.status, {"error": {"message": reply.error, "type": "server_error"}},
                                      reply.headers)
                self._send(200, fake.embeddings_answer(body))

            def _send(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
                self._send_bytes(status, json.dumps(payload).encode(), "application/json", headers)

            def _send_bytes(self, status: int, data: bytes, content_type: str,
                            headers: dict[str, str] | None = None) -> None:
                try:
                    self.send_response(status)
                    self.send_header("content-type", content_type)
                    self.send_header("content-length", str(len(data)))
                    for k, v in (headers or {}).items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout test)

        return Handler
