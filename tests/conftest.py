import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

TRACES = Path(os.environ.get("WATTSCHED_TRACES", Path(__file__).resolve().parents[1].parent / "shared" / "traces"))


@pytest.fixture
def traces_dir() -> Path:
    if not TRACES.is_dir():
        pytest.skip(f"real traces not found at {TRACES} (set WATTSCHED_TRACES to the shared/traces directory)")
    return TRACES
