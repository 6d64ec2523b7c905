"""The API's own documentation pages, served entirely by Ultron.

FastAPI's default ``/docs`` and ``/redoc`` load Swagger UI and ReDoc (and Google Fonts)
from a CDN, so offline they are blank pages. The same pages are rendered here with
FastAPI's own helpers, pointing at copies of those scripts that the ``fastapi-offline``
package ships (a maintained package, not files copied by hand), mounted under
``/docs/assets``.
"""

from __future__ import annotations

from importlib.resources import files

from fastapi import FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

ASSETS = "/docs/assets"


def install_docs(app: FastAPI) -> None:
    """``/docs`` (Swagger UI) and ``/redoc`` with every script, style and icon from this server.
    The app must be created with ``docs_url=None, redoc_url=None``."""
    static = files("fastapi_offline").joinpath("static")
    app.mount(ASSETS, StaticFiles(directory=str(static)), name="docs-assets")
    openapi_url = app.openapi_url or "/openapi.json"

    @app.get("/docs", include_in_schema=False)
    def swagger_ui() -> HTMLResponse:
        return get_swagger_ui_html(openapi_url=openapi_url, title=f"{app.title} API",
                                   swagger_js_url=f"{ASSETS}/swagger-ui-bundle.js",
                                   swagger_css_url=f"{ASSETS}/swagger-ui.css",
                                   swagger_favicon_url=f"{ASSETS}/favicon.png")

    @app.get("/redoc", include_in_schema=False)
    def redoc() -> HTMLResponse:
        return get_redoc_html(openapi_url=openapi_url, title=f"{app.title} API",
                              redoc_js_url=f"{ASSETS}/redoc.standalone.js",
                              redoc_favicon_url=f"{ASSETS}/favicon.png", with_google_fonts=False)
