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
    reshape: str
    """What the backend can do to a running job's nodes: ``shrink`` (:meth:`shrink` works) or ``none`` (it
    raises). The view declares it to the guard (``Snapshot.can_reshape``, ``reshape_shrink_only``)."""
    speedup: float
    """Backend seconds per wall-clock second: 1 for a real Slurm; the simulated cluster's ``--speed``."""

    def wall_time_of(self, t: float) -> float:
        """The wall-clock time (epoch) at which the backend's clock (that of ``read_at``) reads ``t``."""

    def read_state(self) -> ClusterState:
        """Jobs (pending, running, suspended, completing) and nodes."""

    def hold(self, job_id: int, admin_comment: str) -> None:
        """Hold a pending job and set its AdminComment (which carries :data:`MARKER`)."""

    def release(self, job_id: int, nodes: Sequence[str], admin_comment: str, node_count: int | None = None) -> None:
        """Pin a held job to ``nodes`` (ReqNodeList), set its AdminComment, and release it.

        With ``node_count``, the job's node count is set to exactly that in the same update (a moldable job's
        ``--nodes=MIN-MAX`` becomes ``NumNodes=k-k``: with its range left open, Slurm adds nodes to a
        ReqNodeList shorter than the range's top).
        """

    def shrink(self, job_id: int, nodes: Sequence[str]) -> None:
        """Shrink a running job to ``nodes``, a subset of its nodes that keeps its batch host (its first node).

        Slurm frees the other nodes at once; the job's application learns its new size from the resize
        scripts (``slurm_job_<id>_resize.sh``/``.csh``) where the backend can write them. A backend that
        cannot shrink a job (``reshape == "none"``) raises ``SlurmCommandError`` naming why.
        """

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
