"""Print the project's requirements (and those of the extras named) from pyproject.toml.

The image installs them in a layer of their own, before the source is copied, so that an
edit to the code does not re-download every dependency; the project itself then goes in
with --no-deps. Standard library only: it runs before anything is installed.

    python requirements.py pyproject.toml [extra,extra...]
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path


def requirements(pyproject: Path, extras: list[str]) -> list[str]:
    project = tomllib.loads(pyproject.read_text())["project"]
    optional = project.get("optional-dependencies", {})
    unknown = [name for name in extras if name not in optional]
    if unknown:
        raise SystemExit(f"unknown extras {unknown}; pyproject.toml has {sorted(optional)}")
    return [*project["dependencies"], *(req for name in extras for req in optional[name])]


if __name__ == "__main__":
    wanted = [e.strip() for e in (sys.argv[2] if len(sys.argv) > 2 else "").split(",") if e.strip()]
    print("\n".join(requirements(Path(sys.argv[1]), wanted)))
