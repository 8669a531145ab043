"""What a cycle reports: its :class:`CycleReport` (tests, logs, ``STATUS=``) and the record ``wattsched status``
reads from the state store (:func:`status_record`)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from wattsched.daemon.view import View

STATUS_HELD_LIMIT = 500
"""Held jobs the status record lists (``wattsched status --limit`` shows fewer)."""


@dataclass(slots=True)
class CycleReport:
    """What one cycle did (for tests, logs and ``STATUS=``)."""

    cycle: int
    started: list[int] = field(default_factory=list)
    held: list[int] = field(default_factory=list)
    rehold: list[int] = field(default_factory=list)
    evicted: list[int] = field(default_factory=list)
    node_actions: list[str] = field(default_factory=list)
    reconciled: list[str] = field(default_factory=list)
    failed_actions: list[str] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)
    pending: int = 0
    running: int = 0
    duration_s: float = 0.0

    def summary(self) -> str:
        return (
            f"cycle {self.cycle}: {self.pending} queued, {self.running} running, started {len(self.started)}, "
            f"held {len(self.held) + len(self.rehold)}, evicted {len(self.evicted)}"
            + (f", {len(self.failed_actions)} actions failed" if self.failed_actions else "")
        )


def status_record(daemon, view: View, report: CycleReport, now: float, measured: dict) -> dict:
    """What ``wattsched status`` prints, as ``daemon``'s cycle saw it (saved under the state store's key ``status``).

    The simulated cluster lives in the daemon's process only: ``status`` reads this record for it instead of
    building a cluster of its own. Times are the daemon's (``read_at``), with the wall-clock time written.
    """
    c, snap = view.classified, view.snapshot
    reasons = daemon.actions.reasons
    holds = daemon.store.holds()
    started = set(report.started)
    ours = [job for job in c.ours if job.job_id not in started]  # released this cycle: starting now
    held = []
    for job in ours[:STATUS_HELD_LIMIT]:
        why = reasons.get(job.job_id) or holds.get(job.job_id, ("", ""))[1] or "waiting for the next cycle"
        held.append([job.job_id, job.user, job.node_count, why])
    cap = snap.cap
    nxt = cap.next_change_after(now)
    return {
        "cycle": daemon.cycle_no, "time": now, "wall_time": time.time(),
        "backend": daemon.backend.name, "speed": daemon.backend.speedup,
        "policy": daemon.config.policy, "dry_run": daemon.config.dry_run,
        "jobs": {"running": len(c.running), "starting": len(c.starting) + len(started), "held": len(ours),
                 "pending_unheld": len(c.adopt) - len(report.held), "held_by_others": len(c.others_held)},
        "cap_w": None if snap.cap_w == float("inf") else snap.cap_w,
        "next_cap_change": None if nxt == float("inf") else [nxt, None if cap.cap_at(nxt) == float("inf")
                                                              else cap.cap_at(nxt)],
        "power_w": snap.platform_power_w, "measured": bool(measured), "predicted_w": view.predicted_power_w,
        "nodes": len(snap.platform),
        "dr_events": [[e.event.label, e.event.start_s, e.event.end_s, e.cap_w] for e in snap.dr_events or ()],
        "held_jobs": held,
    }
