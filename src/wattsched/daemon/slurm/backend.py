"""What the daemon needs from Slurm, whichever way it is reached (CLI, pyslurm, simulated cluster)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from wattsched.daemon.slurm.records import ClusterState

MARKER = "wattsched:held"
"""Token in a job's AdminComment that marks a hold as wattsched's (set by the lua gate or the daemon)."""


class SlurmBackend(Protocol):
    """The daemon's only way to Slurm. Every method raises ``SlurmCommandError`` on failure."""

    name: str

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


def with_marker(comment: str) -> str:
    """``comment`` with the wattsched marker added once."""
    if MARKER in comment.split():
        return comment
    return f"{comment} {MARKER}".strip()


def without_marker(comment: str) -> str:
    return " ".join(t for t in comment.split() if t != MARKER)
