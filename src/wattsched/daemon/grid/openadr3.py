"""An OpenADR 3.0 VEN over plain HTTP: poll the VTN's REST API for programs and events, post reports.

Written against the OpenADR 3.0.1 API (``openadr3.yaml``): ``GET /programs``,
``GET /events?programID=``, ``POST /reports``, with an OAuth2 bearer token
(``token_file``) when the VTN asks for one. Every ``poll_interval_s`` the VEN
lists the events of the program(s) it follows, turns the intervals that ask
for a reduction into :class:`GridEvent` s and offers them to the
:class:`GridHub` (opt rule, audit). Events the VTN no longer lists are
dropped. For each event taken part in and in force, it posts a report of the
measured platform power (``DEMAND`` in kW, ``DIRECT_READ``) with the opt
decision in its name. OpenADR 3.0 has no opt message of its own: declining an
event is the absence of its report, and the audit keeps the reason.

Understood event payloads: ``SIMPLE`` (levels 1-3 through ``simple_levels``),
``IMPORT_CAPACITY_LIMIT`` and ``DISPATCH_SETPOINT`` (a limit on the platform's
import), ``DISPATCH_SETPOINT_RELATIVE`` (a change: negative values are a
reduction). Units come from the event's payload descriptor (``W``, ``KW``,
``MW``), else ``unit_w``.

Plain :mod:`urllib` rather than a client library: the four calls above need
nothing more, and the daemon takes no further dependency (the ``openadr3-client``
package needs Python 3.12; ``openadr3`` is a pre-1.0 entity library without a
VEN loop).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import re
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable

from wattsched.daemon.grid.events import GridEvent, simple_reduction
from wattsched.daemon.grid.hub import GridHub
from wattsched.daemon.nofollow import build_opener, redirect_message

log = logging.getLogger("wattsched.daemon.grid")

SOURCE = "openadr3"
UNITS_W = {"W": 1.0, "KW": 1e3, "MW": 1e6}
_DURATION = re.compile(r"^P(?:(?P<w>\d+(?:\.\d+)?)W)?(?:(?P<d>\d+(?:\.\d+)?)D)?"
                       r"(?:T(?:(?P<h>\d+(?:\.\d+)?)H)?(?:(?P<m>\d+(?:\.\d+)?)M)?(?:(?P<s>\d+(?:\.\d+)?)S)?)?$")


def parse_duration_s(text: str | None) -> float:
    """An ISO 8601 duration (``PT1H30M``, ``P1D``, ``PT0S``) in seconds.

    >>> parse_duration_s("PT1H30M"), parse_duration_s("P1DT2S"), parse_duration_s(None)
    (5400.0, 86402.0, 0.0)
    >>> parse_duration_s("one hour")
    Traceback (most recent call last):
    ...
    ValueError: not an ISO 8601 duration: 'one hour'
    """
    if not text:
        return 0.0
    m = _DURATION.match(text.strip())
    if not m or text.strip() in ("P", "PT"):
        raise ValueError(f"not an ISO 8601 duration: {text!r}")
    f = {k: float(v) if v else 0.0 for k, v in m.groupdict().items()}
    return f["w"] * 604800 + f["d"] * 86400 + f["h"] * 3600 + f["m"] * 60 + f["s"]


def parse_time_s(text: str) -> float:
    """An RFC 3339 date-time in epoch seconds (``Z`` or an offset; none is UTC).

    >>> parse_time_s("2026-11-23T17:00:00Z") - parse_time_s("2026-11-23T18:00:00+01:00")
    0.0
    """
    t = dt.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    if t.tzinfo is None:
        t = t.replace(tzinfo=dt.timezone.utc)
    return t.timestamp()


def grid_events(event: dict, now_s: float, *, simple_levels: dict[int, float],
                unit_w: float) -> tuple[list[GridEvent], str]:
    """The intervals of an OpenADR 3.0 event object that ask for a reduction, and what was not understood."""
    event_id = str(event.get("id"))
    modified = event.get("modificationDateTime") or event.get("createdDateTime") or ""
    modification = int(parse_time_s(modified)) if modified else 0
    units = {d.get("payloadType"): UNITS_W.get(str(d.get("units") or "").upper(), unit_w)
             for d in event.get("payloadDescriptors") or [] if isinstance(d, dict)}
    default = event.get("intervalPeriod") or {}
    out: list[GridEvent] = []
    skipped: list[str] = []
    previous_end: float | None = None
    for iv in event.get("intervals") or []:
        period = iv.get("intervalPeriod") or {}
        if period.get("start"):
            start = parse_time_s(period["start"])
        elif previous_end is not None:  # intervals without their own period follow each other
            start = previous_end
        elif default.get("start"):
            start = parse_time_s(default["start"])
        else:
            skipped.append(f"interval {iv.get('id')} has no start")
            continue
        duration = parse_duration_s(period.get("duration") or default.get("duration"))
        end = start + duration
        previous_end = end
        if duration <= 0:
            skipped.append(f"interval {iv.get('id')} has no duration")
            continue
        for p in iv.get("payloads") or []:
            kind, values = str(p.get("type", "")), p.get("values") or []
            numbers = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
            if not numbers:
                continue
            value = float(numbers[0])
            base = dict(source=SOURCE, event_id=event_id, modification=modification, notice_s=min(now_s, start),
                        start_s=start, end_s=end, interval=len(out))
            scale = units.get(kind, unit_w)
            if kind == "SIMPLE":
                if value <= 0:
                    continue
                w, frac = simple_reduction(int(value), simple_levels)
                if w is None and frac is None:
                    skipped.append(f"SIMPLE level {value:g} has no reduction in openadr3.simple_levels")
                    continue
                out.append(GridEvent(**base, reduction_w=w, reduction_fraction=frac,
                                     signal=f"SIMPLE level {int(value)}"))
            elif kind in ("IMPORT_CAPACITY_LIMIT", "DISPATCH_SETPOINT") and value > 0:
                out.append(GridEvent(**base, cap_w=value * scale, signal=f"{kind} {value:g}"))
            elif kind == "DISPATCH_SETPOINT_RELATIVE" and value < 0:
                out.append(GridEvent(**base, reduction_w=-value * scale, signal=f"{kind} {value:g}"))
            else:
                skipped.append(f"{kind} {value:g} is not a payload wattsched acts on")
    return out, "; ".join(dict.fromkeys(skipped))


class VTNError(Exception):
    pass


class OpenADR3Ven:
    """The polling thread.

    Parameters
    ----------
    config
        The ``demand_response.openadr3`` block.
    hub
        Where events go and the measured power for reports comes from.
    clock
        Wall clock (epoch seconds).
    """

    source = SOURCE

    def __init__(self, config, hub: GridHub, clock: Callable[[], float] = time.time):
        self.config = config
        self.hub = hub
        hub.add_source(SOURCE)
        self.clock = clock
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._connected = False
        self._refused: set[str] = set()
        self.polls = 0

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="wattsched-openadr3", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.poll()
            except Exception as exc:  # never takes the daemon down; the next poll tries again
                self._connected = False
                self.hub.vtn_failed(SOURCE, f"{exc}")
            self._stop.wait(self.config.poll_interval_s)

    # ---------------------------------------------------------------- one poll

    def poll(self) -> None:
        """List programs and events, offer the events, post reports of the events in force."""
        cfg = self.config
        programs = self._get("/programs")
        if not isinstance(programs, list):
            raise VTNError(f"{cfg.vtn_url}/programs: expected a list of programs")
        wanted = [p for p in programs if isinstance(p, dict) and (cfg.program is None
                                                                   or p.get("programName") == cfg.program)]
        if not self._connected:
            self._connected = True
            self.hub.vtn_ok(SOURCE, f"polling {cfg.vtn_url}: {len(wanted)} program(s) "
                                    f"({', '.join(str(p.get('programName')) for p in wanted) or 'none'})")
        else:
            self.hub.vtn_ok(SOURCE)
        now = self.clock()
        present: set[str] = set()
        decisions: dict[str, tuple[bool, dict]] = {}
        for program in wanted:
            query = urllib.parse.urlencode({"programID": program.get("id")})
            events = self._get(f"/events?{query}")
            for event in events if isinstance(events, list) else []:
                if not isinstance(event, dict) or event.get("id") is None:
                    continue
                present.add(str(event["id"]))
                try:
                    parts, skipped = grid_events(event, now, simple_levels=dict(cfg.simple_levels), unit_w=cfg.unit_w)
                except (ValueError, TypeError) as exc:
                    parts, skipped = [], f"unreadable event: {exc}"
                if not parts:
                    if skipped and str(event["id"]) not in self._refused:
                        self._refused.add(str(event["id"]))
                        self.hub.offer_refused(SOURCE, str(event["id"]), skipped)
                    continue
                opted, _why = self.hub.offer(parts)
                decisions[str(event["id"])] = (opted, event)
        self.hub.forget_missing(SOURCE, present)
        self.polls += 1
        if cfg.report:
            for event_id, (opted, event) in decisions.items():
                live = [e for e in self.hub.events(now) if e.event.event_id == event_id and e.event.start_s <= now]
                if opted and live:
                    self._report(event, now)

    def _report(self, event: dict, now: float) -> None:
        watts = self.hub.measured_power_w()
        target = f"{SOURCE}:{event['id']}"
        if watts is None:
            self.hub.reported(SOURCE, target, False, "no measured platform power to report (telemetry none or stale)")
            return
        stamp = dt.datetime.fromtimestamp(now, dt.timezone.utc).isoformat().replace("+00:00", "Z")
        body = {
            "programID": event.get("programID"), "eventID": event["id"], "clientName": self.config.ven_name,
            "reportName": f"wattsched platform power, opted in to {event.get('eventName') or event['id']}",
            "payloadDescriptors": [{"objectType": "REPORT_PAYLOAD_DESCRIPTOR", "payloadType": "DEMAND",
                                    "readingType": "DIRECT_READ", "units": "KW"}],
            "resources": [{"resourceName": "AGGREGATED_REPORT",
                           "intervalPeriod": {"start": stamp, "duration": "PT0S"},
                           "intervals": [{"id": 0, "payloads": [{"type": "DEMAND",
                                                                 "values": [round(watts / 1e3, 4)]}]}]}],
        }
        try:
            self._post("/reports", body)
        except (VTNError, OSError) as exc:
            self.hub.reported(SOURCE, target, False, f"the report could not be posted: {exc}")
            return
        self.hub.reported(SOURCE, target, True, f"DEMAND {watts / 1e3:.3f} kW")

    # ---------------------------------------------------------------- HTTP

    def _request(self, method: str, path: str, body: dict | None = None):
        cfg = self.config
        headers = {"Accept": "application/json"}
        if cfg.token_file is not None:
            try:
                token = cfg.token_file.read_text().strip()
            except OSError as exc:
                raise VTNError(f"cannot read demand_response.openadr3.token_file {cfg.token_file}: "
                               f"{exc.strerror or exc}") from None
            headers["Authorization"] = f"Bearer {token}"
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        url = cfg.vtn_url.rstrip("/") + path
        req = urllib.request.Request(url, data=data, headers=headers, method=method)
        opener = build_opener()  # a redirect would carry the bearer token elsewhere
        try:
            with opener.open(req, timeout=cfg.timeout_s) as r:
                text = r.read(8 * 1024 * 1024 + 1)
        except urllib.error.HTTPError as exc:
            detail = redirect_message(exc, "demand_response.openadr3.vtn_url") or \
                exc.read(2000).decode(errors="replace").strip()
            raise VTNError(f"{method} {url}: HTTP {exc.code} {exc.reason}"
                           + (f": {detail}" if detail else "")) from None
        except (urllib.error.URLError, OSError) as exc:
            raise VTNError(f"{method} {url}: {getattr(exc, 'reason', exc)}") from None
        if len(text) > 8 * 1024 * 1024:
            raise VTNError(f"{method} {url}: answer over 8 MiB")
        try:
            return json.loads(text) if text.strip() else None
        except ValueError as exc:
            raise VTNError(f"{method} {url}: not JSON ({exc})") from None

    def _get(self, path: str):
        return self._request("GET", path)

    def _post(self, path: str, body: dict):
        return self._request("POST", path, body)
