"""The project a session works in, from its working directory: the repository's root,
remote and branch, and what kind of project it is.

A session start has no task yet, only a place; this turns the place into a description
that search can match against what was learned there before.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

#: Files whose presence says what a project is built with; cheap to test, no reads.
_MARKERS = (
    ("pyproject.toml", "Python"), ("setup.py", "Python"), ("requirements.txt", "Python"),
    ("package.json", "JavaScript Node.js"), ("tsconfig.json", "TypeScript"), ("Cargo.toml", "Rust"),
    ("go.mod", "Go"), ("pom.xml", "Java Maven"), ("build.gradle", "Java Gradle"), ("Gemfile", "Ruby"),
    ("composer.json", "PHP"), ("Dockerfile", "Docker"), ("docker-compose.yml", "Docker Compose"),
    ("compose.yaml", "Docker Compose"), ("Makefile", "make"), (".github/workflows", "GitHub Actions CI"),
    ("dbt_project.yml", "dbt"), ("terraform.tf", "Terraform"), ("main.tf", "Terraform"),
    ("Chart.yaml", "Helm Kubernetes"),
)
_CREDENTIALS = re.compile(r"//[^/@\s]+@")


@dataclass(frozen=True)
class Project:
    cwd: Path
    root: Path | None = None
    remote: str | None = None
    branch: str | None = None
    kinds: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        if self.remote:
            tail = self.remote.rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1]
            return tail[:-4] if tail.endswith(".git") else tail
        return (self.root or self.cwd).name

    def task(self) -> str:
        """What a session here is likely about, in words search can use."""
        parts = [f"Working in the {self.name} project"]
        if self.kinds:
            parts.append(f"({', '.join(self.kinds)})")
        if self.branch and self.branch not in ("main", "master", "HEAD"):
            parts.append(f"on branch {self.branch}")
        return " ".join(parts)


def _git_dirs(here: Path) -> tuple[Path, Path, Path] | None:
    """(work tree root, git dir, common git dir) of the repository holding ``here``.

    Read from the files themselves rather than three ``git`` processes (~10 ms each) or a
    git library (slower to import than the whole hook may take): a hook runs inside the
    agent's start-up. A worktree's ``.git`` file points at its git dir, whose ``commondir``
    holds the shared config."""
    for directory in (here, *here.parents):
        dot = directory / ".git"
        if dot.is_dir():
            return directory, dot, dot
        if dot.is_file():
            text = dot.read_text("utf-8", errors="replace").strip()
            if not text.startswith("gitdir:"):
                return None
            gitdir = (directory / text[len("gitdir:"):].strip()).resolve()
            common = gitdir
            if (gitdir / "commondir").is_file():
                common = (gitdir / (gitdir / "commondir").read_text("utf-8").strip()).resolve()
            return directory, gitdir, common
    return None


def _branch(gitdir: Path) -> str | None:
    """The checked-out branch (also of a repository with no commit yet); None when detached."""
    head = (gitdir / "HEAD").read_text("utf-8", errors="replace").strip()
    prefix = "ref: refs/heads/"
    return head[len(prefix):] if head.startswith(prefix) else None


def _origin_url(common: Path) -> str | None:
    """``remote.origin.url`` from the repository's config (git's INI dialect: the first
    ``url`` under ``[remote "origin"]``)."""
    try:
        lines = (common / "config").read_text("utf-8", errors="replace").splitlines()
    except OSError:
        return None
    inside = False
    for line in lines:
        stripped = line.strip()
        if stripped.startswith("["):
            inside = re.fullmatch(r'\[\s*remote\s+"origin"\s*\]', stripped) is not None
        elif inside:
            key, sep, value = stripped.partition("=")
            if sep and key.strip().lower() == "url":
                return value.strip().strip('"') or None
    return None


def find_project(cwd: str | os.PathLike[str] | None) -> Project:
    """The project at ``cwd``: outside a repository only the directory and its kinds."""
    here = Path(cwd or os.getcwd()).expanduser()
    if not here.is_dir():
        return Project(cwd=here)
    try:
        found = _git_dirs(here.resolve())
        root = found[0] if found else None
        branch = _branch(found[1]) if found else None
        remote = _origin_url(found[2]) if found else None
    except OSError:
        root, branch, remote = None, None, None
    if remote:
        remote = _CREDENTIALS.sub("//", remote)  # a token in the URL is nobody's business
    base = root or here
    kinds = tuple(dict.fromkeys(kind for marker, kind in _MARKERS if (base / marker).exists()))
    return Project(cwd=here, root=root, remote=remote, branch=branch, kinds=kinds)
