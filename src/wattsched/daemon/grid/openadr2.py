"""The OpenADR 2.0b VEN: openleadr's client in its own thread and asyncio loop beside the control cycle.

It registers with the VTN (``demand_response.openadr2``), polls it, turns
``SIMPLE`` and ``LOAD_DISPATCH`` events into :class:`GridEvent` s, answers each
with the opt decision of the :class:`GridHub`, and offers a ``TELEMETRY_USAGE``
report of the measured platform power (``RealPower``, W) that the VTN
subscribes to. A VTN that cannot be reached is logged, counted
(``wattsched_dr_vtn_failures_total``) and tried again every ``retry_s``; the
daemon's cycle never waits for it.

openleadr is an optional dependency: ``pip install 'wattsched[openadr]'``.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import threading
import time
from collections.abc import Callable

from wattsched.daemon.grid.events import GridEvent, simple_reduction
from wattsched.daemon.grid.hub import GridHub
from wattsched.errors import ConfigError

log = logging.getLogger("wattsched.daemon.grid")

SOURCE = "openadr2"


def _seconds(value) -> float:
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    return float(value or 0.0)


def _epoch(value) -> float:
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.timezone.utc)
        return value.timestamp()
    return float(value)


def grid_events(event: dict, now_s: float, *, simple_levels: dict[int, float],
                load_dispatch_unit_w: float) -> tuple[list[GridEvent], str]:
    """The intervals of an openleadr event dict that ask for a reduction, and what was not understood.

    ``SIMPLE`` levels map through ``simple_levels``; ``LOAD_DISPATCH`` payloads of
    type ``setpoint`` are limits and ``delta`` reductions, in units of
    ``load_dispatch_unit_w``. The notice time is when the event was received.
    """
    desc = event.get("event_descriptor") or {}
    event_id = str(desc.get("event_id"))
    modification = int(desc.get("modification_number") or 0)
    period = event.get("active_period") or {}
    t = _epoch(period["dtstart"])
    signals = event.get("event_signals") or []
    if isinstance(signals, dict):
        signals = signals.get("event_signals") or []
    out: list[GridEvent] = []
    skipped: list[str] = []
    for sig in signals:
        name, kind = str(sig.get("signal_name", "")), str(sig.get("signal_type", ""))
        start = t
        for i, iv in enumerate(sig.get("intervals") or []):
            a = _epoch(iv["dtstart"]) if iv.get("dtstart") is not None else start
            b = a + _seconds(iv.get("duration"))
            start = b
            payload = float(iv.get("signal_payload") or 0.0)
            if b <= a:
                skipped.append(f"interval {i} of {name} has no duration")
                continue
            base = dict(source=SOURCE, event_id=event_id, modification=modification, notice_s=min(now_s, a),
                        start_s=a, end_s=b, interval=len(out))
            if name.upper() == "SIMPLE":
                if payload <= 0:
                    continue
                w, frac = simple_reduction(int(payload), simple_levels)
                if w is None and frac is None:
                    skipped.append(f"SIMPLE level {payload:g} has no reduction in openadr2.simple_levels")
                    continue
                out.append(GridEvent(**base, reduction_w=w, reduction_fraction=frac,
                                     signal=f"SIMPLE level {int(payload)}"))
            elif name == "LOAD_DISPATCH" and kind == "setpoint" and payload > 0:
                out.append(GridEvent(**base, cap_w=payload * load_dispatch_unit_w,
                                     signal=f"LOAD_DISPATCH setpoint {payload:g}"))
            elif name == "LOAD_DISPATCH" and kind == "delta" and payload != 0:
                out.append(GridEvent(**base, reduction_w=abs(payload) * load_dispatch_unit_w,
                                     signal=f"LOAD_DISPATCH delta {payload:g}"))
            else:
                skipped.append(f"{name} {kind} is not a signal wattsched acts on")
    # a zero-based interval count keeps the first interval's key equal to the event id
    out = [GridEvent(**{**_fields(e), "interval": i}) for i, e in enumerate(out)]
    return out, "; ".join(dict.fromkeys(skipped))


def _fields(e: GridEvent) -> dict:
    return {f: getattr(e, f) for f in GridEvent.__slots__}


class OpenADR2Ven:
    """The VEN thread.

    Parameters
    ----------
    config
        The ``demand_response.openadr2`` block.
    hub
        Where events go and the measured power for reports comes from.
    clock
        Wall clock (epoch seconds).
    """

    source = SOURCE

    def __init__(self, config, hub: GridHub, clock: Callable[[], float] = time.time):
        try:
            import openleadr.client  # noqa: F401  (it sets its logger to INFO when imported)
        except ImportError:
            raise ConfigError("demand_response.openadr2 needs openleadr: pip install 'wattsched[openadr]'") from None
        if not log.isEnabledFor(logging.DEBUG):  # openleadr logs every message it sends at INFO, payload and all
            logging.getLogger("openleadr").setLevel(logging.WARNING)
        self.config = config
        self.hub = hub
        hub.add_source(SOURCE)
        self.clock = clock
        if config.vtn_fingerprint is None:  # only with allow_unsigned_events: true (the config refuses it otherwise)
            log.warning("demand_response.openadr2: no vtn_fingerprint (allow_unsigned_events: true): events from "
                        "%s are obeyed whoever signed them; anyone who can answer for that address can cap the "
                        "cluster", config.vtn_url)
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self.client = None
        self.registered = threading.Event()

    # ---------------------------------------------------------------- thread

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="wattsched-openadr2", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        if self._loop is not None and self._stop is not None and not self._loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(timeout_s)

    def _run(self) -> None:
        self._loop = asyncio.new_event_loop()
        asyncio.set_event_loop(self._loop)
        self._stop = asyncio.Event()
        try:
            self._loop.run_until_complete(self._main())
        except Exception as exc:  # the VEN never takes the daemon down
            log.error("the OpenADR 2.0b VEN stopped: %s", exc, exc_info=True)
        finally:
            self._loop.close()

    async def _main(self) -> None:
        cfg = self.config
        while not self._stop.is_set():
            client = self._client()
            self.client = client
            try:
                await client.run()
            except Exception as exc:
                self.hub.vtn_failed(SOURCE, f"registration with {cfg.vtn_url} failed: {exc}")
            if client.registration_id:
                self.registered.set()
                self.hub.vtn_ok(SOURCE, f"registered with {cfg.vtn_url} as {client.ven_id} "
                                        f"(registration {client.registration_id})")
                while not self._stop.is_set() and client.registration_id:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._stop.wait(), timeout=1.0)
                self.registered.clear()
            else:
                self.hub.vtn_failed(SOURCE, f"could not register with {cfg.vtn_url}; next attempt in "
                                            f"{cfg.retry_s:g} s")
            await _quietly(client.stop())
            if not self._stop.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stop.wait(), timeout=cfg.retry_s)

    # ---------------------------------------------------------------- openleadr

    def _client(self):
        from openleadr import OpenADRClient

        cfg = self.config
        hub = self.hub

        quiet = _held_back()

        class Client(OpenADRClient):
            async def _perform_request(self, service, message):
                task = asyncio.current_task()
                quiet.held[task] = []
                try:
                    result = await super()._perform_request(service, message)
                finally:
                    notes = quiet.held.pop(task, [])
                text = message.decode() if isinstance(message, bytes) else str(message)
                ok = bool(result) and result[0] is not None
                reason = _reason(notes)
                if notes:  # openleadr's own words, payload and all: for debugging only
                    log.debug("OpenADR %s to %s: openleadr said: %s", service, cfg.vtn_url, " | ".join(notes))
                if not ok or notes:
                    log.debug("OpenADR %s payload sent to %s: %s", service, cfg.vtn_url, text)
                report = "oadrUpdateReport" in text
                if report:
                    hub.reported(SOURCE, "platform", ok, _report_text(text) if ok
                                 else f"the report could not be delivered to {cfg.vtn_url}: {reason}")
                if not ok:
                    what = "report" if report else f"{service} request"
                    hub.vtn_failed(SOURCE, f"{what} to {cfg.vtn_url} failed: {reason}")
                else:
                    if notes:
                        log.warning("OpenADR %s to %s: %s", service, cfg.vtn_url, reason)
                    hub.vtn_contact(SOURCE)
                return result

        client = Client(ven_name=cfg.ven_name, vtn_url=cfg.vtn_url, ven_id=cfg.ven_id,
                        cert=str(cfg.cert) if cfg.cert else None, key=str(cfg.key) if cfg.key else None,
                        ca_file=str(cfg.ca_file) if cfg.ca_file else None, vtn_fingerprint=cfg.vtn_fingerprint,
                        show_fingerprint=False, disable_signature=cfg.cert is None)
        client.add_handler("on_event", self._on_event)
        client.add_handler("on_update_event", self._on_event)
        from openleadr.objects import SamplingRate

        rate = SamplingRate(min_period=dt.timedelta(seconds=cfg.report_interval_s),
                            max_period=dt.timedelta(seconds=max(cfg.report_interval_s, 3600)), on_change=False)
        client.add_report(callback=self._report_value, resource_id="platform", measurement="RealPower",
                          unit="W", scale="none", sampling_rate=rate,
                          report_duration=dt.timedelta(seconds=3600), report_specifier_id="wattsched-platform",
                          r_id="platform-power")
        return client

    async def _on_event(self, event: dict) -> str:
        desc = event.get("event_descriptor") or {}
        event_id = str(desc.get("event_id"))
        if desc.get("event_status") == "cancelled":
            self.hub.cancel(SOURCE, event_id)
            return "optIn"
        events, skipped = grid_events(event, self.clock(), simple_levels=dict(self.config.simple_levels),
                                      load_dispatch_unit_w=self.config.load_dispatch_unit_w)
        if not events:
            self.hub.cancel(SOURCE, event_id, "modified: no interval asks for a reduction")
            why = skipped or "no interval asks for a reduction"
            self.hub.offer_refused(SOURCE, event_id, why)
            return "optOut"
        opted, _why = self.hub.offer(events)
        return "optIn" if opted else "optOut"

    def _report_value(self):
        """The measured platform power now (the predicted one when the last cycle had no measurement: a telemetry
        report must carry a value, and a VTN rejects one without)."""
        watts = self.hub.measured_power_w()
        if watts is None:
            watts = self.hub.decided_power_w()
        return [(dt.datetime.now(dt.timezone.utc), round(watts, 1))]


class _HeldBack(logging.Filter):
    """openleadr's warnings and errors met during one of our requests, held back from the log (they quote the
    whole XML payload): the request logs one line with the reason, and the payload at debug level only.

    Keyed by asyncio task, since requests of one VEN interleave on its loop; records outside a request pass.
    """

    def __init__(self):
        super().__init__()
        self.held: dict[object, list[str]] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            task = asyncio.current_task()
        except RuntimeError:  # no running loop
            return True
        notes = self.held.get(task)
        if notes is None:
            return True
        notes.append(record.getMessage())
        return False


def _held_back() -> _HeldBack:
    """The one :class:`_HeldBack` filter on openleadr's logger."""
    logger = logging.getLogger("openleadr")
    for f in logger.filters:
        if isinstance(f, _HeldBack):
            return f
    f = _HeldBack()
    logger.addFilter(f)
    return f


def _reason(notes: list[str], limit: int = 300) -> str:
    """Why a request failed, in one line without the payload, from what openleadr logged.

    >>> _reason(["Non-OK status 500 when performing a request to http://vtn/EiReport with data "
    ...          "b'<?xml version=\\'1.0\\'?><oadrPayload>...</oadrPayload>': 500 <html><body>Server Error"
    ...          "</body></html>"])
    'HTTP 500: Server Error'
    >>> _reason(["Could not connect to server with URL http://127.0.0.1:1/OpenADR2/Simple/2.0b:",
    ...          "ClientConnectorError: Cannot connect to host 127.0.0.1:1"])
    'ClientConnectorError: Cannot connect to host 127.0.0.1:1'
    >>> _reason([])
    'no answer from the VTN'
    """
    import re

    out = []
    for note in notes:
        m = re.match(r"Non-OK status (\d+) when performing a request to \S+ with data .*: \1 (.*)$", note, re.S)
        if m:
            body = " ".join(re.sub(r"<[^>]*>", " ", m.group(2)).split())
            out.append(f"HTTP {m.group(1)}" + (f": {body}" if body else ""))
        elif note.startswith("Could not connect to server with URL"):
            continue  # the URL is in the line already; the next note says why
        else:
            out.append(" ".join(re.sub(r"<\?xml.*?>.*", "(payload)", note, flags=re.S).split()))
    text = "; ".join(dict.fromkeys(o for o in out if o)) or "no answer from the VTN"
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _report_text(xml: str) -> str:
    """``TELEMETRY_USAGE RealPower: 812.0 W, 790.5 W`` from an oadrUpdateReport message."""
    import re

    values = re.findall(r"<(?:\w+:)?value>([^<]+)</(?:\w+:)?value>", xml)
    return "TELEMETRY_USAGE RealPower: " + (", ".join(f"{v} W" for v in values[:20]) or "no values")


async def _quietly(coro) -> None:
    try:
        await coro
    except Exception as exc:  # closing a session that never opened
        log.debug("closing the OpenADR client: %s", exc)
