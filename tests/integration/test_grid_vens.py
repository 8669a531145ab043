"""The grid VENs against real VTNs on loopback, without the test cluster: the OpenADR 2.0b VEN against openleadr's
VTN, the OpenADR 3.0 VEN against the 3.0.1 stand-in (tests/grid_vtn3.py; no 3.0 VTN is published on PyPI). They
register or poll, receive events, opt in or out, report, and count and retry an unreachable or refusing VTN."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from wattsched.config.daemon import OpenADR2Config, OpenADR3Config
from wattsched.daemon.grid.events import OptRule
from wattsched.daemon.grid.hub import GridHub
from wattsched.daemon.grid.openadr3 import OpenADR3Ven
from wattsched.daemon.metrics import DaemonMetrics

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from grid_vtn import TestVTN, free_port
from grid_vtn3 import TestVTN3

pytestmark = [pytest.mark.integration]


def needs_openleadr():
    pytest.importorskip("openleadr", reason="openleadr not installed (pip install 'wattsched[openadr]')")
    from wattsched.daemon.grid.openadr2 import OpenADR2Ven

    return OpenADR2Ven


def test_ven_registers_receives_events_opts_and_reports_to_a_real_vtn():
    OpenADR2Ven = needs_openleadr()
    vtn = TestVTN(poll_s=1, report_s=1).start()
    metrics = DaemonMetrics(CollectorRegistry())
    hub = GridHub(OptRule(min_notice_s=5), metrics)
    hub.observe(power_w=900.0, measured_w=900.0, idle_w=100.0)
    ven = OpenADR2Ven(OpenADR2Config(vtn_url=vtn.url, ven_name="hpc-test", report_interval_s=1,
                                      allow_unsigned_events=True), hub)
    ven.start()
    try:
        assert ven.registered.wait(20), "the VEN did not register"
        assert vtn.registrations == [("hpc-test", "ven-1")]
        ok = vtn.add_event(signal_name="SIMPLE", signal_type="level", payload=2, start_in_s=30, duration_s=60)
        short = vtn.add_event(signal_name="LOAD_DISPATCH", signal_type="setpoint", payload=0.5, start_in_s=2,
                              duration_s=60)
        vtn.wait(lambda: ok in vtn.opts and short in vtn.opts, 20, "opt answers")
        assert vtn.opts == {ok: "optIn", short: "optOut"}
        (live,) = hub.events(time.time())
        assert live.event.key == f"openadr2:{ok}" and live.event.reduction_w == pytest.approx(180.0)
        vtn.wait(lambda: len(vtn.reports) >= 2, 20, "telemetry reports")
        assert {v for _, v in vtn.reports} == {900.0}
        assert metrics.registry.get_sample_value("wattsched_dr_reports_total",
                                                 {"source": "openadr2", "outcome": "sent"}) >= 1
        notes = hub.drain()
        assert {(n.action, n.outcome) for n in notes} >= {("dr_event", "received"), ("dr_opt", "opt_in"),
                                                          ("dr_opt", "opt_out"), ("dr_report", "sent"),
                                                          ("dr_vtn", "connected")}
    finally:
        ven.stop()
        vtn.stop()


def test_an_unreachable_vtn_is_counted_and_retried_never_raised():
    OpenADR2Ven = needs_openleadr()
    metrics = DaemonMetrics(CollectorRegistry())
    hub = GridHub(OptRule(), metrics)
    url = f"http://127.0.0.1:{free_port()}/OpenADR2/Simple/2.0b"
    ven = OpenADR2Ven(OpenADR2Config(vtn_url=url, ven_name="hpc-test", retry_s=0.5, allow_unsigned_events=True), hub)
    ven.start()
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if sum(1 for n in hub.drain() if "could not register" in n.reason) >= 1 and \
                    (metrics.registry.get_sample_value("wattsched_dr_vtn_failures_total", {"source": "openadr2"})
                     or 0) >= 3:
                break
            time.sleep(0.2)
        else:
            raise AssertionError("no counted retries against the unreachable VTN")
        assert metrics.registry.get_sample_value("wattsched_dr_vtn_connected", {"source": "openadr2"}) == 0
        assert ven._thread.is_alive()
        vtn = TestVTN(port=int(url.split(":")[2].split("/")[0]), poll_s=1).start()  # the VTN comes up
        try:
            assert ven.registered.wait(20), "the VEN did not register once the VTN was up"
        finally:
            ven.stop()
            vtn.stop()
    finally:
        ven.stop()


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
