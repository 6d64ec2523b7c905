"""``python -m ultron.api [--host H] [--port P]``: the API server without the full CLI
(the tests start it this way; ``ultron serve`` does the same)."""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ultron.api", description="Serve Ultron's HTTP API.")
    parser.add_argument("--host", default=None, help="listen address (default ULTRON_API_HOST or 127.0.0.1)")
    parser.add_argument("--port", type=int, default=None, help="port (default ULTRON_API_PORT or 8765)")
    args = parser.parse_args(argv)
    # uvicorn configures its own loggers; ours say why a request failed, the rest stay quiet.
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s:     %(name)s: %(message)s")
    logging.getLogger("ultron").setLevel(logging.INFO)

    from ultron.api.server import serve
    from ultron.db.database import DatabaseError
    from ultron.settings import Settings, SettingsError

    try:
        serve(Settings.from_env(), args.host, args.port)
    except (SettingsError, DatabaseError) as exc:
        print(f"ultron serve: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
