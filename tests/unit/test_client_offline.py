"""ultron.client without a database: where it finds the server and the token, and which
calls it retries when the connection breaks (against a real socket that hangs up)."""

from __future__ import annotations

import asyncio
import socket
import threading

import pytest

from ultron.client import (
    TOKEN_FILE, AsyncUltronClient, UltronClient, UltronConnectionError, default_base_url, default_token,
)
from ultron.settings import Settings


def test_the_base_url_defaults_to_ultron_api_url_else_the_serve_address(tmp_path):
    assert default_base_url(Settings.from_env({"ULTRON_HOME": str(tmp_path)})) == "http://127.0.0.1:8765"
    assert default_base_url(Settings.from_env({"ULTRON_API_PORT": "9001", "ULTRON_API_HOST": "0.0.0.0"})) \
        == "http://127.0.0.1:9001"
    assert default_base_url(Settings.from_env({"ULTRON_API_HOST": "::1"})) == "http://[::1]:8765"
    settings = Settings.from_env({"ULTRON_API_URL": " https://ultron.example.com/api/ "})
    assert default_base_url(settings) == "https://ultron.example.com/api"
    with UltronClient(settings=settings, token="t") as client:
        assert client.base_url == "https://ultron.example.com/api"


def test_the_token_file_is_the_local_servers_and_stays_local(tmp_path):
    from ultron.api.auth import TOKEN_FILE as SERVER_TOKEN_FILE

    assert TOKEN_FILE == SERVER_TOKEN_FILE
    settings = Settings.from_env({"ULTRON_HOME": str(tmp_path)})
    assert default_token("http://127.0.0.1:8765", settings) is None
    (tmp_path / "api_token").write_text("local-secret-token\n")
    assert default_token("http://127.0.0.1:8765", settings) == "local-secret-token"
    assert default_token("http://localhost:8765", settings) == "local-secret-token"
    assert default_token("http://[::1]:8765", settings) == "local-secret-token"
    assert default_token("https://ultron.example.com", settings) is None  # never sent to another machine
    explicit = Settings.from_env({"ULTRON_HOME": str(tmp_path), "ULTRON_API_TOKEN": "env-token"})
    assert default_token("https://ultron.example.com", explicit) == "env-token"


class HangUp:
    """A TCP server that accepts and closes every connection, counting them."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.connections = 0
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            conn.recv(65536)
            conn.close()

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def hangup():
    server = HangUp()
    yield server
    server.close()


def test_reads_are_retried_and_writes_are_not(hangup):
    with UltronClient(hangup.url, token="t", timeout=5, retries=3) as client:
        with pytest.raises(UltronConnectionError) as read:
            client.stats()
        assert hangup.connections == 3 and read.value.status is None and hangup.url in str(read.value)
        hangup.connections = 0
        with pytest.raises(UltronConnectionError):
            client.upload_memory("x")
        assert hangup.connections == 1


def test_the_async_client_retries_reads_only(hangup):
    async def drive() -> None:
        async with AsyncUltronClient(hangup.url, token="t", timeout=5, retries=2) as client:
            with pytest.raises(UltronConnectionError):
                await client.get_skill("x")
            assert hangup.connections == 2
            with pytest.raises(UltronConnectionError):
                await client.feedback(skill="x", helpful=True)
            assert hangup.connections == 3

    asyncio.run(drive())


def test_a_closed_port_is_a_connection_error():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with UltronClient(f"http://127.0.0.1:{port}", token="t", retries=1) as client, \
            pytest.raises(UltronConnectionError, match="cannot reach the Ultron API"):
        client.health()


def test_the_openapi_document_builds_without_a_duplicate_operation_id_warning(tmp_path):
    """GET and HEAD /health once shared an operation id: FastAPI warned on the first /openapi.json."""
    import warnings

    from ultron.api.app import create_app
    from ultron.settings import Settings

    app = create_app(Settings.from_env({"ULTRON_HOME": str(tmp_path)}), client=object(), token="t" * 24)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        spec = app.openapi()
    assert not [w for w in caught if "Duplicate Operation ID" in str(w.message)]
    ops = spec["paths"]["/health"]
    assert ops["get"]["operationId"] != ops["head"]["operationId"]


def test_the_api_docs_pages_load_every_asset_from_the_server_itself(tmp_path):
    """/docs and /redoc were blank offline: their scripts came from a CDN. Every script,
    style, font and icon they name must now be a path on this server, and be served."""
    import re

    from fastapi.testclient import TestClient

    from ultron.api.app import create_app
    from ultron.settings import Settings

    app = create_app(Settings.from_env({"ULTRON_HOME": str(tmp_path)}), client=object(), token="t" * 24)
    http = TestClient(app)  # no lifespan: the pages need no store
    for page in ("/docs", "/redoc"):
        html = http.get(page)
        assert html.status_code == 200
        assets = re.findall(r'(?:src|href)="([^"]+)"', html.text) + re.findall(r"url: '([^']+)'", html.text)
        assert assets, html.text
        assert not [a for a in assets if "://" in a or a.startswith("//")], (page, assets)
        for asset in assets:
            if asset != "/openapi.json":
                assert http.get(asset).status_code == 200, asset
        assert "fonts.googleapis" not in html.text and "cdn.jsdelivr" not in html.text
