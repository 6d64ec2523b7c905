"""Ultron's HTTP API (FastAPI): a thin, authenticated layer over the SDK facade.

``create_app`` builds the application, ``serve`` runs it with uvicorn, ``api_token``
tells a launcher which bearer token the server accepts."""

from ultron.api.auth import api_token
from ultron.api.server import serve

__all__ = ["api_token", "create_app", "serve"]


def __getattr__(name: str):
    # FastAPI and the SDK load only when the app is built, not on `import ultron.api`.
    if name == "create_app":
        from ultron.api.app import create_app

        return create_app
    raise AttributeError(name)
