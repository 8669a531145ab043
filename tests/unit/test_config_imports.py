"""The config package has no import cycles: its modules import in any order in a fresh interpreter."""

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
MODULES = ["wattsched.config", "wattsched.config.daemon", "wattsched.config.platform", "wattsched.config.sim",
           "wattsched.sim.run", "wattsched.daemon.loop"]


def fresh(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)


@pytest.mark.parametrize("first", MODULES)
def test_config_modules_import_whichever_comes_first(first):
    # Only the first import of a fresh interpreter can meet a half-initialised module.
    order = [first, *(m for m in MODULES if m != first)]
    proc = fresh("; ".join(f"import {m}" for m in order))
    assert proc.returncode == 0, f"import order {order}:\n{proc.stderr}"


def test_kind_of_a_daemon_config_is_known_in_a_fresh_interpreter():
    proc = fresh(
        "import sys\n"
        "from wattsched.config import detect_config_kind\n"
        "print(detect_config_kind('deploy/examples/wattsched.yaml'))\n"
        "print('wattsched.config.daemon' in sys.modules)\n"
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["daemon", "False"]  # told from the static table, without importing the model


def test_building_the_command_line_imports_no_config_model_numpy_or_pydantic():
    # `wattsched simulate` starts its plot worker once the parser is built: what the parser imports delays it.
    proc = fresh(
        "import sys\n"
        "from wattsched.cli import build_parser\n"
        "build_parser()\n"
        "print(sorted(m for m in ('numpy', 'pydantic', 'wattsched.config') if m in sys.modules))\n"
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"
