"""OpenADR 2.0b event conversion, the opt rule and the grid hub (the VEN against a real VTN is in
tests/integration/test_grid_vens.py)."""

from __future__ import annotations

import datetime as dt

import pytest
from prometheus_client import CollectorRegistry

from wattsched.daemon.grid.events import GridEvent, OptRule, opt_decision
from wattsched.daemon.grid.hub import GridHub
from wattsched.daemon.grid.openadr2 import grid_events  # openleadr itself is imported by the VEN only
from wattsched.daemon.metrics import DaemonMetrics

T0 = dt.datetime(2026, 11, 23, 17, 0, tzinfo=dt.timezone.utc)


def event(name="SIMPLE", kind="level", payloads=(2.0,), duration_s=600, status="far", mod=0):
    return {
        "event_descriptor": {"event_id": "ev1", "modification_number": mod, "event_status": status},
        "active_period": {"dtstart": T0, "duration": dt.timedelta(seconds=duration_s * len(payloads))},
        "event_signals": [{"signal_name": name, "signal_type": kind, "intervals": [
            {"duration": dt.timedelta(seconds=duration_s), "signal_payload": p, "uid": i}
            for i, p in enumerate(payloads)]}],
    }


def test_simple_levels_become_reductions_per_interval():
    now = T0.timestamp() - 900
    events, skipped = grid_events(event(payloads=(1.0, 3.0, 0.0)), now, simple_levels={1: 0.1, 3: 5000.0},
                                  load_dispatch_unit_w=1000)
    assert skipped == ""
    assert [(e.start_s - T0.timestamp(), e.end_s - T0.timestamp()) for e in events] == [(0, 600), (600, 1200)]
    assert (events[0].reduction_fraction, events[0].reduction_w) == (0.1, None)
    assert (events[1].reduction_fraction, events[1].reduction_w) == (None, 5000.0)
    assert [e.key for e in events] == ["openadr2:ev1", "openadr2:ev1#1"]
    assert all(e.notice_s == now for e in events)


def test_load_dispatch_setpoint_and_delta_and_unknown_signals():
    now = T0.timestamp() - 60
    (cap,), _ = grid_events(event("LOAD_DISPATCH", "setpoint", (0.8,)), now, simple_levels={},
                            load_dispatch_unit_w=1000)
    assert cap.cap_w == pytest.approx(800.0)
    (red,), _ = grid_events(event("LOAD_DISPATCH", "delta", (-0.25,)), now, simple_levels={}, load_dispatch_unit_w=1e3)
    assert red.reduction_w == pytest.approx(250.0)
    none, skipped = grid_events(event("ELECTRICITY_PRICE", "price", (0.3,)), now, simple_levels={},
                                load_dispatch_unit_w=1e3)
    assert none == [] and "ELECTRICITY_PRICE price is not a signal wattsched acts on" in skipped
    none, skipped = grid_events(event(payloads=(2.0,)), now, simple_levels={1: 0.1}, load_dispatch_unit_w=1e3)
    assert none == [] and "SIMPLE level 2 has no reduction" in skipped


@pytest.mark.parametrize(("now", "idle", "rule", "opted", "why"), [
    (0, 100, OptRule(), True, "limit 700 W reachable"),
    (500, 100, OptRule(min_notice_s=300), False, "notice 100 s is shorter than demand_response.opt.min_notice_s"),
    (0, 100, OptRule(max_duration_s=300), False, "lasts 600 s, longer than demand_response.opt.max_duration_s"),
    (0, 800, OptRule(), False, "below the idle power of the managed nodes (800 W)"),
    (0, 800, OptRule(below_idle="opt_in"), True, "below_idle: opt_in"),
    (1300, 100, OptRule(), False, "already over"),
])
def test_opt_rule(now, idle, rule, opted, why):
    e = GridEvent("openadr2", "e", 0, 0.0, 600.0, 1200.0, reduction_w=300.0)
    got, reason = opt_decision(e, now, baseline_w=1000.0, idle_w=idle, rule=rule)
    assert got is opted and why in reason


def test_hub_keeps_one_decision_per_modification_and_audits():
    clock = [1000.0]
    hub = GridHub(OptRule(min_notice_s=60), DaemonMetrics(CollectorRegistry()), clock=lambda: clock[0])
    hub.observe(power_w=1000.0, measured_w=1000.0, idle_w=200.0)
    e = GridEvent("openadr2", "x", 0, 1000.0, 1600.0, 2200.0, reduction_fraction=0.2, signal="SIMPLE level 2")
    assert hub.offer([e])[0] is True
    hub.observe(power_w=500.0, measured_w=500.0, idle_w=200.0)
    assert hub.offer([e])[0] is True  # the same modification: the first answer and the first baseline
    (got,) = hub.events(1500.0)
    assert got.event.reduction_w == pytest.approx(200.0) and got.baseline_w == 1000.0
    notes = hub.drain()
    assert [(n.action, n.outcome) for n in notes] == [("dr_event", "received"), ("dr_opt", "opt_in")]
    late = GridEvent("openadr2", "x", 1, 1580.0, 1600.0, 2200.0, cap_w=800.0, signal="LOAD_DISPATCH")
    clock[0] = 1580.0
    assert hub.offer([late])[0] is False  # modified with 20 s notice: opted out
    assert hub.events(1580.0) == []
    assert [(n.action, n.outcome) for n in hub.drain()] == [("dr_event", "updated"), ("dr_opt", "opt_out")]
    assert hub.metrics.registry.get_sample_value("wattsched_dr_opt_decisions_total",
                                                 {"source": "openadr2", "decision": "opt_out"}) == 1


def test_an_interval_without_duration_is_skipped_and_the_others_kept():
    e = event(payloads=(1.0, 2.0))
    e["event_signals"][0]["intervals"][1]["duration"] = dt.timedelta(0)
    out, skipped = grid_events(e, T0.timestamp() - 60, simple_levels={1: 0.1, 2: 0.2}, load_dispatch_unit_w=1e3)
    assert [x.signal for x in out] == ["SIMPLE level 1"] and "interval 1 of SIMPLE has no duration" in skipped


def test_events_taken_part_in_survive_a_restart_through_the_state_store(tmp_path):
    from wattsched.config.daemon import DaemonConfig
    from wattsched.daemon.loop import Daemon
    from wattsched.daemon.notify import Notifier
    from wattsched.daemon.simcluster import SimCluster

    def daemon():
        cfg = DaemonConfig(state_dir=tmp_path / "state", slurm={"backend": "sim"}, sim={"speedup": 1.0})
        sim = SimCluster.from_config(cfg.sim)
        return Daemon(cfg, sim, metrics=DaemonMetrics(CollectorRegistry()), notifier=Notifier(environ={}))

    d = daemon()
    now = d.backend.read_state().read_at
    d.grid.observe(power_w=5000.0, measured_w=5000.0, idle_w=100.0)
    e = GridEvent("openadr3", "ev9", 0, now, now + 600, now + 1800, cap_w=4000.0, signal="IMPORT_CAPACITY_LIMIT 4")
    assert d.grid.offer([e])[0]
    d.cycle()
    d.store.close()
    again = daemon()  # a restart: the VEN has not heard from the VTN yet
    (got,) = again.grid.events(now + 60)
    assert got.event == e and got.baseline_w == 5000.0
    again.cycle()
    assert [n.event.label for n in again.last_view.snapshot.dr_events] == ["openadr3:ev9 (IMPORT_CAPACITY_LIMIT 4)"]
    again.store.close()


def test_a_vtn_without_fingerprint_is_refused_unless_unsigned_events_are_allowed(tmp_path, caplog):
    import yaml

    from wattsched.config import load_config
    from wattsched.config.daemon import DaemonConfig
    from wattsched.errors import ConfigError

    path = tmp_path / "d.yaml"
    block = {"vtn_url": "https://vtn.example/OpenADR2/Simple/2.0b", "ven_name": "hpc"}

    def load(**extra):
        path.write_text(yaml.safe_dump({"kind": "daemon", "policy": "easy", "slurm": {"backend": "cli"},
                                        "demand_response": {"openadr2": {**block, **extra}}}))
        return load_config(path, DaemonConfig).demand_response.openadr2

    with pytest.raises(ConfigError, match=r"d.yaml:\d+: demand_response.openadr2.vtn_fingerprint: required: without "
                       r"it events signed by anyone \(or unsigned\) are obeyed.*allow_unsigned_events: true"):
        load()
    assert load(vtn_fingerprint="8E:1B:00").vtn_fingerprint == "8E:1B:00"
    allowed = load(allow_unsigned_events=True)
    pytest.importorskip("openleadr")
    from wattsched.daemon.grid.openadr2 import OpenADR2Ven

    OpenADR2Ven(allowed, GridHub(OptRule(), DaemonMetrics(CollectorRegistry())))
    assert "no vtn_fingerprint (allow_unsigned_events: true): events from https://vtn.example" in caplog.text


def test_a_failed_report_logs_one_line_with_the_reason_and_the_payload_at_debug_only(caplog):
    """openleadr's client against a loopback VTN that answers 500: one warning naming the status and the VTN's
    words; the XML payload only in debug records; the report audited and counted as failed."""
    import asyncio
    import logging
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    pytest.importorskip("openleadr")
    from wattsched.config.daemon import OpenADR2Config
    from wattsched.daemon.grid.openadr2 import OpenADR2Ven

    class Broken(BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            body = b"<html><body><h1>VTN database unavailable</h1></body></html>"
            self.send_response(500)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Broken)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/OpenADR2/Simple/2.0b"
    metrics = DaemonMetrics(CollectorRegistry())
    hub = GridHub(OptRule(), metrics)
    ven = OpenADR2Ven(OpenADR2Config(vtn_url=url, ven_name="hpc", allow_unsigned_events=True), hub)
    payload = ("<?xml version='1.0' encoding='UTF-8'?><oadrPayload><oadrSignedObject><oadrUpdateReport>"
               "<value>812.0</value>" + "<pad>x</pad>" * 200 + "</oadrUpdateReport></oadrSignedObject></oadrPayload>")

    async def send():
        client = ven._client()
        try:
            return await client._perform_request("EiReport", payload.encode())
        finally:
            await client.client_session.close()

    caplog.set_level(logging.DEBUG)
    caplog.set_level(logging.DEBUG, logger="wattsched")  # a daemon command run earlier in-process set it to INFO
    caplog.clear()  # the warning about the missing fingerprint
    try:
        result = asyncio.run(send())
    finally:
        server.shutdown()
    assert result[0] is None
    loud = [r for r in caplog.records if r.levelno >= logging.INFO]
    assert [r.getMessage() for r in loud] == [
        f"openadr2 VTN: report to {url} failed: HTTP 500: VTN database unavailable (retrying)"]
    assert not any("oadrPayload" in r.getMessage() for r in loud)
    debug = "\n".join(r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG)
    assert "<oadrUpdateReport><value>812.0</value>" in debug  # the payload, for whoever turns debug on
    assert metrics.registry.get_sample_value("wattsched_dr_reports_total",
                                             {"source": "openadr2", "outcome": "failed"}) == 1
    assert metrics.registry.get_sample_value("wattsched_dr_vtn_connected", {"source": "openadr2"}) == 0
    notes = hub.drain()
    assert [(n.action, n.outcome) for n in notes] == [("dr_report", "failed"), ("dr_vtn", "failed")]
    assert notes[0].reason == f"the report could not be delivered to {url}: HTTP 500: VTN database unavailable"


def test_the_last_contact_with_the_vtn_is_exported_in_wall_clock_time():
    import time

    metrics = DaemonMetrics(CollectorRegistry())
    hub = GridHub(OptRule(), metrics, clock=lambda: 5e9)  # a simulated clock far ahead: not used for this
    hub.vtn_contact("openadr3")
    seen = metrics.registry.get_sample_value("wattsched_dr_vtn_last_contact_timestamp_seconds", {"source": "openadr3"})
    assert time.time() - 5 < seen <= time.time()
    assert metrics.registry.get_sample_value("wattsched_dr_vtn_connected", {"source": "openadr3"}) == 1
