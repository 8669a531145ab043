"""A real OpenADR 2.0b VTN (openleadr's OpenADRServer) on loopback, in its own thread, for the grid tests.

It registers any VEN, asks for its telemetry reports (every ``report_s``), keeps
what the VEN answered to each event (optIn/optOut) and the report values it
received.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import socket
import threading
import time


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class TestVTN:
    """``start()`` it, ``add_event(...)``, read ``registrations``, ``opts`` and ``reports``; ``stop()``."""

    __test__ = False

    def __init__(self, port: int | None = None, *, poll_s: float = 1.0, report_s: float = 1.0):
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}/OpenADR2/Simple/2.0b"
        self.poll_s, self.report_s = poll_s, report_s
        self.registrations: list[tuple[str, str]] = []  # (ven_name, ven_id)
        self.opts: dict[str, str] = {}  # event id -> optIn / optOut
        self.reports: list[tuple[dt.datetime, float]] = []
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopped: asyncio.Event | None = None

    def start(self) -> TestVTN:
        self._thread = threading.Thread(target=self._run, daemon=True, name="test-vtn")
        self._thread.start()
        if not self._ready.wait(20):
            raise RuntimeError("the test VTN did not start")
        return self

    def stop(self) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._stopped.set)
            self._thread.join(20)

    def _run(self) -> None:
        from openleadr import OpenADRServer

        self._loop = asyncio.new_event_loop()
        asyncio.set_event_loop(self._loop)
        self._stopped = asyncio.Event()
        server = self.server = OpenADRServer(vtn_id="TESTVTN", http_host="127.0.0.1", http_port=self.port,
                                             requested_poll_freq=dt.timedelta(seconds=self.poll_s),
                                             show_fingerprint=False, verify_message_signatures=False)
        server.add_handler("on_create_party_registration", self._register)
        server.add_handler("on_register_report", self._register_report)

        async def main():
            await server.run()
            self._ready.set()
            await self._stopped.wait()
            await server.stop()

        self._loop.run_until_complete(main())

    def _register(self, info: dict):
        ven_id = f"ven-{len(self.registrations) + 1}"
        self.registrations.append((info["ven_name"], ven_id))
        return ven_id, f"reg-{ven_id}"

    def _register_report(self, ven_id, resource_id, measurement, unit, scale, min_sampling_interval,
                         max_sampling_interval):
        return self._on_report, dt.timedelta(seconds=self.report_s)

    def _on_report(self, data):
        self.reports.extend(data)

    def add_event(self, *, signal_name: str, signal_type: str, payload: float, start_in_s: float,
                  duration_s: float, ven_id: str | None = None, event_id: str | None = None) -> str:
        """Queue an event for the VEN (delivered at its next poll); returns its id."""
        ven = ven_id or self.registrations[-1][1]
        start = dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=start_in_s)
        done = threading.Event()
        out = {}

        def add():
            out["id"] = self.server.add_event(
                ven_id=ven, signal_name=signal_name, signal_type=signal_type, event_id=event_id,
                intervals=[{"dtstart": start, "duration": dt.timedelta(seconds=duration_s),
                            "signal_payload": payload}],
                callback=self._opted)
            done.set()

        self._loop.call_soon_threadsafe(add)
        done.wait(10)
        return out["id"]

    def _opted(self, ven_id, event_id, opt_type):
        self.opts[event_id] = opt_type

    def wait(self, predicate, timeout_s: float, what: str):
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            value = predicate()
            if value:
                return value
            time.sleep(0.1)
        raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what}")
