"""The cluster ledger: the bookkeeping of a cluster, updated by small typed operations.

One ledger holds what a policy's snapshot shows of the machine, and what the
energy accounting needs: each node's state (idle, busy, off, switching) with
the node-seconds and energy spent in each state, the free nodes, and the
platform's power and energy. It is pure: no I/O, no clock of its own. Time
arrives with :meth:`Ledger.advance` (which integrates energy exactly, power
being piecewise constant between two advances), and the other operations
(a node taken or given back, a node switched off or on, ...) act at the
ledger's current time.

The simulator's engine drives a ledger from its event heap; the daemon's view
is meant to fill the same one from Slurm and telemetry (DESIGN.md §1).
"""

from __future__ import annotations

from wattsched.model.platform import NodeState, Platform

IDLE = _IDLE = int(NodeState.IDLE)
BUSY = _BUSY = int(NodeState.BUSY)
OFF = _OFF = int(NodeState.OFF)
SW_ON = _SW_ON = int(NodeState.SWITCHING_ON)
SW_OFF = _SW_OFF = int(NodeState.SWITCHING_OFF)
_STATES = 7
"""Size of the per-state counters (every :class:`NodeState` value has a slot)."""


def _insertion_point(free: list[int], node: int) -> int:
    """Where ``node`` goes in the decreasing list ``free``: ``bisect_left(free, -node, key=neg)``, written out
    so that the compiled core runs it on C integers.

    >>> _insertion_point([7, 5, 2], 4)
    2
    """
    lo, hi = 0, len(free)
    while lo < hi:
        mid = (lo + hi) >> 1
        if free[mid] > node:
            lo = mid + 1
        else:
            hi = mid
    return lo


class Ledger:
    """The bookkeeping of ``platform``: node states, free nodes, power and energy.

    Parameters
    ----------
    platform
        The machine. Every node starts idle.

    Attributes
    ----------
    now
        Time the books stand at (s): energy is integrated up to it.
    state
        Each node's :class:`NodeState` value.
    free
        Idle nodes by decreasing index, the order the daemon lists them in too
        (see ``Snapshot.free_nodes``): policies take from the end, the
        lowest-numbered first.
    power_w, energy_j
        Platform power now, and energy since the books opened.
    state_node_s, state_energy_j
        Node-seconds and energy spent in each state (indexed by state value),
        up to the last change of that state (:meth:`close` brings them to now).
    """

    def __init__(self, platform: Platform):
        n = len(platform.nodes)
        self.platform = platform
        self.now = 0.0
        self.state = [_IDLE] * n
        self.free: list[int] = list(range(n - 1, -1, -1))
        self.idle_w = [node.power.idle_w for node in platform.nodes]
        self.busy_w = [node.power.busy_w for node in platform.nodes]
        self.gpu_tdp_w = [node.power.gpu_tdp_w for node in platform.nodes]
        self.homogeneous = platform.homogeneous
        self.power_w = float(sum(self.idle_w))
        self.energy_j = 0.0
        self.state_node_s = [0.0] * _STATES
        self.state_energy_j = [0.0] * _STATES
        self.state_count = [0] * _STATES
        self.state_count[_IDLE] = n
        self.state_power = [0.0] * _STATES
        self.state_power[_IDLE] = self.power_w
        self.state_t = [0.0] * _STATES  # when each state's node-seconds and energy were last integrated

    # ------------------------------------------------------------------ time
    def open(self, t: float) -> None:
        """Open the books at ``t``: nothing is counted before it."""
        self.now = t
        for i in range(_STATES):
            self.state_t[i] = t

    def advance(self, t: float) -> None:
        """Move the books on to ``t``, adding the energy drawn since the last advance (power held constant)."""
        if t > self.now:
            self.energy_j += self.power_w * (t - self.now)
            self.now = t

    def close(self) -> None:
        """Bring every state's node-seconds and energy up to now."""
        for state in (_IDLE, _BUSY, _OFF, _SW_ON, _SW_OFF):
            self.touch(state)

    # ------------------------------------------------------------------ per-state counters
    def touch(self, state: int) -> None:
        """Integrate the node-seconds and energy of ``state`` up to now (before it changes)."""
        dt = self.now - self.state_t[state]
        if dt > 0:
            self.state_energy_j[state] += self.state_power[state] * dt
            self.state_node_s[state] += self.state_count[state] * dt
        self.state_t[state] = self.now

    def set_power(self, state: int, delta: float) -> None:
        """The nodes in ``state`` draw ``delta`` W more (negative: less)."""
        self.touch(state)
        self.power_w += delta
        self.state_power[state] += delta

    def move_nodes(self, old: int, new: int, count: int) -> None:
        """``count`` nodes go from state ``old`` to ``new`` (their power moves apart: :meth:`set_power`)."""
        self.touch(old)
        self.touch(new)
        self.state_count[old] -= count
        self.state_count[new] += count

    def occupy(self, count: int, idle_w: float, busy_w: float) -> None:
        """``count`` nodes drawing ``idle_w`` in all go busy drawing ``busy_w`` (negative: the reverse)."""
        now = self.now
        dt = now - self.state_t[_IDLE]
        if dt > 0:
            self.state_energy_j[_IDLE] += self.state_power[_IDLE] * dt
            self.state_node_s[_IDLE] += self.state_count[_IDLE] * dt
            self.state_t[_IDLE] = now
        dt = now - self.state_t[_BUSY]
        if dt > 0:
            self.state_energy_j[_BUSY] += self.state_power[_BUSY] * dt
            self.state_node_s[_BUSY] += self.state_count[_BUSY] * dt
            self.state_t[_BUSY] = now
        self.state_count[_IDLE] -= count
        self.state_count[_BUSY] += count
        self.state_power[_IDLE] -= idle_w
        self.state_power[_BUSY] += busy_w
        self.power_w += busy_w - idle_w

    def jobs_power_w(self) -> float:
        """Power of the busy nodes."""
        return self.state_power[_BUSY]

    def count(self, state: int) -> int:
        """Nodes in ``state`` now."""
        return self.state_count[state]

    # ------------------------------------------------------------------ free nodes
    def take(self, node: int) -> None:
        """``node`` leaves the free list."""
        free = self.free
        del free[_insertion_point(free, node)]

    def give(self, node: int) -> None:
        """``node`` joins the free list."""
        self.free.insert(_insertion_point(self.free, node), node)

    def give_all(self, nodes: tuple[int, ...]) -> None:
        """``nodes`` join the free list."""
        free = self.free
        if len(nodes) <= 8:
            for n in nodes:
                free.insert(_insertion_point(free, n), n)
            return
        top = _insertion_point(free, max(nodes))
        if top == _insertion_point(free, min(nodes)):
            # no free node lies between the job's lowest and highest: its nodes go in as one block
            # (the usual case: a job gets a run of neighbouring free nodes), without sorting the list
            free[top:top] = sorted(nodes, reverse=True)
        else:
            free.extend(nodes)
            free.sort(reverse=True)

    # ------------------------------------------------------------------ power saving
    def power_down(self, n: int) -> float:
        """Idle node ``n`` starts switching off; returns how long that takes (s)."""
        pm = self.platform.nodes[n].power
        self.take(n)
        self.state[n] = _SW_OFF
        self.move_nodes(_IDLE, _SW_OFF, 1)
        self.set_power(_IDLE, -pm.idle_w)
        self.set_power(_SW_OFF, pm.switch_off_w)
        return pm.switch_off_s

    def power_up(self, n: int) -> float:
        """Node ``n``, off, starts switching on; returns how long that takes (s)."""
        pm = self.platform.nodes[n].power
        self.state[n] = _SW_ON
        self.move_nodes(_OFF, _SW_ON, 1)
        self.set_power(_OFF, -pm.off_w)
        self.set_power(_SW_ON, pm.switch_on_w)
        return pm.switch_on_s

    def switch_done(self, n: int, from_state: int) -> bool:
        """Node ``n`` ends its switch from ``from_state``: off, or idle and free; False if it was not switching so."""
        pm = self.platform.nodes[n].power
        if self.state[n] != from_state:
            return False
        if from_state == _SW_OFF:
            self.state[n] = _OFF
            self.move_nodes(_SW_OFF, _OFF, 1)
            self.set_power(_SW_OFF, -pm.switch_off_w)
            self.set_power(_OFF, pm.off_w)
        else:
            self.state[n] = _IDLE
            self.give(n)
            self.move_nodes(_SW_ON, _IDLE, 1)
            self.set_power(_SW_ON, -pm.switch_on_w)
            self.set_power(_IDLE, pm.idle_w)
        return True
