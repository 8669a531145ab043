"""A small OpenADR 3.0 VTN stand-in for the grid tests: a real HTTP server on loopback implementing the part of
the OpenADR 3.0.1 API (``openadr3.yaml``) that wattsched's VEN uses: ``GET /programs``, ``GET /events`` (with
``programID``), ``POST /reports`` (201 with the stored report), bearer-token authorization (403 otherwise).

No OpenADR 3.0 VTN is published on PyPI, so the tests serve these endpoints themselves.
"""

from __future__ import annotations

import datetime as dt
import json
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def rfc3339(t: dt.datetime) -> str:
    return t.astimezone(dt.timezone.utc).isoformat().replace("+00:00", "Z")


class TestVTN3:
    """``start()``; ``add_program``, ``add_event``, ``delete_event``; read ``reports``; ``stop()``."""

    __test__ = False

    def __init__(self, token: str | None = "s3cret-token"):
        self.token = token
        self.programs: list[dict] = []
        self.events: list[dict] = []
        self.reports: list[dict] = []
        self.requests: list[tuple[str, str]] = []
        self.lock = threading.Lock()
        vtn = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(self, code: int, body) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _authorized(self) -> bool:
                if vtn.token is None or self.headers.get("Authorization") == f"Bearer {vtn.token}":
                    return True
                self._send(403, {"type": "about:blank", "title": "Forbidden", "status": 403,
                                 "detail": "missing or wrong bearer token"})
                return False

            def do_GET(self):
                url = urllib.parse.urlsplit(self.path)
                vtn.requests.append(("GET", self.path))
                if not self._authorized():
                    return
                query = urllib.parse.parse_qs(url.query)
                with vtn.lock:
                    if url.path == "/openadr3/3.0.1/programs":
                        return self._send(200, vtn.programs)
                    if url.path == "/openadr3/3.0.1/events":
                        wanted = query.get("programID")
                        return self._send(200, [e for e in vtn.events if not wanted or e["programID"] in wanted])
                self._send(404, {"title": "Not Found", "status": 404})

            def do_POST(self):
                vtn.requests.append(("POST", self.path))
                if not self._authorized():
                    return
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                if self.path == "/openadr3/3.0.1/reports":
                    if not body.get("clientName") or not isinstance(body.get("resources"), list):
                        return self._send(400, {"title": "Bad Request", "status": 400,
                                                "detail": "clientName and resources are required"})
                    with vtn.lock:
                        body = {**body, "id": f"report-{len(vtn.reports) + 1}", "objectType": "REPORT",
                                "createdDateTime": rfc3339(dt.datetime.now(dt.timezone.utc))}
                        vtn.reports.append(body)
                    return self._send(201, body)
                self._send(404, {"title": "Not Found", "status": 404})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/openadr3/3.0.1"

    def start(self) -> TestVTN3:
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True, name="test-vtn3")
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def add_program(self, name: str) -> str:
        with self.lock:
            pid = f"program-{len(self.programs) + 1}"
            self.programs.append({"id": pid, "objectType": "PROGRAM", "programName": name,
                                  "createdDateTime": rfc3339(dt.datetime.now(dt.timezone.utc))})
            return pid

    def add_event(self, program_id: str, payload_type: str, value: float, *, start_in_s: float, duration_s: float,
                  units: str | None = "KW", name: str = "peak") -> str:
        now = dt.datetime.now(dt.timezone.utc)
        with self.lock:
            eid = f"event-{len(self.events) + 1}"
            self.events.append({
                "id": eid, "objectType": "EVENT", "programID": program_id, "eventName": name,
                "createdDateTime": rfc3339(now), "modificationDateTime": rfc3339(now),
                "payloadDescriptors": [{"objectType": "EVENT_PAYLOAD_DESCRIPTOR", "payloadType": payload_type,
                                        "units": units}] if units else None,
                "intervalPeriod": {"start": rfc3339(now + dt.timedelta(seconds=start_in_s)),
                                   "duration": f"PT{int(duration_s)}S"},
                "intervals": [{"id": 0, "payloads": [{"type": payload_type, "values": [value]}]}],
            })
            return eid

    def delete_event(self, event_id: str) -> None:
        with self.lock:
            self.events = [e for e in self.events if e["id"] != event_id]
