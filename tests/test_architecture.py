"""The layering written down in pyproject.toml's import-linter contracts holds, and the
domain library has no import cycles (a cycle is how one stage starts leaning on another)."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_import_linter_contracts_are_kept():
    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or shutil.which("lint-imports")
    assert exe, "import-linter is not installed (it is in the [test] extra)"
    out = subprocess.run([exe, "--no-cache"], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stdout + out.stderr


def test_no_import_cycles_in_the_domain_library():
    grimp = pytest.importorskip("grimp")
    graph = grimp.build_graph("ultron", exclude_type_checking_imports=True)
    cycles = []
    for module in sorted(graph.modules):
        for imported in graph.find_modules_directly_imported_by(module):
            if graph.find_shortest_chain(importer=imported, imported=module):
                cycles.append((module, imported))
    assert cycles == [], cycles


def test_no_module_outgrows_a_readable_size():
    """~600 lines; the redaction catalogue is a data table and may be longer."""
    too_long = {str(p.relative_to(ROOT)): n for p in (ROOT / "ultron").rglob("*.py")
                if (n := sum(1 for _ in p.open(encoding="utf-8"))) > 650 and p.name != "catalogue.py"}
    assert too_long == {}
