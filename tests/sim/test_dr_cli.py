"""`wattsched simulate --policy dr --dr-events FILE` end to end, as a user runs it."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("scipy", reason="the dr policy needs scipy (extra [dr])")

TRACE = Path(__file__).resolve().parents[2] / "src/wattsched/data/traces/KTH-SP2-1996-2.1-cln-first5000.swf.gz"


def wattsched(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "wattsched", *args], capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_simulate_dr_with_an_event_file_reports_events_frequencies_and_evictions(tmp_path):
    events = tmp_path / "events.csv"
    # a long event at 45 % of the dynamic power with notice, and a short one the lowest frequencies cannot meet
    events.write_text("notice_s,start_s,end_s,cap_w,label\n40000,50000,90000,45%,evening peak\n"
                      "60000,60000,62000,8000,emergency\n")
    out = tmp_path / "run"
    r = wattsched("simulate", "--trace", str(TRACE), "--platform", "ahmed2017", "--policy", "dr",
                  "--dr-events", str(events), "--time-limit", "100000", "--out", str(out), "-q")
    assert r.returncode == 0, r.stderr
    assert any(line.split()[:1] == ["evictions"] and line.split()[-1] == "1" for line in r.stdout.splitlines())
    rows = list(csv.DictReader((out / "dr_events.csv").open()))
    assert [x["label"] for x in rows] == ["evening peak", "emergency"]
    for x in rows:  # the platform never exceeded an event's cap while it was in force
        assert float(x["max_power_w"]) <= float(x["cap_w"]) + 1e-6
    actions = list(csv.DictReader((out / "dr_actions.csv").open()))
    lowered = [a for a in actions if a["action"] == "freq" and a["freq_ghz"]]
    assert lowered and all(50000 <= float(a["t_s"]) < 90000 for a in lowered)
    assert all(float(a["freq_ghz"]) in (1.2, 1.4, 1.6, 1.8, 2.0, 2.2, 2.4) for a in lowered)
    evicted = [a for a in actions if a["action"] == "evict"]
    assert len(evicted) == 1 and float(evicted[0]["t_s"]) == 60000.0
    # outside events every job is back at its nominal frequency
    assert any(a["action"] == "freq" and not a["freq_ghz"] and float(a["t_s"]) >= 90000 for a in actions)
    page = (out / "report.html").read_text()
    assert "Demand response" in page and "evening peak" in page and "Frequencies and evictions" in page


@pytest.mark.slow
def test_at_an_event_without_notice_performance_overshoots_where_dr_does_not(tmp_path):
    events = tmp_path / "events.yaml"
    events.write_text("- {start_s: 50000, end_s: 90000, cap_w: 9000}\n")
    maxima = {}
    for policy in ("dr", "performance"):
        out = tmp_path / policy
        r = wattsched("simulate", "--trace", str(TRACE), "--platform", "ahmed2017", "--policy", policy,
                      "--dr-events", str(events), "--time-limit", "100000", "--out", str(out), "-q", "--no-report")
        assert r.returncode == 0, r.stderr
        row = next(csv.DictReader((out / "dr_events.csv").open()))
        maxima[policy] = float(row["max_power_w"]) - float(row["cap_w"])
    assert maxima["dr"] <= 1e-6 < maxima["performance"]


def test_bad_event_file_is_a_clear_error(tmp_path):
    events = tmp_path / "events.csv"
    events.write_text("start_s,end_s,cap_w\n100,50,5000\n")
    r = wattsched("simulate", "--trace", str(TRACE), "--policy", "dr", "--dr-events", str(events),
                  "--out", str(tmp_path / "r"), "-q")
    assert r.returncode == 2
    assert f"{events}:2: end_s: must be after start_s" in r.stderr


def test_models_fit_and_event_generator_from_the_command_line(tmp_path):
    r = wattsched("models", "fit", "packaged", "--platform-snippet")
    assert r.returncode == 0, r.stderr
    assert "walberla" in r.stdout and "response_classes:" in r.stdout
    out = tmp_path / "ev.yaml"
    r = wattsched("dr-events", "generate", "--span", "86400", "--ratio", "25%", "--events", "2", "--notice",
                  "600", "--seed", "3", "-o", str(out))
    assert r.returncode == 0, r.stderr
    from wattsched.sim.drevents import load_dr_events

    evs = load_dr_events(out)
    assert len(evs) == 2 and sum(e.end_s - e.start_s for e in evs) == pytest.approx(21600, abs=0.01)
