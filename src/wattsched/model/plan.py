"""Plans: what a policy wants done, as plain values. Applying them is someone else's job."""

from __future__ import annotations

from dataclasses import dataclass, field

from wattsched.model.job import slotted

try:
    import cython
except ImportError:  # pure Python without Cython installed
    from wattsched import _shadow as cython


@dataclass(frozen=True)  # slotted as pure Python below; compiled, a C type (plan.pxd)
class Start:
    """Start pending job ``job_id`` on nodes ``nodes`` (platform indices), optionally capped or slowed."""

    job_id: int
    nodes: tuple[int, ...]
    freq_hz: float | None = None
    cap_w: float | None = None


@dataclass(frozen=True, slots=True)
class Evict:
    """Stop running job ``job_id``; ``requeue`` puts it back in the queue, otherwise it is cancelled."""

    job_id: int
    requeue: bool = True


@dataclass(frozen=True, slots=True)
class SetNodeCap:
    """Set the power cap of node ``node`` to ``cap_w`` watts (``None`` removes the cap)."""

    node: int
    cap_w: float | None


@dataclass(frozen=True, slots=True)
class SetNodeFreq:
    """Set the maximum CPU frequency of node ``node`` (``None`` restores the nominal one)."""

    node: int
    freq_hz: float | None


@dataclass(frozen=True, slots=True)
class PowerDown:
    node: int


@dataclass(frozen=True, slots=True)
class PowerUp:
    node: int


@dataclass(frozen=True, slots=True)
class Reshape:
    """Move malleable running job ``job_id`` onto ``nodes``.

    ``overhead_s`` is the time the reshape costs the job (booting new nodes, moving its data), which the
    replay adds to its remaining run time; live the application spends it.
    """

    job_id: int
    nodes: tuple[int, ...]
    overhead_s: float = 0.0


def start_nodes(job_id: int, nodes: tuple[int, ...]) -> Start:
    """``Start(job_id, nodes)``: the per-job path of the simulator's policies.

    Compiled, the fields are stored straight into a new Start's C struct
    (about three times as fast as the dataclass ``__init__``); as pure
    Python, ``Start(job_id, nodes)``.
    """
    if not cython.compiled:
        return Start(job_id, nodes)
    obj = Start.__new__(Start)
    obj.job_id = job_id
    obj.nodes = nodes
    obj.freq_hz = None
    obj.cap_w = None
    return obj


Action = Start | Evict | SetNodeCap | SetNodeFreq | PowerDown | PowerUp | Reshape


@dataclass  # slotted as pure Python below; compiled, a C type (plan.pxd)
class Plan:
    """The outcome of one policy decision.

    ``reasons`` explains why given pending jobs keep waiting; ``default_reason``
    covers every other pending job not started (computing a reason for each of
    thousands of queued jobs at every event would cost more than the decision).
    ``power_estimate_w`` is the platform power the policy expects once the plan
    is applied; when set, the guard checks it against the cap in force.
    """

    actions: list[Action] = field(default_factory=list)
    reasons: dict[int, str | Reason] = field(default_factory=dict)
    default_reason: str = ""
    power_estimate_w: float | None = None

    def __init__(self, actions: list[Action] | None = None, reasons: dict[int, str | Reason] | None = None,
                 default_reason: str = "", power_estimate_w: float | None = None) -> None:
        # written out, so the compiled core compiles it (a policy makes one Plan per call); None: a new list/dict
        self.actions = [] if actions is None else actions
        self.reasons = {} if reasons is None else reasons
        self.default_reason = default_reason
        self.power_estimate_w = power_estimate_w

    def __bool__(self) -> bool:
        return bool(self.actions)

    def starts(self) -> list[Start]:
        return [a for a in self.actions if type(a) is Start]

    def reason_for(self, job_id: int) -> str:
        return str(self.reasons.get(job_id, self.default_reason))


if not cython.compiled:
    Start = slotted(Start)
    Plan = slotted(Plan)


class Reason:
    """A reason formatted only when someone reads it (policies explain at every event).

    >>> str(Reason("needs {} nodes", 4))
    'needs 4 nodes'
    """

    __slots__ = ("args", "template")

    def __init__(self, template: str, *args):
        self.template = template
        self.args = args

    def __str__(self) -> str:
        return self.template.format(*self.args)

    __repr__ = __str__

