"""Where the grid's VENs meet the control loop: events offered by a VEN's thread, read by the daemon's cycle.

The VENs (OpenADR 2.0b, OpenADR 3.0) run in their own threads. They offer each
event they receive to the :class:`GridHub`, which applies the opt rule with
what the last cycle saw (platform power, idle power of the managed nodes) and
answers opt in or out. The cycle reads the events opted in and not over, gives
the VENs the measured platform power to report, and writes the hub's audit rows
(events, opt decisions, reports, VTN failures) to the state store: only the
daemon's thread touches the store.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from wattsched.daemon.grid.events import GridEvent, OptRule, opt_decision
from wattsched.daemon.metrics import DaemonMetrics

log = logging.getLogger("wattsched.daemon.grid")


@dataclass(frozen=True, slots=True)
class GridNote:
    """An audit row of the grid side, written by the daemon's thread at its next cycle."""

    time_s: float
    action: str  # dr_event, dr_opt, dr_report, dr_vtn
    target: str
    reason: str
    outcome: str


@dataclass(frozen=True, slots=True)
class HubEvent:
    event: GridEvent
    baseline_w: float
    opted_in: bool
    reason: str


class GridHub:
    """Thread-safe meeting point of the VENs and the daemon.

    Parameters
    ----------
    rule
        The site's opt rule.
    metrics
        The daemon's metrics (counters of events, opt decisions, reports and VTN failures).
    clock
        Wall clock (epoch seconds); injected for tests.
    """

    def __init__(self, rule: OptRule, metrics: DaemonMetrics, clock: Callable[[], float] = time.time):
        self.rule = rule
        self.metrics = metrics
        self.clock = clock
        self._lock = threading.Lock()
        self._events: dict[str, HubEvent] = {}
        self._versions: dict[str, int] = {}
        self._notes: list[GridNote] = []
        self._power_w = math.nan  # measured platform power of the last cycle (NaN: not measured)
        self._baseline_w = 0.0  # platform power the last cycle decided on
        self._idle_w = 0.0

    # ---------------------------------------------------------------- the daemon's side

    def observe(self, *, power_w: float, measured_w: float | None, idle_w: float) -> None:
        """What the last cycle saw: decided platform power, measured platform power (None: not measured)."""
        with self._lock:
            self._baseline_w = power_w
            self._power_w = math.nan if measured_w is None else measured_w
            self._idle_w = idle_w

    def events(self, now_s: float) -> list[HubEvent]:
        """Events opted in and not over at ``now_s`` (events over for a day are forgotten)."""
        with self._lock:
            for key in [k for k, e in self._events.items() if e.event.end_s < now_s - 86400]:
                del self._events[key]
            return [e for e in self._events.values() if e.opted_in and e.event.end_s > now_s]

    def restore(self, saved: list[dict]) -> None:
        """Events taken part in before a restart (as :meth:`saved` wrote them), until the VEN hears of them again."""
        with self._lock:
            for d in saved:
                try:
                    e = GridEvent(**d["event"])
                except (KeyError, TypeError, ValueError):
                    continue
                self._events.setdefault(e.key, HubEvent(e, float(d.get("baseline_w", 0.0)), True,
                                                        "taken part in before a restart"))

    def saved(self, now_s: float) -> list[dict]:
        """The events taken part in and not over, for the state store."""
        from dataclasses import asdict

        return [{"event": asdict(e.event), "baseline_w": e.baseline_w} for e in self.events(now_s)]

    def drain(self) -> list[GridNote]:
        with self._lock:
            notes, self._notes = self._notes, []
            return notes

    # ---------------------------------------------------------------- the VENs' side

    def measured_power_w(self) -> float | None:
        """Measured platform power for a report (None when the last cycle had no measurement)."""
        with self._lock:
            return None if math.isnan(self._power_w) else self._power_w

    def decided_power_w(self) -> float:
        """Platform power the last cycle decided on (measured where telemetry has data, predicted elsewhere)."""
        with self._lock:
            return self._baseline_w

    def offer(self, events: list[GridEvent]) -> tuple[bool, str]:
        """Opt in or out of one VTN event (its intervals as ``events``, all with the same id); returns the
        decision for the whole event (in when any interval is taken part in) and why."""
        if not events:
            return False, "no interval asks for a reduction"
        now = self.clock()
        with self._lock:
            first = events[0]
            prefix = f"{first.source}:{first.event_id}"
            known = self._versions.get(prefix)
            if known is not None and known == first.modification:
                mine = [e for k, e in self._events.items() if _same_event(k, prefix)]
                if mine:
                    return any(e.opted_in for e in mine), mine[0].reason
            baseline = self._baseline_w
            for k in [k for k in self._events if _same_event(k, prefix)]:
                del self._events[k]
            self._versions[prefix] = first.modification
            results = []
            for e in events:
                resolved = e.resolved(baseline)
                ok, why = opt_decision(resolved, now, baseline_w=baseline, idle_w=self._idle_w, rule=self.rule)
                self._events[e.key] = HubEvent(resolved, baseline, ok, why)
                results.append((ok, why))
                self._notes.append(GridNote(now, "dr_event", e.key, resolved.describe(baseline)[:2000],
                                            "updated" if known is not None else "received"))
            opted = any(ok for ok, _ in results)
            why = next((w for ok, w in results if ok == opted), results[0][1])
            self._notes.append(GridNote(now, "dr_opt", prefix, why[:2000], "opt_in" if opted else "opt_out"))
        self.metrics.dr_events_received.labels(first.source).inc()
        self.metrics.dr_opt.labels(first.source, "opt_in" if opted else "opt_out").inc()
        log.info("demand-response event %s from %s (%s): %s, %s", prefix, first.source,
                 first.describe(baseline), "opted in" if opted else "opted out", why)
        return opted, why

    def offer_refused(self, source: str, event_id: str, why: str) -> None:
        """An event wattsched cannot act on (no interval it understands): audited as received and opted out."""
        now = self.clock()
        key = f"{source}:{event_id}"
        with self._lock:
            self._notes.append(GridNote(now, "dr_event", key, why[:2000], "received"))
            self._notes.append(GridNote(now, "dr_opt", key, why[:2000], "opt_out"))
        self.metrics.dr_events_received.labels(source).inc()
        self.metrics.dr_opt.labels(source, "opt_out").inc()
        log.info("demand-response event %s from %s opted out: %s", key, source, why)

    def cancel(self, source: str, event_id: str, why: str = "cancelled by the VTN") -> None:
        prefix = f"{source}:{event_id}"
        with self._lock:
            gone = [k for k in self._events if _same_event(k, prefix)]
            for k in gone:
                del self._events[k]
            if gone:
                self._notes.append(GridNote(self.clock(), "dr_event", prefix, why, "cancelled"))
        if gone:
            log.info("demand-response event %s: %s", prefix, why)

    def forget_missing(self, source: str, present: set[str], why: str = "no longer listed by the VTN") -> None:
        """Drop events of ``source`` whose ids are not in ``present`` (a VTN that deleted them)."""
        with self._lock:
            ids = {k.split(":", 1)[1].split("#", 1)[0] for k in self._events if k.startswith(f"{source}:")}
        for event_id in ids - present:
            self.cancel(source, event_id, why)

    def reported(self, source: str, target: str, ok: bool, detail: str) -> None:
        """A report sent to (or refused by) the VTN."""
        self.metrics.dr_reports.labels(source, "sent" if ok else "failed").inc()
        with self._lock:
            self._notes.append(GridNote(self.clock(), "dr_report", target, detail[:2000], "sent" if ok else "failed"))

    def add_source(self, source: str) -> None:
        """A VEN of ``source`` is configured: its counters exist from the start at 0, so that ``increase()`` and
        ``rate()`` over them (the dashboard, alerts) read 0 rather than nothing until the first event or failure."""
        m = self.metrics
        m.dr_events_received.labels(source)
        m.dr_vtn_failures.labels(source)
        for decision in ("opt_in", "opt_out"):
            m.dr_opt.labels(source, decision)
        for outcome in ("sent", "failed"):
            m.dr_reports.labels(source, outcome)

    def vtn_contact(self, source: str) -> None:
        """An exchange with the VTN succeeded: connected, and the time of the last contact moves (in wall-clock
        time, which the ``WattschedVTNSilent`` alert compares with Prometheus' ``time()``)."""
        self.metrics.dr_vtn_connected.labels(source).set(1)
        self.metrics.dr_vtn_last_contact.labels(source).set(time.time())

    def vtn_failed(self, source: str, detail: str) -> None:
        """The VTN could not be reached or refused us: logged, counted, audited (the VEN retries)."""
        self.metrics.dr_vtn_failures.labels(source).inc()
        self.metrics.dr_vtn_connected.labels(source).set(0)
        log.warning("%s VTN: %s (retrying)", source, detail)
        with self._lock:
            self._notes.append(GridNote(self.clock(), "dr_vtn", source, detail[:2000], "failed"))

    def vtn_ok(self, source: str, detail: str | None = None) -> None:
        self.vtn_contact(source)
        if detail:
            log.info("%s VTN: %s", source, detail)
            with self._lock:
                self._notes.append(GridNote(self.clock(), "dr_vtn", source, detail[:2000], "connected"))


def _same_event(key: str, prefix: str) -> bool:
    return key == prefix or key.startswith(prefix + "#")
