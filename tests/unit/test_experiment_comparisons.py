"""Each reproduction's committed COMPARISON.md is what its committed result rows give, byte for byte.

The table is computed from the rows (claims, our numbers and verdicts), never written by hand: these tests fail
when someone edits either the rows or the table alone, or changes the computation without regenerating.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"


def load(path: Path):
    sys.path.insert(0, str(path.parent))
    try:
        spec = importlib.util.spec_from_file_location(path.stem, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(path.parent))


def test_ahmed_2017_comparison_regenerates_from_the_committed_runs():
    compare = load(EXPERIMENTS / "ahmed2017" / "ahmed_compare.py")
    results = EXPERIMENTS / "ahmed2017" / "results"
    text = compare.comparison(compare.read_rows(results / "runs.csv"))
    assert text == (results / "COMPARISON.md").read_text()


@pytest.mark.parametrize(("ours", "paper", "verdict"), [
    ((5.0, 20.0), (4.4, 21.0), "holds"),     # inside the range
    ((6.6, 40.8), (4.4, 21.0), "partly"),    # overlapping it
    ((30.0, 40.0), (4.4, 21.0), "partly"),   # beyond it, the same direction
    ((-5.0, -1.0), (4.4, 21.0), "does not"),  # the opposite direction
    ((-12.9, -5.3), (-10.6, -2.9), "partly"),
])
def test_a_range_claim_holds_inside_the_papers_range_partly_in_its_direction(ours, paper, verdict):
    compare = load(EXPERIMENTS / "ahmed2017" / "ahmed_compare.py")
    assert compare._range_verdict(*ours, *paper) == verdict


def test_a_changed_row_changes_the_verdict():
    """DR above the limit in a Fig. 4 run turns that claim to "does not"."""
    compare = load(EXPERIMENTS / "ahmed2017" / "ahmed_compare.py")
    rows = compare.read_rows(EXPERIMENTS / "ahmed2017" / "results" / "runs.csv")
    for r in rows:
        if r["experiment"] == "fig4" and r["policy"] == "dr" and not r["power_error"]:
            r["time_above_cap_s"] = 60.0
    first = compare.claims(rows)[0]
    assert first[1] == "under DR the power never goes above the limit" and first[3:] == ["60 s above", "does not"]
