"""The documentation: README stays a five-minute read whose links all resolve, and the MkDocs
site under docs/ builds in strict mode (mkdocs.yml: a page missing from the nav, a broken
link or anchor, or a link mkdocs cannot resolve is a warning, and strict mode fails on it)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
README_MAX_LINES = 220
# [text](target) and ![alt](target); a target may carry a "title"
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")


def _without_code(text: str) -> str:
    """The text with fenced blocks, indented blocks and code spans removed: links shown as
    code are examples, not links."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)
    text = re.sub(r"^(?: {4}|\t).*$", "", text, flags=re.M)
    return re.sub(r"`[^`\n]*`", "", text)


def test_the_docs_site_builds_strictly(tmp_path):
    pytest.importorskip("mkdocs", reason="mkdocs is in the test extra: pip install -e '.[test]'")
    pytest.importorskip("material", reason="mkdocs-material is in the test extra: pip install -e '.[test]'")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}  # Material's banner about MkDocs 2.0
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                          cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)
    output = done.stdout + done.stderr
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{output}"
    assert (tmp_path / "site" / "index.html").is_file(), output
    # every page under docs/ was built, so none is left out of the nav (omitted_files warns too)
    for page in (ROOT / "docs").rglob("*.md"):
        rel = page.relative_to(ROOT / "docs").with_suffix("")
        built = tmp_path / "site" / ("index.html" if rel.name == "index" else f"{rel}/index.html")
        assert built.is_file(), f"docs/{page.relative_to(ROOT / 'docs')} was not built"


def test_every_docs_page_is_in_the_nav():
    yaml = pytest.importorskip("yaml")
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    assert config.get("strict") is True and config.get("docs_dir", "docs") == "docs"

    def pages(nav):
        for item in nav:
            if isinstance(item, str):
                yield item
            elif isinstance(item, dict):
                for value in item.values():
                    yield from (pages(value) if isinstance(value, list) else [value])

    in_nav = set(pages(config["nav"]))
    on_disk = {str(p.relative_to(ROOT / "docs")) for p in (ROOT / "docs").rglob("*.md")}
    assert on_disk - in_nav == set(), "pages under docs/ missing from mkdocs.yml's nav"
    assert in_nav - on_disk == set(), "nav entries with no page under docs/"


def test_the_readme_is_short_and_its_links_resolve():
    text = README.read_text()
    lines = text.splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines; the rest belongs in docs/"
    assert lines[0] == "# Ultron"
    # .ci/run runs README's second indented `python3 -m venv` line: the two commands come first
    assert lines[1].startswith("    python3 -m venv ") and lines[1].endswith(" && .venv/bin/ultron dev")
    assert lines[2].startswith("    python3 -m venv ") and lines[2].endswith(" && .venv/bin/python -m pytest")
    assert [l for l in lines if l.startswith("    python3 -m venv")][1] == lines[2]

    targets = LINK.findall(_without_code(text))
    assert targets, "README.md links to no docs page"
    broken = []
    for target in targets:
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):
            continue  # http(s), mailto: not files
        path = unquote(target.split("#", 1)[0])
        if not path:
            broken.append(f"{target}: README has no sections to point at; link to a docs/ page")
        elif not (ROOT / path).exists():
            broken.append(target)
    assert broken == [], f"README.md links to missing files: {broken}"
    docs_links = {t.split("#", 1)[0] for t in targets if t.startswith("docs/") and t.endswith(".md")}
    pages = {f"docs/{p.relative_to(ROOT / 'docs')}" for p in (ROOT / "docs").rglob("*.md")}
    assert pages - docs_links == set(), "README's list of pages misses these"
