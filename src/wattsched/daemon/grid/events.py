"""Demand-response events from the grid and the rule that opts in or out of them. Pure: no I/O, no clock.

A VTN's event (OpenADR 2.0b or 3.0) becomes one :class:`GridEvent` per
interval that asks for a reduction; each carries its target as an absolute
limit (``cap_w``), a reduction in watts (``reduction_w``), or a fraction of the
platform power when wattsched first saw it (``reduction_fraction``, SIMPLE
levels). :func:`opt_decision` applies the site's opt rule to it.
"""

from __future__ import annotations

from dataclasses import dataclass

from wattsched.model.constraints import DemandResponseEvent


@dataclass(frozen=True, slots=True)
class GridEvent:
    """One interval of a VTN's event, as wattsched takes it.

    >>> e = GridEvent("openadr2", "ev1", 0, notice_s=0.0, start_s=60.0, end_s=660.0, reduction_fraction=0.2,
    ...               signal="SIMPLE level 2")
    >>> e.key, e.resolved(baseline_w=1000.0).reduction_w
    ('openadr2:ev1', 200.0)
    """

    source: str
    event_id: str
    modification: int
    notice_s: float
    start_s: float
    end_s: float
    cap_w: float | None = None
    reduction_w: float | None = None
    reduction_fraction: float | None = None
    signal: str = ""
    interval: int = 0

    @property
    def key(self) -> str:
        """Name of the event in the state store, the audit and the logs (``source:id``, ``#i`` for interval i)."""
        return f"{self.source}:{self.event_id}" + (f"#{self.interval}" if self.interval else "")

    def resolved(self, baseline_w: float) -> GridEvent:
        """A fractional reduction turned into watts of the baseline (the platform power at first sight)."""
        if self.reduction_fraction is None:
            return self
        from dataclasses import replace

        return replace(self, reduction_w=max(self.reduction_fraction * baseline_w, 1.0), reduction_fraction=None)

    def target_w(self, baseline_w: float) -> float:
        """The platform power limit of the event, given the baseline.

        >>> GridEvent("s", "e", 0, 0.0, 1.0, 2.0, reduction_w=300.0).target_w(1000.0)
        700.0
        """
        return self.to_event(baseline_w).target_cap_w(baseline_w)

    def to_event(self, baseline_w: float) -> DemandResponseEvent:
        r = self.resolved(baseline_w)
        return DemandResponseEvent(min(r.notice_s, r.start_s), r.start_s, r.end_s, cap_w=r.cap_w,
                                   reduction_w=r.reduction_w, label=f"{r.key} ({r.signal})" if r.signal else r.key)

    def describe(self, baseline_w: float) -> str:
        """``SIMPLE level 2: 700 W (reduction 300 W of 1000 W) from ... for 600 s``."""
        r = self.resolved(baseline_w)
        target = (f"{r.cap_w:.0f} W" if r.cap_w is not None
                  else f"{r.target_w(baseline_w):.0f} W (reduction {r.reduction_w:.0f} W of {baseline_w:.0f} W)")
        return (f"{self.signal or 'event'}: limit {target}, starts in {self.start_s - self.notice_s:.0f} s, "
                f"lasts {self.end_s - self.start_s:.0f} s")


@dataclass(frozen=True, slots=True)
class OptRule:
    """The site's rule (``demand_response.opt``)."""

    min_notice_s: float = 0.0
    max_duration_s: float | None = None
    below_idle: str = "opt_out"


def opt_decision(event: GridEvent, now_s: float, *, baseline_w: float, idle_w: float,
                 rule: OptRule) -> tuple[bool, str]:
    """Take part in ``event`` (True) or not, and why.

    Parameters
    ----------
    event
        The event as received.
    now_s
        When it was received.
    baseline_w
        Platform power now (the baseline of a reduction).
    idle_w
        Idle power of the managed nodes: a limit below it needs nodes powered down.
    rule
        The site's opt rule.

    >>> e = GridEvent("s", "e", 0, 0.0, 600.0, 1200.0, cap_w=500.0)
    >>> opt_decision(e, 0.0, baseline_w=900.0, idle_w=400.0, rule=OptRule(min_notice_s=300))
    (True, 'limit 500 W reachable (idle power 400 W), notice 600 s')
    >>> opt_decision(e, 400.0, baseline_w=900.0, idle_w=400.0, rule=OptRule(min_notice_s=300))[1]
    'notice 200 s is shorter than demand_response.opt.min_notice_s (300 s)'
    >>> opt_decision(e, 0.0, baseline_w=900.0, idle_w=600.0, rule=OptRule())[1]
    'limit 500 W is below the idle power of the managed nodes (600 W): demand_response.opt.below_idle is opt_out'
    """
    notice_s = event.start_s - now_s
    if now_s >= event.end_s:
        return False, "the event is already over"
    if notice_s < rule.min_notice_s:
        return False, (f"notice {max(notice_s, 0):.0f} s is shorter than demand_response.opt.min_notice_s "
                       f"({rule.min_notice_s:g} s)")
    duration_s = event.end_s - event.start_s
    if rule.max_duration_s is not None and duration_s > rule.max_duration_s:
        return False, (f"lasts {duration_s:.0f} s, longer than demand_response.opt.max_duration_s "
                       f"({rule.max_duration_s:g} s)")
    target_w = event.target_w(baseline_w)
    if target_w < idle_w:
        if rule.below_idle == "opt_out":
            return False, (f"limit {target_w:.0f} W is below the idle power of the managed nodes ({idle_w:.0f} W): "
                           "demand_response.opt.below_idle is opt_out")
        return True, f"limit {target_w:.0f} W below idle power {idle_w:.0f} W, taken part in (below_idle: opt_in)"
    return True, f"limit {target_w:.0f} W reachable (idle power {idle_w:.0f} W), notice {max(notice_s, 0):.0f} s"


def simple_reduction(level: int, levels: dict[int, float]) -> tuple[float | None, float | None]:
    """``(reduction_w, reduction_fraction)`` of a SIMPLE level (values below 1 are fractions, else watts).

    >>> simple_reduction(2, {1: 0.1, 2: 0.2}), simple_reduction(1, {1: 5000.0}), simple_reduction(3, {1: 0.1})
    ((None, 0.2), (5000.0, None), (None, None))
    """
    value = levels.get(int(level))
    if value is None:
        return None, None
    return (None, float(value)) if value < 1 else (float(value), None)
