"""The OpenADR 3.0 VEN against the 3.0 VTN stand-in (a real HTTP server on loopback), and event conversion."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from wattsched.config.daemon import OpenADR3Config
from wattsched.daemon.grid.events import OptRule
from wattsched.daemon.grid.hub import GridHub
from wattsched.daemon.grid.openadr3 import OpenADR3Ven, grid_events, parse_time_s
from wattsched.daemon.metrics import DaemonMetrics

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from grid_vtn3 import TestVTN3

T = "2026-11-23T17:00:00Z"


def ev(payloads, *, units="KW", periods=None, duration="PT10M"):
    return {"id": "e1", "programID": "p1", "modificationDateTime": T,
            "payloadDescriptors": [{"payloadType": p[0], "units": units} for p in payloads],
            "intervalPeriod": {"start": T, "duration": duration},
            "intervals": [{"id": i, "payloads": [{"type": t, "values": [v]}],
                           **({"intervalPeriod": periods[i]} if periods else {})}
                          for i, (t, v) in enumerate(payloads)]}


def test_payload_types_units_and_consecutive_intervals():
    t0 = parse_time_s(T)
    out, skipped = grid_events(ev([("IMPORT_CAPACITY_LIMIT", 0.8), ("DISPATCH_SETPOINT_RELATIVE", -0.2),
                                   ("SIMPLE", 2), ("PRICE", 0.3)]), t0 - 600, simple_levels={2: 0.25}, unit_w=1.0)
    assert [(e.start_s - t0, e.end_s - t0) for e in out] == [(0, 600), (600, 1200), (1200, 1800)]
    assert out[0].cap_w == pytest.approx(800.0) and out[1].reduction_w == pytest.approx(200.0)
    assert out[2].reduction_fraction == 0.25
    assert "PRICE 0.3 is not a payload wattsched acts on" in skipped
    (w,), _ = grid_events(ev([("IMPORT_CAPACITY_LIMIT", 900)], units="W"), t0, simple_levels={}, unit_w=1e3)
    assert w.cap_w == 900.0 and w.notice_s == t0
    (own,), _ = grid_events(ev([("DISPATCH_SETPOINT", 2)], units=None,
                               periods=[{"start": "2026-11-23T18:00:00Z", "duration": "PT1H"}]),
                            t0, simple_levels={}, unit_w=1e3)
    assert own.cap_w == 2000.0 and own.start_s - t0 == 3600 and own.end_s - own.start_s == 3600
    with pytest.raises(ValueError, match="not an ISO 8601 duration"):
        grid_events(ev([("SIMPLE", 1)], duration="10 minutes"), t0, simple_levels={1: 0.1}, unit_w=1.0)


def make(vtn, tmp_path, **kw):
    token = tmp_path / "token"
    token.write_text("s3cret-token\n")
    metrics = DaemonMetrics(CollectorRegistry())
    hub = GridHub(OptRule(min_notice_s=2), metrics)
    hub.observe(power_w=1000.0, measured_w=1000.0, idle_w=100.0)
    cfg = OpenADR3Config(**{"vtn_url": vtn.url, "ven_name": "hpc-centre", "token_file": str(token),
                            "poll_interval_s": 0.2, **kw})
    return OpenADR3Ven(cfg, hub), hub, metrics


def wait(predicate, timeout_s=10.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    raise AssertionError("timed out")


def test_polls_events_opts_reports_and_drops_deleted_events(tmp_path):
    vtn = TestVTN3().start()
    ven, hub, metrics = make(vtn, tmp_path, program="peak-shaving")
    other = vtn.add_program("other")
    pid = vtn.add_program("peak-shaving")
    vtn.add_event(other, "IMPORT_CAPACITY_LIMIT", 0.1, start_in_s=0, duration_s=600)  # not our program
    now_id = vtn.add_event(pid, "IMPORT_CAPACITY_LIMIT", 0.7, start_in_s=0.5, duration_s=600)
    ven.start()
    try:
        wait(lambda: ven.polls >= 1)
        notes = hub.drain()
        opts = [(n.target, n.outcome, n.reason) for n in notes if n.action == "dr_opt"]
        assert opts == [(f"openadr3:{now_id}", "opt_out", opts[0][2])] and "min_notice_s" in opts[0][2]
        later = vtn.add_event(pid, "DISPATCH_SETPOINT_RELATIVE", -0.3, start_in_s=3, duration_s=600)
        wait(lambda: hub.events(time.time()))
        (e,) = hub.events(time.time())
        assert e.event.key == f"openadr3:{later}" and e.event.reduction_w == pytest.approx(300.0)
        wait(lambda: vtn.reports, 10)  # posted once the event is in force
        r = vtn.reports[0]
        assert (r["eventID"], r["programID"], r["clientName"]) == (later, pid, "hpc-centre")
        assert r["resources"][0]["intervals"][0]["payloads"] == [{"type": "DEMAND", "values": [1.0]}]
        assert r["payloadDescriptors"][0]["units"] == "KW"
        assert all(q.startswith("/openadr3/3.0.1/events?programID=program-2") for m, q in vtn.requests
                   if "events" in q)
        vtn.delete_event(later)
        wait(lambda: not hub.events(time.time()))
        notes = hub.drain()
        assert ("dr_event", f"openadr3:{later}", "cancelled") in {(n.action, n.target, n.outcome) for n in notes}
        assert ("dr_report", "sent") in {(n.action, n.outcome) for n in notes}
        assert metrics.registry.get_sample_value("wattsched_dr_vtn_connected", {"source": "openadr3"}) == 1
    finally:
        ven.stop()
        vtn.stop()


def test_a_wrong_token_and_an_unreachable_vtn_are_counted_and_retried(tmp_path):
    vtn = TestVTN3(token="another-token").start()
    ven, hub, metrics = make(vtn, tmp_path)
    ven.start()
    try:
        wait(lambda: (metrics.registry.get_sample_value("wattsched_dr_vtn_failures_total",
                                                        {"source": "openadr3"}) or 0) >= 2)
        reasons = [n.reason for n in hub.drain() if n.action == "dr_vtn"]
        assert "HTTP 403 Forbidden" in reasons[0] and "missing or wrong bearer token" in reasons[0]
        vtn.token = "s3cret-token"  # fixed at the VTN: the next poll gets through
        wait(lambda: ven.polls >= 1)
        vtn.stop()
        before = metrics.registry.get_sample_value("wattsched_dr_vtn_failures_total", {"source": "openadr3"})
        wait(lambda: metrics.registry.get_sample_value("wattsched_dr_vtn_failures_total",
                                                       {"source": "openadr3"}) > before)
        assert metrics.registry.get_sample_value("wattsched_dr_vtn_connected", {"source": "openadr3"}) == 0
        assert ven._thread.is_alive()
    finally:
        ven.stop()
