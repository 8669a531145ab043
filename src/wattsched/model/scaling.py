"""PASS, the power-aware strong scaling model of Sarood et al. 2014 (§V): run time on ``n`` nodes at CPU cap ``p``.

The model is the product of two independent factors,

``t(n, p) = t(n) · g(p)``

* ``t(n)`` is Downey's strong scaling model (Eqs. 9-11): the run time on ``n``
  nodes of an application of average parallelism ``A``, variance ``σ`` and
  one-node time ``T1``, *at the frequency* ``f_h`` *beyond which it does not
  run faster*. Eqs. 9-11 are Downey's low-variance branch (``σ <= 1``); for
  ``σ > 1`` Downey's high-variance branch is used,
  ``t(n) = T1 (σ(n + A - 1) + A) / (n A (σ + 1))`` for
  ``n < A + Aσ - σ`` and ``T1 / A`` above. Both branches agree at ``σ = 1``.
* ``g(p)`` is the frequency model ``t(f) = W_cpu / f + T_mem`` (Eqs. 12-16)
  divided by ``T_h``: with ``K = β f_l / ((1 - β)(f_h - f_l))`` (Eqs. 15-16
  divided by ``T_h``), ``g = 1 + K (f_h / f - 1)``, so ``g(f_h) = 1`` and
  ``g(f_l) = 1 / (1 - β)`` (Eq. 14). The frequency under a cap comes from the
  CPU power model ``p = a f³ + b f + c`` (Eq. 18) inverted in closed form
  (:func:`cpu_frequency`).

Edges
-----
* **Caps.** A cap is clamped to ``[p_l, p_h]``. Above ``p_h`` the run time is
  ``T_h`` (Eq. 13: a higher frequency does not help). Below ``p_l`` the CPU can
  meet the cap only by throttling, where "the application performance degrades
  significantly even for very small savings in power" and the paper restricts
  itself to caps of ``p_l`` and above; the model has no equation there, so it
  answers for ``p_l`` (time ``T_l``). A caller that must not count such a cap
  as met (a scheduler's power ledger) asks :meth:`PassModel.below_floor` and
  either drops the level or counts ``p_l`` watts.
* **Nodes.** ``n`` may be any real number ``>= 1`` (a fraction is Downey's
  continuous model); below 1 is an error. Beyond ``2A - 1`` (or
  ``A + Aσ - σ``) the time is ``T1 / A`` and more nodes do not help.
* **Negative T_mem.** Eq. 16 gives ``T_mem < 0`` when ``1 / (1 - β) > f_h / f_l``
  (the application slows down more from ``f_h`` to ``f_l`` than a pure
  ``1 / f`` law allows); Table IV's LeanMD and AMR are such cases
  (:attr:`PassModel.t_mem_share`). The model keeps Eqs. 15-16 as printed:
  ``t(f)`` still decreases in ``f`` and stays positive on ``[f_l, f_h]`` (it
  equals ``T_h > 0`` at ``f_h``), and the fitted ``β`` (Fig. 3's end points)
  is kept exactly, where clamping ``T_mem`` at 0 would change it.

Eq. 19 as printed in the paper adds the second cube root; the root of the
depressed cubic ``a f³ + b f + (c - p) = 0`` (Cardano) subtracts it (with the
printed sign ``f = 2 ∛(b³/27a³)^½ ≠ 0`` at ``p = c``). :func:`cpu_frequency`
uses the correct root, in the form ``u - b / (3 a u)`` that has no
cancellation.

Evaluation needs numpy only; fitting (``wattsched.scalingmodels``) uses scipy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np


def cpu_frequency(p, a: float, b: float, c: float):
    """The frequency at which the CPU draws ``p`` watts under ``p = a f³ + b f + c`` (Eq. 19, corrected).

    Vectorised over ``p``; ``a > 0`` and ``b >= 0`` make the power increasing,
    so the root is unique. A power at or below ``c`` gives a frequency at or
    below 0 (the model's base power is never reached by a running CPU).

    >>> f = cpu_frequency(30.0, 1.65, 7.74, 13.5)
    >>> round(float(f), 4), round(1.65 * f ** 3 + 7.74 * f + 13.5, 9)
    (1.4635, 30.0)
    >>> abs(float(cpu_frequency(13.5, 1.65, 7.74, 13.5))) < 1e-12
    True
    """
    p = np.asarray(p, dtype=float)
    x = (p - c) / (2.0 * a)
    s = np.sqrt(x * x + (b / (3.0 * a)) ** 3)
    # u = ∛(x + s) is > 0 for every p when b > 0 (s > |x|); the other cube root of Cardano's formula is
    # -b / (3 a u) (their product is -b/3a), which avoids subtracting two nearly equal roots near p = c.
    u = np.cbrt(x + s)
    with np.errstate(divide="ignore", invalid="ignore"):
        f = np.where(u > 0, u - b / (3.0 * a * np.where(u > 0, u, 1.0)), np.cbrt(2.0 * x))
    return f if f.ndim else float(f)


def downey_time(n, A: float, sigma: float, T1: float):
    """Downey's run time on ``n`` nodes (Eqs. 9-11 for ``σ <= 1``, the high-variance branch above).

    Vectorised over ``n`` (``n >= 1``).

    >>> [round(float(downey_time(n, 10, 0.5, 100.0)), 4) for n in (1, 10, 15, 19, 40)]
    [100.0, 12.25, 10.6667, 10.0, 10.0]
    >>> round(float(downey_time(5, 10, 2.0, 100.0)), 4)
    25.3333
    """
    n = np.asarray(n, dtype=float)
    if np.any(~(n >= 1)) or np.any(~np.isfinite(n)):
        raise ValueError(f"node count must be a finite number >= 1, got {_first_bad(n)}")
    if sigma <= 1.0:
        tail = T1 * sigma / (2.0 * A)
        t = np.where(
            n <= A,
            (T1 - tail) / n + tail,                                          # Eq. 9
            np.where(n <= 2.0 * A - 1.0,
                     sigma * (T1 - T1 / (2.0 * A)) / n + T1 / A - tail,      # Eq. 10
                     T1 / A))                                                # Eq. 11
    else:
        knee = A + A * sigma - sigma
        t = np.where(n < knee, T1 * (sigma * (n + A - 1.0) + A) / (n * A * (sigma + 1.0)), T1 / A)
    return t if t.ndim else float(t)


def _first_bad(n: np.ndarray) -> float:
    flat = n.ravel()
    bad = flat[~((flat >= 1) & np.isfinite(flat))]
    return float(bad[0]) if bad.size else float("nan")


@dataclass(frozen=True, slots=True)
class PassModel:
    """One application's PASS parameters.

    ``a``, ``b``, ``c``
        CPU power model ``p = a f³ + b f + c`` (W, ``f`` in GHz; Eq. 18).
    ``p_l``, ``p_h``
        CPU power at the lowest DVFS frequency ``f_l`` and at the frequency
        ``f_h`` beyond which the application does not run faster (W).
    ``beta``
        Frequency sensitivity ``(T_l - T_h) / T_l`` (Eq. 14), in ``[0, 1)``.
    ``A``, ``sigma``, ``T1``
        Downey's average parallelism (``>= 1``), variance (``>= 0``) and run
        time on one node at ``f_h`` (s).
    ``ref_nodes``
        The node count ``A`` and ``sigma`` describe (0: every job runs the
        same problem). A job that asks for more nodes runs a proportionally
        larger problem: :meth:`for_request` scales ``A`` by
        ``requested / ref_nodes``, so that the job is as efficient on its
        request as the application is on ``ref_nodes``.

    >>> m = PassModel(a=1.65, b=7.74, c=13.5, p_l=30, p_h=52, beta=0.4, A=10, sigma=0.5, T1=100.0)
    >>> round(m.time(1, 52), 4), round(m.time(1, 30), 4), round(m.time(1, 10), 4), round(m.time(1, 99), 4)
    (100.0, 166.6667, 166.6667, 100.0)
    >>> round(m.max_speedup, 4), round(float(m.power_aware_speedup(52)), 4)
    (1.6667, 1.6667)
    """

    a: float
    b: float
    c: float
    p_l: float
    p_h: float
    beta: float
    A: float
    sigma: float
    T1: float
    ref_nodes: float = 0.0
    _freqs: tuple = field(default=(), init=False, repr=False, compare=False)
    """``(f_l, f_h)``, worked out at the first use (the simulator asks them at every rate of every job)."""

    def problems(self) -> list[str]:
        """What makes the parameters unusable (empty when they are fine).

        >>> PassModel(1.0, 1.0, 20.0, 15.0, 10.0, 1.0, 0.5, -1.0, 0.0).problems()[:3]
        ['p_l must be above c (the base power), got p_l=15 <= c=20', 'p_h must be >= p_l, got 10 < 15', \
'beta must be in [0, 1), got 1']
        """
        out = []
        vals = {k: getattr(self, k) for k in ("a", "b", "c", "p_l", "p_h", "beta", "A", "sigma", "T1", "ref_nodes")}
        bad = [k for k, v in vals.items() if not (isinstance(v, (int, float)) and math.isfinite(v))]
        if bad:
            return [f"{k} must be a finite number, got {vals[k]!r}" for k in bad]
        if self.a <= 0:
            out.append(f"a must be > 0, got {self.a:g}")
        if self.b < 0:
            out.append(f"b must be >= 0, got {self.b:g}")
        if self.p_l <= self.c:
            out.append(f"p_l must be above c (the base power), got p_l={self.p_l:g} <= c={self.c:g}")
        if self.p_h < self.p_l:
            out.append(f"p_h must be >= p_l, got {self.p_h:g} < {self.p_l:g}")
        if not 0 <= self.beta < 1:
            out.append(f"beta must be in [0, 1), got {self.beta:g}")
        elif self.beta > 0 and self.p_h == self.p_l:
            out.append("p_h must be above p_l when beta > 0 (the time falls between them)")
        if self.A < 1:
            out.append(f"A must be >= 1, got {self.A:g}")
        if self.ref_nodes < 0:
            out.append(f"ref_nodes must be >= 0, got {self.ref_nodes:g}")
        if self.sigma < 0:
            out.append(f"sigma must be >= 0, got {self.sigma:g}")
        if self.T1 <= 0:
            out.append(f"T1 must be > 0 s, got {self.T1:g}")
        return out

    # ------------------------------------------------------------ frequency and power
    def _derived(self) -> tuple:
        freqs = self._freqs
        if not freqs:
            fl = cpu_frequency(self.p_l, self.a, self.b, self.c)
            fh = cpu_frequency(self.p_h, self.a, self.b, self.c)
            freqs = (fl, fh)
            object.__setattr__(self, "_freqs", freqs)
        return freqs

    @property
    def f_l(self) -> float:
        """Frequency at ``p_l`` (GHz)."""
        return self._derived()[0]

    @property
    def f_h(self) -> float:
        """Frequency at ``p_h`` (GHz)."""
        return self._derived()[1]

    def power(self, f):
        """CPU power at frequency ``f`` (Eq. 18), vectorised."""
        f = np.asarray(f, dtype=float)
        p = self.a * f ** 3 + self.b * f + self.c
        return p if p.ndim else float(p)

    def frequency(self, p):
        """Frequency under cap ``p``, the cap clamped to ``[p_l, p_h]`` first (vectorised; NaN is an error)."""
        p = np.asarray(p, dtype=float)
        if np.isnan(p).any():
            raise ValueError("CPU cap is NaN")
        return cpu_frequency(np.clip(p, self.p_l, self.p_h), self.a, self.b, self.c)

    def below_floor(self, p):
        """Whether a cap is below ``p_l``, where the model answers for ``p_l`` (see the module's edges)."""
        r = np.asarray(p, dtype=float) < self.p_l
        return r if r.ndim else bool(r)

    @property
    def k(self) -> float:
        """``K = W_cpu / (T_h f_h) = β f_l / ((1 - β)(f_h - f_l))``: Eq. 15 divided by ``T_h f_h``."""
        if self.beta == 0:
            return 0.0
        fl, fh = self._derived()
        return self.beta * fl / ((1.0 - self.beta) * (fh - fl))

    @property
    def t_mem_share(self) -> float:
        """``T_mem / T_h`` (Eq. 16 divided by ``T_h``): negative where Table IV's numbers disagree (module doc)."""
        return 1.0 - self.k

    @property
    def max_speedup(self) -> float:
        """The largest power-aware speedup, ``T_l / T_h = 1 / (1 - β)``."""
        return 1.0 / (1.0 - self.beta)

    def slowdown(self, p):
        """``g(p) = t(n, p) / t(n, p_h)``, in ``[1, 1/(1 - β)]`` (vectorised)."""
        k = self.k
        g = 1.0 + k * (self.f_h / self.frequency(p) - 1.0)
        return g if np.ndim(g) else float(g)

    def power_aware_speedup(self, p):
        """Speedup at cap ``p`` over cap ``p_l`` on the same nodes (Fig. 3): ``t(n, p_l) / t(n, p)``."""
        s = self.max_speedup / np.asarray(self.slowdown(p))
        return s if s.ndim else float(s)

    # ------------------------------------------------------------ nodes
    def for_request(self, nodes: float) -> PassModel:
        """The model of a job of this application that asks for ``nodes`` nodes (see ``ref_nodes``).

        >>> m = PassModel(a=1.65, b=7.74, c=13.5, p_l=30, p_h=52, beta=0.4, A=64, sigma=0.5, T1=1e4, ref_nodes=38)
        >>> m.for_request(38) is m, m.for_request(3800).A
        (True, 6400.0)
        >>> e = lambda m, n: float(m.strong_time(1) / m.strong_time(n) / n)
        >>> round(e(m, 38), 3), round(e(m.for_request(3800), 3800), 3), round(e(m, 3800), 3)
        (0.874, 0.871, 0.017)
        """
        ref = self.ref_nodes
        if not ref or nodes <= ref:
            return self
        scaled = replace(self, A=self.A * nodes / ref)
        object.__setattr__(scaled, "_freqs", self._freqs)  # the same CPU: the same frequencies
        return scaled

    def strong_time(self, n):
        """Run time on ``n`` nodes at ``p_h`` or above (Downey, Eqs. 9-11), vectorised."""
        return downey_time(n, self.A, self.sigma, self.T1)

    def time(self, n, p):
        """Run time (s) on ``n`` nodes at CPU cap ``p`` (W); ``n`` and ``p`` broadcast."""
        t = np.asarray(self.strong_time(n)) * np.asarray(self.slowdown(p))
        return t if t.ndim else float(t)

    def spec(self) -> dict[str, float]:
        """The parameters as a mapping (the packaged file's entries)."""
        return {k: float(getattr(self, k)) for k in ("a", "b", "c", "p_l", "p_h", "beta", "A", "sigma", "T1")}
