"""The pure core never imports adapters or does I/O (STYLE.md §1-2)."""

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "wattsched"
PURE = ["model", "policies", "predictors", "sim/engine.py"]
ADAPTERS = ("wattsched.daemon", "wattsched.telemetry", "wattsched.agent", "wattsched.cli")
IO_MODULES = ("subprocess", "socket", "requests", "urllib", "http", "sqlite3", "time")


def pure_files():
    for entry in PURE:
        path = SRC / entry
        if path.is_file():
            yield path
        elif path.is_dir():
            yield from sorted(path.rglob("*.py"))


def imported(path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            yield node.module


def test_pure_packages_import_no_adapter_and_no_io():
    files = list(pure_files())
    assert len(files) >= 8
    for path in files:
        for name in imported(path):
            assert not name.startswith(ADAPTERS), f"{path.relative_to(SRC)} imports adapter {name}"
            top = name.split(".")[0]
            if path.name == "engine.py" and top == "time":
                continue  # the engine measures its own wall time for the report, never reads it as sim time
            assert top not in IO_MODULES, f"{path.relative_to(SRC)} imports {name}"
