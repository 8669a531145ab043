"""What the daemon needs from Slurm, whichever way it is reached (CLI, pyslurm, simulated cluster)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from wattsched.daemon.slurm.records import ClusterState

MARKER = "wattsched:held"
"""Token in a job's AdminComment that marks a hold as wattsched's (set by the lua gate or the daemon)."""


class SlurmBackend(Protocol):
    """The daemon's only way to Slurm. Every method raises ``SlurmCommandError`` on failure.

    Besides the commands, a backend declares its name (``cli``, ``rest``, ``pyslurm``, ``sim``) and its clock:
    :attr:`speedup` and :meth:`wall_time_of` (a real Slurm's are those of :class:`WallClock`).
    """

    name: str
    speedup: float
    """Backend seconds per wall-clock second: 1 for a real Slurm; the simulated cluster's ``--speed``."""

    def wall_time_of(self, t: float) -> float:
        """The wall-clock time (epoch) at which the backend's clock (that of ``read_at``) reads ``t``."""

    def read_state(self) -> ClusterState:
        """Jobs (pending, running, suspended, completing) and nodes."""

    def hold(self, job_id: int, admin_comment: str) -> None:
        """Hold a pending job and set its AdminComment (which carries :data:`MARKER`)."""

    def release(self, job_id: int, nodes: Sequence[str], admin_comment: str) -> None:
        """Pin a held job to ``nodes`` (ReqNodeList), set its AdminComment, and release it."""

    def requeue(self, job_id: int) -> None: ...

    def cancel(self, job_id: int) -> None: ...

    def power_down(self, node: str) -> None: ...

    def power_up(self, node: str) -> None: ...


class WallClock:
    """The clock of a backend on a real Slurm: its times are the wall clock's."""

    speedup = 1.0

    def wall_time_of(self, t: float) -> float:
        return t


def with_marker(comment: str) -> str:
    """``comment`` with the wattsched marker added once."""
    if MARKER in comment.split():
        return comment
    return f"{comment} {MARKER}".strip()


def without_marker(comment: str) -> str:
    return " ".join(t for t in comment.split() if t != MARKER)
