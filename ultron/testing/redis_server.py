"""A throw-away ``redis-server`` for tests and benchmarks of the Celery executor.

Runs the real binary on a free loopback port in its own temporary directory with
persistence off (no RDB snapshot, no AOF), so nothing outlives the test and two
servers never share state. Missing binary: :func:`available` is False and starting
raises :class:`RedisUnavailable` naming what to install.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Self

__all__ = ["RedisServer", "RedisUnavailable", "available", "redis_binary"]


class RedisUnavailable(RuntimeError):
    """No ``redis-server`` binary, or it did not come up."""


def redis_binary() -> str | None:
    return shutil.which("redis-server")


def available() -> bool:
    return redis_binary() is not None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _ping(port: int, timeout: float = 0.5) -> bool:
    """A raw RESP PING (no client library needed to know the server is up)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
            sock.sendall(b"*1\r\n$4\r\nPING\r\n")
            return sock.recv(64).startswith(b"+PONG")
    except OSError:
        return False


class RedisServer:
    """``with RedisServer() as redis: redis.url`` -- started on enter, stopped and removed on exit."""

    def __init__(self, startup_timeout: float = 20.0) -> None:
        self.startup_timeout = startup_timeout
        self.port = 0
        self.dir: Path | None = None
        self.process: subprocess.Popen[bytes] | None = None

    def url(self, db: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    def start(self) -> Self:
        binary = redis_binary()
        if binary is None:
            raise RedisUnavailable("redis-server is not on PATH (Debian/Ubuntu: apt-get install redis-server)")
        self.dir = Path(tempfile.mkdtemp(prefix="ultron-redis-"))
        self.port = _free_port()
        with open(self.dir / "redis.log", "wb") as log:
            self.process = subprocess.Popen(
                [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.dir),
                 "--save", "", "--appendonly", "no", "--protected-mode", "yes", "--daemonize", "no"],
                stdout=log, stderr=subprocess.STDOUT, cwd=self.dir)
        deadline = time.monotonic() + self.startup_timeout
        while not _ping(self.port):
            if self.process.poll() is not None or time.monotonic() > deadline:
                output = (self.dir / "redis.log").read_text(errors="replace")[-2000:]
                self.stop()
                raise RedisUnavailable(f"redis-server did not answer PING on port {self.port}: {output}")
            time.sleep(0.05)
        return self

    def stop(self) -> None:
        if self.process is not None:
            if self.process.poll() is None:
                self.process.terminate()
                try:
                    self.process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self.process.kill()
                    self.process.wait()
            self.process = None
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
