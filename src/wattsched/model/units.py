"""Job units: several jobs sharing a node by cores, GPUs, MICs and memory (Borghesi et al. 2018, §3).

A job of units (``Job.units`` not empty) asks, per unit, cores, GPUs, MICs and
memory on one node; a Start gives it one node per unit, a node may host
several units of the same job or of others as long as their requests add up
to no more than its capacity. Jobs without units take whole nodes, as before.

Capacities are 4-tuples ``(cores, gpus, mics, mem_mb)``. A node whose
``mem_mb`` is 0 has no memory limit (a platform that does not say).

Power: the power of a unit (the trace's, a prediction's, the default) is that
of its node running the unit alone, idle included, so a unit's increment over
idle is what it adds to its node whichever units already run there, and the
power ledgers of the policies, which count increments over idle per node,
count them per unit unchanged. The default is the node's idle power plus its
dynamic range (``busy_w - idle_w``) in proportion to the unit's share of the
node's cores, plus the unit's GPUs at their TDP.

The text form, in job tables and on the command line, lists units separated
by ``;``, each as counts with a letter: ``c`` cores, ``g`` GPUs, ``m`` MICs,
and a memory size ending in ``M`` or ``G``; ``N*`` repeats a unit:

>>> parse_units("2*8c1g4G;4c")[1:]
(Unit(cores=8, gpus=1, mics=0, mem_mb=4096), Unit(cores=4, gpus=0, mics=0, mem_mb=0))
>>> format_units(parse_units("2*8c1g4G;4c"))
'2*8c1g4096M;4c'
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from wattsched.model.job import Job, RunningJob, Unit
from wattsched.model.plan import Evict, Plan, Start
from wattsched.model.platform import Node, Platform

if TYPE_CHECKING:  # the snapshot imports this module
    from wattsched.model.snapshot import Snapshot

Capacity = tuple[int, int, int, int]
"""``(cores, gpus, mics, mem_mb)`` of a node, free or asked."""

MAX_UNITS = 100_000
"""Units of one job, at most (a bound on the text form's repetitions)."""

_PART = re.compile(r"(\d+)([cgmMG])")


def capacity(node: Node) -> Capacity:
    """A node's full capacity."""
    return node.cores, node.gpus, node.mics, node.mem_mb


def fits(free: Capacity, unit: Unit, mem_limited: bool = True) -> bool:
    """Whether ``unit`` fits in ``free`` (memory unchecked on a node without a memory size)."""
    return (unit.cores <= free[0] and unit.gpus <= free[1] and unit.mics <= free[2]
            and (not mem_limited or unit.mem_mb <= free[3]))


def minus(free: Capacity, unit: Unit) -> Capacity:
    return free[0] - unit.cores, free[1] - unit.gpus, free[2] - unit.mics, free[3] - unit.mem_mb


def plus(free: Capacity, unit: Unit) -> Capacity:
    return free[0] + unit.cores, free[1] + unit.gpus, free[2] + unit.mics, free[3] + unit.mem_mb


def job_cores(job: Job) -> int:
    """The cores a job's units ask together (remembered per job: orderings ask it at every decision)."""
    hit = _by_job("cores", None, job)
    if hit is None:
        hit = _remember("cores", None, job, sum(u.cores for u in job.units))
    return hit


def totals(units: Iterable[Unit]) -> Capacity:
    """What a job's units ask together (the pooled demand of the relaxed model)."""
    c = g = m = mem = 0
    for u in units:
        c += u.cores
        g += u.gpus
        m += u.mics
        mem += u.mem_mb
    return c, g, m, mem


def core_share(node: Node, unit: Unit) -> float:
    """The unit's share of its node's cores, at most 1 (1 on a node that counts no cores)."""
    return min(1.0, unit.cores / node.cores) if node.cores > 0 else 1.0


@functools.lru_cache(maxsize=16)
def max_cores(platform: Platform) -> int:
    """The most cores of any node of ``platform``."""
    return max(n.cores for n in platform.nodes)


def unit_power_w(node: Node, unit: Unit) -> float:
    """The default power of ``unit`` on ``node``: idle, plus dynamic power by share of cores, plus GPUs at TDP.

    >>> from wattsched.model.platform import NodePowerModel
    >>> unit_power_w(Node(0, "n", cores=16, power=NodePowerModel(idle_w=100, busy_w=260)), Unit(cores=4))
    140.0
    """
    pm = node.power
    return pm.idle_w + (pm.busy_w - pm.idle_w) * core_share(node, unit) + unit.gpus * pm.gpu_tdp_w


def unit_dynamic_w(platform: Platform, run: RunningJob) -> list[tuple[int, float]]:
    """``(node, dynamic power)`` of each unit of a running job of units, from its measured power.

    The job's power is its units' dynamic power plus each unit's share of its
    node's idle power by cores (as the simulator accounts it); the dynamic
    part is spread evenly over the units.
    """
    nodes = platform.nodes
    idle_share = 0.0
    for u, n in zip(run.job.units, run.nodes, strict=False):
        idle_share += nodes[n].power.idle_w * core_share(nodes[n], u)
    dyn = max(0.0, run.power_w - idle_share) / max(1, len(run.nodes))
    return [(n, dyn) for n in run.nodes]


def default_unit_estimate_w(platform: Platform, job: Job) -> float:
    """A job's per-unit power without a prediction: the mean over its units of the highest default on any node."""
    if not job.units:
        return platform.max_busy_w(job.gpus_per_node)
    hit = _by_job("estimate", platform, job)
    if hit is not None:
        return hit
    total = 0.0
    for u in dict.fromkeys(job.units):  # distinct units (a job's are mostly alike), weighted by their count
        total += _highest_unit_power_w(platform, u) * job.units.count(u)
    return _remember("estimate", platform, job, total / len(job.units))


_JOB_CACHE: dict[tuple[str, int], tuple[Job, Platform, object]] = {}
"""Per job (by identity: a policy asks the same pending job at every decision), what it costs to compute
from its units; bounded, cleared when full."""


def _by_job(what: str, platform: Platform | None, job: Job):
    hit = _JOB_CACHE.get((what, id(job)))
    if hit is not None and hit[0] is job and hit[1] is platform:
        return hit[2]
    return None


def _remember(what: str, platform: Platform | None, job: Job, value):
    if len(_JOB_CACHE) >= 100_000:
        _JOB_CACHE.clear()
    _JOB_CACHE[(what, id(job))] = (job, platform, value)
    return value


@functools.lru_cache(maxsize=4096)
def _highest_unit_power_w(platform: Platform, unit: Unit) -> float:
    return max(unit_power_w(n, unit) for n in _node_kinds(platform))


@functools.lru_cache(maxsize=16)
def _node_kinds(platform: Platform) -> tuple[Node, ...]:
    """One node of each distinct (power model, cores): a platform's nodes come in a few kinds."""
    kinds: dict = {}
    for n in platform.nodes:
        kinds.setdefault((n.power, n.cores), n)
    return tuple(kinds.values())


def place(units: Sequence[Unit], nodes: Sequence[int], platform: Platform,
          free: Mapping[int, Capacity], distinct: bool = False) -> tuple[int, ...] | None:
    """A node for each unit, first fit over ``nodes`` in the given order, or ``None`` if they do not all fit.

    ``free`` gives the free capacity of partly used nodes; a node of ``nodes``
    absent from it is taken as empty. Units of the same job may share a node,
    unless ``distinct`` (``Job.distinct_nodes``): then each gets a node of its own.
    Nothing is changed: the caller commits the placement with :func:`take`.

    >>> p = Platform.homogeneous_cluster(2, cores=16)
    >>> place([Unit(8), Unit(8), Unit(4)], [0, 1], p, {})
    (0, 0, 1)
    >>> place([Unit(8), Unit(8)], [0, 1], p, {}, distinct=True)
    (0, 1)
    >>> place([Unit(8)], [0, 1], p, {0: (4, 0, 0, 0), 1: (2, 0, 0, 0)}) is None
    True
    """
    pnodes = platform.nodes
    if not units:
        return ()
    # the least the job's units ask of each resource: a node without that much fits none of them
    least = Unit(min(u.cores for u in units), min(u.gpus for u in units), min(u.mics for u in units),
                 min(u.mem_mb for u in units))
    alive: list[int] = []
    caps: list[list[int]] = []  # free capacity of the live nodes, as units are placed
    for n in nodes:
        cap = _free_of(pnodes[n], free.get(n))
        if fits(cap, least):
            alive.append(n)
            caps.append(cap)
    out: list[int] = []
    prev: Unit | None = None
    at = 0
    count = len(alive)
    for u in units:
        # first fit; a unit like the one before resumes where that one went (the nodes before it had no room
        # for such a unit then, and have less now): a job of many like units costs one pass over the nodes
        c, g, m, mem = u.cores, u.gpus, u.mics, u.mem_mb
        i = at if u == prev else 0
        while i < count:
            cap = caps[i]
            if c <= cap[0] and g <= cap[1] and m <= cap[2] and mem <= cap[3]:
                cap[0] -= c
                cap[1] -= g
                cap[2] -= m
                cap[3] -= mem
                if distinct:  # nothing fits a node once taken
                    cap[0] = cap[1] = cap[2] = cap[3] = -1
                out.append(alive[i])
                break
            i += 1
        else:
            return None
        prev, at = u, i
    return tuple(out)


def _free_of(node: Node, free: Capacity | None) -> list[int]:
    """What ``node`` has free (``free``, or all of it), memory unlimited (a huge number) where it has no size."""
    cap = capacity(node) if free is None else free
    return [cap[0], cap[1], cap[2], cap[3] if node.mem_mb > 0 else 1 << 62]


def fits_empty(platform: Platform, job: Job) -> bool:
    """Whether the units of ``job`` fit on ``platform`` with every node empty (drained or down ones included)."""
    hit = _by_job("fits_empty", platform, job)
    if hit is not None:
        return hit
    fit = place(job.units, range(len(platform.nodes)), platform, {}, job.distinct_nodes) is not None
    return _remember("fits_empty", platform, job, fit)


class Room:
    """What ``nodes`` have free, for quick tests before a first-fit scan: the most of each resource free on
    any one of them (a unit asking more fits none) and the sum (a job asking more in all fits nowhere).

    Memory counts as unlimited on a node without a memory size.
    """

    __slots__ = ("most", "total")

    def __init__(self, platform: Platform, nodes: Iterable[int], free: Mapping[int, Capacity]):
        pnodes = platform.nodes
        most = [0, 0, 0, 0]
        total = [0, 0, 0, 0]
        for n in nodes:
            cap = _free_of(pnodes[n], free.get(n))
            for i in range(4):
                total[i] += cap[i]
                if cap[i] > most[i]:
                    most[i] = cap[i]
        self.most: Capacity = (most[0], most[1], most[2], most[3])
        self.total: Capacity = (total[0], total[1], total[2], total[3])

    def may_fit(self, units: Sequence[Unit]) -> bool:
        """False only if ``units`` certainly do not fit; True if they might."""
        most = self.most
        if any(not fits(most, u) for u in units):
            return False
        t = totals(units)
        return all(t[i] <= self.total[i] for i in range(4))


def take(free: dict[int, Capacity], platform: Platform, units: Sequence[Unit], nodes: Sequence[int]) -> None:
    """Commit a placement to ``free`` (free capacity of partly used nodes, updated in place)."""
    pnodes = platform.nodes
    for u, n in zip(units, nodes, strict=True):
        cap = free.get(n)
        free[n] = minus(capacity(pnodes[n]) if cap is None else cap, u)


def loaded_first(platform: Platform, nodes: Iterable[int], free: Mapping[int, Capacity]) -> list[int]:
    """Nodes by Borghesi's two criteria: most energy-efficient (lowest busy power) first, then most loaded.

    Load is the share of the node's cores in use; ties go to the lowest index.
    """
    pnodes = platform.nodes

    def key(i: int) -> tuple[float, float, int]:
        node = pnodes[i]
        cap = free.get(i)
        used = 0.0 if cap is None or node.cores <= 0 else (node.cores - cap[0]) / node.cores
        return node.power.busy_w, -used, i

    return sorted(nodes, key=key)


def parse_units(text: str) -> tuple[Unit, ...]:
    """Units from their text form (see the module's documentation); ``ValueError`` says what is wrong."""
    text = text.strip()
    if not text:
        return ()
    out: list[Unit] = []
    for part in text.split(";"):
        part = part.strip()
        count = 1
        if "*" in part:
            times, _, part = part.partition("*")
            if not times.strip().isdigit() or int(times) < 1:
                raise ValueError(f"unit repetition {times.strip()!r} is not a positive whole number")
            count = int(times)
        part = part.strip()
        values = {"c": 0, "g": 0, "m": 0, "mem": 0}
        pos = 0
        seen: set[str] = set()
        for match in _PART.finditer(part):
            if match.start() != pos:
                break
            pos = match.end()
            key = "mem" if match.group(2) in "MG" else match.group(2)
            if key in seen:
                raise ValueError(f"unit {part!r} gives {'memory' if key == 'mem' else repr(key)} twice")
            seen.add(key)
            n = int(match.group(1))
            values[key] = n * 1024 if match.group(2) == "G" else n
        if pos != len(part) or not part:
            raise ValueError(f"unit {part!r} is not of the form 8c1g2m4G (cores, GPUs, MICs, memory in M or G)")
        if values["c"] + values["g"] + values["m"] == 0:
            raise ValueError(f"unit {part!r} asks no cores, GPUs or MICs")
        if len(out) + count > MAX_UNITS:
            raise ValueError(f"more than {MAX_UNITS} units in one job")
        out.extend([Unit(values["c"], values["g"], values["m"], values["mem"])] * count)
    return tuple(out)


class UnitsText:
    """Units formatted only when shown (a reason policies give at every decision)."""

    __slots__ = ("units",)

    def __init__(self, units: Sequence[Unit]):
        self.units = units

    def __str__(self) -> str:
        return format_units(self.units)


def format_units(units: Sequence[Unit]) -> str:
    """The text form of ``units`` (runs of equal units as ``N*``); ``""`` for a whole-node job."""
    parts: list[str] = []
    i = 0
    while i < len(units):
        u = units[i]
        j = i
        while j < len(units) and units[j] == u:
            j += 1
        text = "".join(f"{v}{k}" for v, k in ((u.cores, "c"), (u.gpus, "g"), (u.mics, "m")) if v)
        if u.mem_mb:
            text += f"{u.mem_mb}M"
        parts.append(text if j - i == 1 else f"{j - i}*{text}")
        i = j
    return ";".join(parts)


def pack_starts(snapshot: Snapshot, plan: Plan) -> Plan:
    """Map the jobs of units a whole-node policy started: their units packed onto shared and given nodes.

    A policy that maps units itself declares ``maps_units=True`` in its tags (``ls``,
    ``dec``); for every other, the simulator passes its plan through this
    before the guard. Each Start of a job of units is re-mapped, first fit in
    :func:`loaded_first` order, over the partly used nodes, the nodes the
    policy gave it, and, if these cannot host its units (a GPU unit given a
    node without GPUs), any idle node no whole-node start of the plan takes. A start
    that cannot be mapped, or that carries a cap or a frequency (its nodes
    may be shared), is dropped from the plan with a reason: the job waits.
    The policy's power accounting holds, units counting as nodes do.
    Plans without a job of units are returned as they are.
    """
    pending = snapshot.pending
    if not any(type(a) is Start and (j := pending.get(a.job_id)) is not None and j.units for a in plan.actions):
        return plan
    platform = snapshot.platform
    shared = dict(snapshot.node_free)
    whole = {n for a in plan.actions
             if type(a) is Start and not ((j := pending.get(a.job_id)) is not None and j.units) for n in a.nodes}
    idle = [n for n in reversed(snapshot.free_nodes) if n not in whole]  # idle nodes left to units
    actions = []
    reasons = dict(plan.reasons)
    for a in plan.actions:
        if type(a) is Evict:
            run = snapshot.running.get(a.job_id)
            if run is not None and run.job.units:
                for u, n in zip(run.job.units, run.nodes, strict=False):
                    if n in shared:
                        shared[n] = plus(shared[n], u)
        job = pending.get(a.job_id) if type(a) is Start else None
        if job is None or not job.units:
            actions.append(a)
            continue
        if a.cap_w is not None or a.freq_hz is not None:
            reasons[job.id] = "a job of units shares its nodes: it starts without a cap or a frequency of its own"
            continue
        own = [n for n in dict.fromkeys(a.nodes) if n not in shared and n in idle]
        placed = place(job.units, loaded_first(platform, [*shared, *own], shared), platform, shared,
                       job.distinct_nodes)
        if placed is None:
            placed = place(job.units, loaded_first(platform, [*shared, *idle], shared), platform, shared,
                           job.distinct_nodes)
        if placed is None:
            reasons[job.id] = "its units do not fit on the nodes free now"
            continue
        take(shared, platform, job.units, placed)
        idle = [n for n in idle if n not in shared]
        actions.append(Start(a.job_id, placed))
    return Plan(actions, reasons, plan.default_reason, plan.power_estimate_w)
