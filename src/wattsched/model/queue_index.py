"""An index over the pending queue for fast backfilling candidate search.

EASY-style backfilling asks, many times per simulated second on a loaded
machine, "which queued jobs, in queue order, fit in ``free`` nodes and either
end before ``t`` or need at most ``extra`` nodes?". Scanning a queue of
thousands of jobs in Python for that at every event dominates a simulation.
The index keeps the jobs' node counts and requested times in numpy arrays, in
queue order, so the question is answered by a few vectorised comparisons.

The simulator keeps one up to date and the daemon builds one each cycle
(:meth:`~wattsched.model.snapshot.Snapshot.build_indexes`); either exposes it
as ``Snapshot.queue_index``, and a policy given a snapshot without one builds
it.

Given the platform's idle node power (``idle_w``), the index also keeps each
job's predicted *increments*, what starting it adds to the platform's
predicted power (see :class:`~wattsched.policies.power.PowerLedger`), computed
once when its estimate is set instead of at every power-aware search.

Compiled with the core (``queue_index.pxd``): a job is appended when it is
submitted and removed when it starts, a few stores each, made through typed
views of the arrays rather than numpy's item assignment.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np

from wattsched.model.job import Job, PowerEstimate

DEAD_NODES = 2**62
"""Node count stored for removed jobs, so that ``nodes <= free`` alone leaves them out."""

_INF = float("inf")

_COMPACT_MIN_DEAD = 256
"""Fewer removed jobs than this are not worth compacting for."""


class QueueIndex:
    """Arrays of the pending jobs in queue order, with lazy deletion.

    Removed jobs stay in the arrays (``alive`` false, ``nodes`` set to
    :data:`DEAD_NODES`, requested time and increments to ``inf``) until more
    than half the entries are dead; then the arrays are compacted, keeping the
    order.

    >>> from wattsched.model.job import Job, PowerEstimate
    >>> q = QueueIndex()
    >>> for i, (n, w) in enumerate([(4, 100), (1, 50), (2, 500), (1, 900)]):
    ...     q.append(Job(i, 0.0, w, n))
    >>> q.remove(1)
    >>> [int(q.ids[p]) for p in q.candidates(after_id=0, free=2, horizon_s=600, extra=0)]
    [2]
    >>> [int(q.ids[p]) for p in q.candidates(after_id=0, free=2, horizon_s=600, extra=1)]
    [2, 3]
    """

    _ARRAYS = ("ids", "nodes", "wall", "alive", "est_mean", "est_max", "est_std", "inc_mean", "inc_max", "inc_var")

    def __init__(self, capacity: int = 1024, idle_w: float | None = None):
        self.idle_w = idle_w
        self.ids = np.zeros(capacity, dtype=np.int64)
        self.nodes = np.zeros(capacity, dtype=np.int64)
        self.wall = np.zeros(capacity, dtype=np.float64)
        self.alive = np.zeros(capacity, dtype=bool)
        self.est_mean = np.full(capacity, np.nan)  # predicted per-node power, when known
        self.est_max = np.full(capacity, np.nan)
        self.est_std = np.full(capacity, np.nan)
        # With ``idle_w``: per job, what starting it adds to the predicted platform power
        # (mean, max, variance); -inf, -inf, 0 while it has no estimate (it passes any power filter).
        self.inc_mean = np.full(capacity, -np.inf)
        self.inc_max = np.full(capacity, -np.inf)
        self.inc_var = np.zeros(capacity)
        self.pos: dict[int, int] = {}
        self.size = 0
        self.dead = 0
        self._sizes: dict[int, int] = {}  # live jobs by node count
        self._smallest = DEAD_NODES  # the fewest nodes a live job needs; -1: to be found again
        self._views()

    def _views(self) -> None:
        """Typed views of the arrays, taken again whenever they are replaced (compiled: the per-job loads and
        stores are C ones; as pure Python, the arrays themselves)."""
        self._ids, self._nodes, self._wall = self.ids, self.nodes, self.wall
        self._alive = self.alive.view(np.uint8)
        self._est_mean, self._est_max, self._est_std = self.est_mean, self.est_max, self.est_std
        self._inc_mean, self._inc_max, self._inc_var = self.inc_mean, self.inc_max, self.inc_var

    @classmethod
    def of(cls, jobs: Iterable[Job], estimate: Callable[[Job], PowerEstimate] | None = None,
           idle_w: float | None = None) -> QueueIndex:
        """An index of ``jobs`` (in queue order) with the per-node estimates ``estimate`` gives them.

        What a source that keeps the index up to date holds after appending
        the jobs and setting their estimates as they came (the simulator's).
        """
        jobs = list(jobs)
        index = cls(max(1024, len(jobs)), idle_w)
        index.extend(jobs)
        if estimate is not None and jobs:
            ests = [estimate(job) for job in jobs]
            index.set_estimates([job.id for job in jobs], [e.mean_w for e in ests], [e.max_w for e in ests],
                                [e.std_w for e in ests])
        return index

    def extend(self, jobs: list[Job]) -> None:
        """:meth:`append` each of ``jobs``, in order (at once: a source that builds a fresh index)."""
        if self.dead or self.size + len(jobs) > len(self.ids):
            for job in jobs:
                self.append(job)
            return
        i, n = self.size, len(jobs)
        ids = [job.id for job in jobs]
        self.ids[i : i + n] = ids
        self.nodes[i : i + n] = [job.nodes for job in jobs]
        self.wall[i : i + n] = [job.walltime_s for job in jobs]
        self.alive[i : i + n] = True
        self.pos.update(zip(ids, range(i, i + n)))
        self.size = i + n
        for job in jobs:
            self._count(job.nodes)

    def set_estimates(self, job_ids: list[int], mean_w, max_w, std_w) -> None:
        """:meth:`set_estimate` for each of ``job_ids`` (in the index), with the same arithmetic, at once."""
        at = np.fromiter((self.pos[j] for j in job_ids), dtype=np.int64, count=len(job_ids))
        mean = np.asarray(mean_w, dtype=np.float64)
        mx = np.asarray(max_w, dtype=np.float64)
        std = np.asarray(std_w, dtype=np.float64)
        self.est_mean[at] = mean
        self.est_max[at] = mx
        self.est_std[at] = std
        idle = self.idle_w
        if idle is not None:
            known = mean == mean  # NaN: unknown, keeps the -inf that passes every filter
            at, mean, mx, std = at[known], mean[known], mx[known], std[known]
            n = self.nodes[at].astype(np.float64)  # Python's int × float converts the int so too
            self.inc_mean[at] = (mean - idle) * n
            self.inc_max[at] = (mx - idle) * n
            v = std * n
            self.inc_var[at] = v * v

    def __len__(self) -> int:
        return len(self.pos)

    def smallest(self) -> int:
        """The fewest nodes a pending job asks, :data:`DEAD_NODES` with none pending.

        >>> q = QueueIndex()
        >>> for i, n in enumerate([4, 2, 2]):
        ...     q.append(Job(i, 0.0, 60.0, n))
        >>> q.smallest(), q.remove(1), q.smallest(), q.remove(2), q.smallest()
        (2, None, 2, None, 4)
        """
        if self._smallest < 0:
            self._smallest = min(self._sizes) if self._sizes else DEAD_NODES
        return self._smallest

    def _count(self, nodes: int) -> None:
        sizes = self._sizes
        sizes[nodes] = sizes.get(nodes, 0) + 1
        if nodes < self._smallest:
            self._smallest = nodes

    def _grow(self) -> None:
        cap = max(1024, 2 * len(self.ids))
        for name in self._ARRAYS:
            old = getattr(self, name)
            new = np.zeros(cap, dtype=old.dtype)  # ids, nodes, wall and alive past ``size`` are set by append
            new[: self.size] = old[: self.size]
            setattr(self, name, new)
        self._views()
        self._clear(self.size, cap)

    def _clear(self, start: int, stop: int) -> None:
        """Give entries ``start:stop`` the estimates of a job that has none (append sets only the rest)."""
        self.est_mean[start:stop] = self.est_max[start:stop] = self.est_std[start:stop] = np.nan
        self.inc_mean[start:stop] = self.inc_max[start:stop] = -np.inf
        self.inc_var[start:stop] = 0.0

    def append(self, job: Job) -> None:
        i = self.size
        if i == self._ids.shape[0]:
            if self.dead > i // 2:
                self._compact()
                i = self.size
            if i == self._ids.shape[0]:
                self._grow()
        # four stores: the estimates past ``size`` are kept cleared (_clear), as a job without one has them
        self._ids[i] = job.id
        self._nodes[i] = job.nodes
        self._wall[i] = job.walltime_s
        self._alive[i] = 1
        self.pos[job.id] = i
        self.size = i + 1
        self._count(job.nodes)

    def set_estimate(self, job_id: int, mean_w: float, max_w: float, std_w: float = 0.0) -> None:
        """Record a pending job's predicted per-node power (for power-aware candidate search)."""
        i = self.pos.get(job_id)
        if i is not None:
            self._est_mean[i] = mean_w
            self._est_max[i] = max_w
            self._est_std[i] = std_w
            idle = self.idle_w
            if idle is not None and mean_w == mean_w:  # NaN: unknown, keeps the -inf that passes every filter
                # The same arithmetic as PowerLedger.increment, so filters on these agree with its checks.
                n = float(self._nodes[i])  # Python's int × float converts the int so too
                self._inc_mean[i] = (mean_w - idle) * n
                self._inc_max[i] = (max_w - idle) * n
                v = std_w * n
                self._inc_var[i] = v * v

    def remove(self, job_id: int) -> None:
        i = self.pos.pop(job_id)
        k = self._nodes[i]
        left = self._sizes[k] - 1
        if left:
            self._sizes[k] = left
        else:
            del self._sizes[k]
            if k == self._smallest:
                self._smallest = -1
        self._alive[i] = 0
        self._nodes[i] = DEAD_NODES
        self._inc_mean[i] = self._inc_max[i] = self._wall[i] = _INF
        self.dead += 1
        if self.dead >= _COMPACT_MIN_DEAD and 2 * self.dead > self.size:
            # Searches scan from the head to the end of the arrays: keep dead entries a minority.
            self._compact()

    def rebuild(self, jobs: Iterable[Job]) -> None:
        """Reset the index to ``jobs`` (in queue order)."""
        self.pos.clear()
        self._clear(0, self.size)
        self.size = 0
        self.dead = 0
        self._sizes.clear()
        self._smallest = DEAD_NODES
        self.alive[:] = False
        for job in jobs:
            self.append(job)

    def _compact(self) -> None:
        n = self.size
        keep = np.flatnonzero(self.alive[:n])
        m = len(keep)
        for name in self._ARRAYS:
            if name == "alive":
                continue
            arr = getattr(self, name)
            arr[:m] = arr[keep]
        self.alive[:m] = True
        self.alive[m:n] = False
        self._clear(m, n)
        self.size = m
        self.dead = 0
        self.pos = {int(j): p for p, j in enumerate(self.ids[:m].tolist())}

    def candidates(self, after_id: int, free: int, horizon_s: float, extra: int) -> np.ndarray:
        """Positions, in queue order, of live jobs after ``after_id`` that could backfill.

        A job qualifies if it needs at most ``free`` nodes and either requests
        at most ``horizon_s`` seconds or needs at most ``extra`` nodes.
        ``est_mean``, ``est_max`` and ``est_std`` at the returned positions let
        a power-aware policy filter them further.
        """
        start = self.pos[after_id] + 1 if after_id in self.pos else 0
        n = self.size
        if start >= n:
            return np.empty(0, dtype=np.int64)
        nodes = self.nodes[start:n]
        ok = nodes <= free
        if extra < free:
            ok &= (self.wall[start:n] <= horizon_s) | (nodes <= extra)
        ok &= self.alive[start:n]
        found = ok.nonzero()[0]  # np.flatnonzero without its Python wrappers (ok is 1-D): called per decision
        found += start
        return found
