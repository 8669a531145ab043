"""OpenADR 3.0 event conversion (the VEN against the 3.0 VTN stand-in is in tests/integration/test_grid_vens.py)."""

from __future__ import annotations

import pytest

from wattsched.daemon.grid.openadr3 import grid_events, parse_time_s

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


def test_the_bearer_token_is_not_sent_in_clear_nor_after_a_redirect(tmp_path):
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from prometheus_client import CollectorRegistry

    from wattsched.config.daemon import OpenADR3Config
    from wattsched.daemon.grid.events import OptRule
    from wattsched.daemon.grid.hub import GridHub
    from wattsched.daemon.grid.openadr3 import OpenADR3Ven, VTNError
    from wattsched.daemon.metrics import DaemonMetrics

    token = tmp_path / "token"
    token.write_text("s3cret-token\n")
    with pytest.raises(ValueError, match=r"vtn_url: http://vtn.example/api would send the bearer token of "
                       r"token_file in clear text .*allow_insecure_http: true"):
        OpenADR3Config(vtn_url="http://vtn.example/api", ven_name="hpc", token_file=token)
    assert OpenADR3Config(vtn_url="http://vtn.example/api", ven_name="hpc", token_file=token,
                          allow_insecure_http=True).allow_insecure_http
    assert OpenADR3Config(vtn_url="http://vtn.example/api", ven_name="hpc").token_file is None  # no token: no secret

    seen = []

    class Elsewhere(BaseHTTPRequestHandler):
        def do_GET(self):
            seen.append(self.headers.get("Authorization"))
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"[]")

        def log_message(self, *args):
            pass

    other = ThreadingHTTPServer(("127.0.0.1", 0), Elsewhere)

    class Redirect(Elsewhere):
        def do_GET(self):
            self.send_response(302)
            self.send_header("Location", f"http://127.0.0.1:{other.server_address[1]}{self.path}")
            self.send_header("Content-Length", "0")
            self.end_headers()

    vtn = ThreadingHTTPServer(("127.0.0.1", 0), Redirect)
    for s in (other, vtn):
        threading.Thread(target=s.serve_forever, daemon=True).start()
    try:
        cfg = OpenADR3Config(vtn_url=f"http://127.0.0.1:{vtn.server_address[1]}/api", ven_name="hpc",
                             token_file=token)
        ven = OpenADR3Ven(cfg, GridHub(OptRule(), DaemonMetrics(CollectorRegistry())))
        with pytest.raises(VTNError, match=r"HTTP 302 .*redirected to http://127.0.0.1:\d+/api/programs; redirects "
                           r"are not followed.*demand_response.openadr3.vtn_url"):
            ven._get("/programs")
        assert seen == []
    finally:
        for s in (other, vtn):
            s.shutdown()
            s.server_close()
