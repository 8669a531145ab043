import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
KTH = REPO / "src" / "wattsched" / "data" / "traces" / "KTH-SP2-1996-2.1-cln-first5000.swf.gz"
WATTSCHED = [sys.executable, "-m", "wattsched"]


@pytest.fixture
def write_sweep(tmp_path):
    """Write a sweep file in tmp_path from YAML text (``{trace}`` is the bundled KTH trace)."""

    def write(text: str, name: str = "sweep.yaml") -> Path:
        path = tmp_path / name
        path.write_text(textwrap.dedent(text).replace("{trace}", str(KTH)))
        return path

    return write


SMALL = """\
kind: sweep
name: small
base: {procs: 100, predictor: history}
axes:
  slices: {trace: "{trace}", count: 2, length_h: 24, warmup_h: 12, seed: 7}
  policies:
    - easy
    - {name: easy-pc, params: {check: [mean, gaussian_99]}}
  caps: ["50%", "70%"]
cap_window: {start_s: 0, end_s: 10800}
exclude:
  - {policy: easy, cap: "70%"}
cluster: {workers: 1}
"""
"""A 10-run sweep: 2 slices x (easy at 50 %, easy-pc x 2 checks x 2 caps)."""
