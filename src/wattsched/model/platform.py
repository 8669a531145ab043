"""Nodes, their power model, and the platform they form."""

from __future__ import annotations

import dataclasses
import enum
import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

from wattsched.model.response import DEFAULT_CLASSES, ResponseModel


class NodeState(enum.IntEnum):
    """Power and allocation state of a node."""

    IDLE = 0
    BUSY = 1
    OFF = 2
    SWITCHING_ON = 3
    SWITCHING_OFF = 4
    DRAINED = 5
    DOWN = 6


@dataclass(frozen=True, slots=True)
class NodePowerModel:
    """Power of one node in each state, and its control range.

    The default values are the Grid'5000 *taurus* node measured with NAS EP
    class C (batsim's ``cluster_energy_128.xml``): 9.75 W off, 95 W idle,
    190.738 W at full load at 2.301 GHz, 125.88 W at 1.2 GHz; switching off
    takes 6.1 s at 101 W, switching on 151.52 s at 125.17 W.

    ``busy_w`` is the node power of a running job that brings no power of its
    own (a trace without power data and no augmentation); ``busy_min_w`` is
    the low end of the busy range used by the power augmentation.
    """

    off_w: float = 9.75
    idle_w: float = 95.0
    busy_w: float = 190.738
    busy_min_w: float = 125.88
    gpu_tdp_w: float = 0.0
    switch_on_s: float = 151.52
    switch_on_w: float = 125.1743848996832
    switch_off_s: float = 6.1
    switch_off_w: float = 100.99672131147543
    freq_levels_hz: tuple[float, ...] = (
        1.2e9, 1.3e9, 1.4e9, 1.5e9, 1.6e9, 1.7e9, 1.8e9, 1.9e9, 2.0e9, 2.1e9, 2.2e9, 2.3e9, 2.301e9,
    )
    cap_min_w: float = 100.0
    cap_max_w: float = 190.738

    @property
    def max_freq_hz(self) -> float:
        return max(self.freq_levels_hz) if self.freq_levels_hz else 0.0

    @property
    def min_freq_hz(self) -> float:
        return min(self.freq_levels_hz) if self.freq_levels_hz else 0.0


@dataclass(frozen=True, slots=True)
class Node:
    """One compute node. ``index`` is its position in :attr:`Platform.nodes`."""

    index: int
    name: str
    cores: int = 1
    gpus: int = 0
    mem_mb: int = 0
    features: tuple[str, ...] = ()
    group: str = "default"
    power: NodePowerModel = field(default_factory=NodePowerModel)
    mics: int = 0


class Platform:
    """A set of nodes. Nodes are addressed by index in plans; names are for humans and Slurm.

    Every node carries its own power model (:attr:`Node.power`), so a platform
    may mix node groups; code that needs one figure for the whole platform uses
    the aggregates below (:attr:`min_idle_w`, :meth:`max_busy_w`,
    :attr:`reference_power`), never the first node's model.

    Parameters
    ----------
    nodes
        The nodes, ``nodes[i].index == i``.
    name
        A label used in reports.
    response_classes
        Response model per application class (how a job's power and runtime
        change under a cap or a lower frequency); default
        :data:`~wattsched.model.response.DEFAULT_CLASSES`.
    source
        The platform file it was read from, if any (for messages).
    budget_w, cpu_power_levels_w, base_w, mem_w
        An overprovisioned machine (Sarood et al. 2014): its power budget
        ``W_max`` in watts, the CPU power caps a job's nodes may get
        (``P_j``, ascending), and each node's base and memory power, so that a
        node at CPU level ``p`` counts ``base_w + mem_w + p`` against the
        budget. All ``None`` (the default) for a conventional platform: no
        policy but PARM reads them, and the engine does not.

    Examples
    --------
    >>> p = Platform.homogeneous_cluster(2)
    >>> p.budget_w, p.cpu_power_levels_w, p.base_w, p.mem_w
    (None, None, None, None)
    """

    def __init__(self, nodes: list[Node], name: str = "platform",
                 response_classes: Mapping[str, ResponseModel] | None = None, source: str | None = None, *,
                 budget_w: float | None = None, cpu_power_levels_w: tuple[float, ...] | None = None,
                 base_w: float | None = None, mem_w: float | None = None):
        for i, node in enumerate(nodes):
            if node.index != i:
                raise ValueError(f"node {node.name!r} has index {node.index}, expected {i}")
        if not nodes:
            raise ValueError("a platform needs at least one node")
        self.nodes = nodes
        self.name = name
        self.source = source
        self._by_name = {n.name: n.index for n in nodes}
        self.homogeneous = len({(n.power, n.cores, n.gpus, n.mics, n.mem_mb) for n in nodes}) == 1
        self.response_classes: Mapping[str, ResponseModel] = dict(
            DEFAULT_CLASSES if response_classes is None else response_classes)
        self.min_idle_w = min(n.power.idle_w for n in nodes)
        """The lowest idle power of any node.

        Starting a job on an idle node adds at most the job's node power minus this.
        """
        groups: dict[str, list[int]] = {}
        for n in nodes:
            groups.setdefault(n.group, []).append(n.index)
        self.groups: Mapping[str, tuple[int, ...]] = {g: tuple(ix) for g, ix in groups.items()}
        """Node indices by group name, in platform order."""
        counts = Counter(n.power for n in nodes)
        self.reference_power: NodePowerModel = max(counts, key=lambda pm: counts[pm]) if len(counts) > 1 \
            else nodes[0].power
        """The power model of the most numerous nodes (the only one on a homogeneous platform).

        For what must be decided before a job has nodes and only needs a
        typical node, such as augmenting a trace without power data.
        """
        self._max_busy_w = max(n.power.busy_w for n in nodes)
        self.max_gpu_tdp_w = max(n.power.gpu_tdp_w for n in nodes)
        """The highest GPU TDP of any node."""
        self.budget_w = budget_w
        """Power budget of the machine (``W_max``) in watts, or ``None``: not an overprovisioned platform."""
        self.cpu_power_levels_w = None if cpu_power_levels_w is None else tuple(sorted(cpu_power_levels_w))
        """CPU power caps a job's nodes may get (``P_j``), ascending, in watts, or ``None``."""
        self.base_w = base_w
        """Base power of a node (besides CPU and memory) in watts, or ``None``."""
        self.mem_w = mem_w
        """Memory power of a node in watts, or ``None``."""

    def with_response_classes(self, response_classes: Mapping[str, ResponseModel]) -> Platform:
        """The same nodes with other response models."""
        return Platform(self.nodes, self.name, response_classes, self.source, budget_w=self.budget_w,
                        cpu_power_levels_w=self.cpu_power_levels_w, base_w=self.base_w, mem_w=self.mem_w)

    def naive(self, cpu_w: float) -> Platform:
        """The naive overprovisioned machine of Sarood et al. 2014 (§VII-D): every node at one CPU level ``cpu_w``,
        as many nodes as the budget feeds at it, ``floor(budget_w / (base_w + mem_w + cpu_w))``, each a copy of
        the first node with busy power ``base_w + mem_w + cpu_w``; its only level is ``cpu_w``.

        >>> p = Platform.homogeneous_cluster(2)
        >>> q = Platform(p.nodes, "m", budget_w=4751360.0, cpu_power_levels_w=(30.0, 60.0), base_w=38.0, mem_w=18.0)
        >>> n = q.naive(30.0)
        >>> len(n), n.cpu_power_levels_w, n.nodes[0].power.busy_w, n.name
        (55248, (30.0,), 86.0, 'm-naive-30W')
        """
        if not self.overprovisioned:
            raise ValueError(f"platform {self.name!r} is not overprovisioned (no budget_w, cpu_power_levels_w, "
                             "base_w and mem_w): the naive strategy divides a budget among nodes")
        if not (math.isfinite(cpu_w) and cpu_w > 0):
            raise ValueError(f"the CPU level must be a positive number of watts, got {cpu_w!r}")
        node_w = self.base_w + self.mem_w + cpu_w
        count = int(self.budget_w // node_w)
        if count < 1:
            raise ValueError(f"a budget of {self.budget_w:g} W feeds no node at {node_w:g} W")
        tpl = self.nodes[0]
        power = dataclasses.replace(tpl.power, busy_w=node_w, busy_min_w=min(tpl.power.busy_min_w, node_w),
                                    cap_min_w=min(tpl.power.cap_min_w, node_w), cap_max_w=node_w)
        prefix = tpl.name.rstrip("0123456789") or "node"
        width = max(4, len(str(count - 1)))
        nodes = [dataclasses.replace(tpl, index=i, name=f"{prefix}{i:0{width}d}", power=power) for i in range(count)]
        return Platform(nodes, f"{self.name}-naive-{cpu_w:g}W", self.response_classes, self.source,
                        budget_w=self.budget_w, cpu_power_levels_w=(cpu_w,), base_w=self.base_w, mem_w=self.mem_w)

    @property
    def overprovisioned(self) -> bool:
        """Whether the platform gives jobs CPU power levels, counted with each node's base and memory power
        (Sarood et al. 2014): the platforms on which jobs of PASS applications are timed by node count and cap.

        >>> Platform.homogeneous_cluster(2).overprovisioned
        False
        """
        return self.cpu_power_levels_w is not None and self.base_w is not None and self.mem_w is not None

    def node_power_at_level_w(self, cpu_w: float) -> float:
        """What one node at CPU power ``cpu_w`` counts against :attr:`budget_w`: ``base_w + mem_w + cpu_w``.

        >>> Platform.homogeneous_cluster(1, name="x").node_power_at_level_w(30.0)
        Traceback (most recent call last):
        ...
        ValueError: platform 'x' has no base_w and mem_w (not an overprovisioned platform)
        """
        if self.base_w is None or self.mem_w is None:
            raise ValueError(f"platform {self.name!r} has no base_w and mem_w (not an overprovisioned platform)")
        return self.base_w + self.mem_w + cpu_w

    def response_for(self, app_class: str) -> ResponseModel | None:
        """The response model of a job class, or None for a class the platform does not know."""
        return self.response_classes.get(app_class)

    def max_busy_w(self, gpus_per_node: int = 0) -> float:
        """The most one node of a job with ``gpus_per_node`` GPUs can draw on this platform (nominal busy power).

        >>> a, b = NodePowerModel(busy_w=200.0), NodePowerModel(busy_w=300.0)
        >>> p = Platform([Node(0, "a", power=a), Node(1, "b", power=b)])
        >>> p.max_busy_w(), p.homogeneous
        (300.0, False)
        """
        if self.homogeneous:
            pm = self.nodes[0].power
            return pm.busy_w + gpus_per_node * pm.gpu_tdp_w
        return max(n.power.busy_w + gpus_per_node * n.power.gpu_tdp_w for n in self.nodes) if gpus_per_node \
            else self._max_busy_w

    def idle_w_of(self, nodes: tuple[int, ...] | list[int]) -> float:
        """Idle power of the given nodes together."""
        if self.homogeneous:
            return self.nodes[0].power.idle_w * len(nodes)
        return sum(self.nodes[i].power.idle_w for i in nodes)

    def __len__(self) -> int:
        return len(self.nodes)

    def __repr__(self) -> str:
        return f"Platform({self.name!r}, {len(self.nodes)} nodes)"

    def index_of(self, name: str) -> int:
        return self._by_name[name]

    @property
    def total_cores(self) -> int:
        return sum(n.cores for n in self.nodes)

    @property
    def max_power_w(self) -> float:
        """Power with every node busy at its ``busy_w`` (plus GPUs at TDP)."""
        return sum(n.power.busy_w + n.gpus * n.power.gpu_tdp_w for n in self.nodes)

    @property
    def idle_power_w(self) -> float:
        return sum(n.power.idle_w for n in self.nodes)

    @property
    def max_dynamic_power_w(self) -> float:
        """Maximum power above idle, the reference for caps given as a fraction."""
        return self.max_power_w - self.idle_power_w

    @classmethod
    def homogeneous_cluster(
        cls,
        count: int,
        cores: int = 1,
        power: NodePowerModel | None = None,
        name: str = "cluster",
        prefix: str = "node",
        gpus: int = 0,
        mem_mb: int = 0,
    ) -> Platform:
        """Build ``count`` identical nodes named ``{prefix}{i:04d}``.

        >>> Platform.homogeneous_cluster(3).nodes[2].name
        'node0002'
        """
        power = power or NodePowerModel()
        width = max(4, len(str(count - 1)))
        nodes = [
            Node(i, f"{prefix}{i:0{width}d}", cores=cores, gpus=gpus, mem_mb=mem_mb, power=power)
            for i in range(count)
        ]
        return cls(nodes, name=name)
