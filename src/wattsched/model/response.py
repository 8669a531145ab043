"""Response models: how a job's runtime and power change with a cap or a frequency.

A response model answers two questions for one job:

* :meth:`ResponseModel.under_power_ratio` -- the job's nominal node power is
  multiplied by ``m`` (a RAPL cap below its draw): what power ratio does the job
  really reach (it cannot go below its floor of non-reducible power) and by how
  much is its duration multiplied?
* :meth:`ResponseModel.at_frequency_ratio` -- the CPU frequency is set to
  ``r`` times the nominal (maximum) one: what are the power ratio and the
  duration multiplier?

Models
------
``linear`` (Borghesi et al. 2018, §5.1.1)
    ``M`` is the power multiplier and ``0 <= F <= 1`` the factor. Two readings
    of the paper's ``D' = F · M^D · D``: ``interpolated``,
    ``D' = D · (1 + F · (1/M - 1))``, which is ``D`` at ``F = 0``, ``D/M`` at
    ``F = 1`` and grows with ``F`` in between (the paper's "general formula"
    that "includes both extreme cases"; Eq. 4 is this with ``F = 1/CPI``), the
    default of the per-job scenarios (:class:`ResponseScenario`); and
    ``clamped``, the literal ``D' = max(1, F/M) · D`` (no slowdown until the
    power is cut below ``F``), the default of the class models
    (:data:`DEFAULT_CLASSES`). The frequency multiplier is assumed equal to the
    power multiplier, as in the paper.
``cpi`` (Borghesi et al. 2018, Eq. 4)
    ``D' = D (1 - 1/CPI + 1/(CPI · M))``, CPI below 1 counted as 1.
``poly`` (Ahmed, Liu, Wu 2017, Eqs. 1-2)
    ``p(f) = a + b f + c f² + d f³`` and ``t(f) = α + β f + γ f²`` with ``f``
    in GHz; ratios are taken against ``f_max``. Under a power cap the model
    finds the frequency whose power meets the cap (bisection, ``p`` is
    increasing over the frequency range).

Every model carries ``floor``: the fraction of the nominal power that a cap
cannot remove (static and uncore power).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol


class ResponseModel(Protocol):
    floor: float

    def under_power_ratio(self, m: float) -> tuple[float, float]:
        """Return ``(power_ratio, duration_multiplier)`` for a power multiplier ``m``."""
        ...

    def at_frequency_ratio(self, r: float) -> tuple[float, float]:
        """Return ``(power_ratio, duration_multiplier)`` at frequency ratio ``r``."""
        ...


def _clamp_ratio(m: float, floor: float) -> float:
    if m != m:  # NaN
        raise ValueError("power ratio is NaN")
    return min(1.0, max(m, floor, 1e-9))


LINEAR_READINGS = ("interpolated", "clamped")
"""The readings of Borghesi's ``D' = F · M^D · D`` (docs/policies.md, "The response to a power cut")."""


@dataclass(frozen=True, slots=True)
class LinearResponse:
    """Borghesi's linear model: ``D' = D·(1 + F·(1/M − 1))`` (``interpolated``) or ``D' = max(1, F/M)·D`` (``clamped``).

    >>> LinearResponse(f=1.0).under_power_ratio(0.5)
    (0.5, 2.0)
    >>> LinearResponse(f=0.5).under_power_ratio(0.5)
    (0.5, 1.0)
    >>> LinearResponse(f=0.5, reading="interpolated").under_power_ratio(0.5)
    (0.5, 1.5)
    """

    f: float = 0.5
    floor: float = 0.0
    reading: str = "clamped"

    def __post_init__(self) -> None:
        if self.reading not in LINEAR_READINGS:
            raise ValueError(f"unknown reading {self.reading!r} of the linear response; use "
                             f"{' or '.join(LINEAR_READINGS)}")

    def under_power_ratio(self, m: float) -> tuple[float, float]:
        m = _clamp_ratio(m, self.floor)
        if self.reading == "interpolated":
            return m, 1.0 + self.f * (1.0 / m - 1.0)
        return m, max(1.0, self.f / m)

    def at_frequency_ratio(self, r: float) -> tuple[float, float]:
        return self.under_power_ratio(r)


@dataclass(frozen=True, slots=True)
class CpiResponse:
    """Borghesi's CPI model ``D' = D(1 - 1/CPI + 1/(CPI·M))``.

    >>> CpiResponse(cpi=1.0).under_power_ratio(0.5)
    (0.5, 2.0)
    >>> round(CpiResponse(cpi=5.0).under_power_ratio(0.5)[1], 3)
    1.2
    """

    cpi: float = 1.0
    floor: float = 0.0

    def under_power_ratio(self, m: float) -> tuple[float, float]:
        m = _clamp_ratio(m, self.floor)
        cpi = max(self.cpi, 1.0)
        return m, 1.0 - 1.0 / cpi + 1.0 / (cpi * m)

    def at_frequency_ratio(self, r: float) -> tuple[float, float]:
        return self.under_power_ratio(r)


@dataclass(frozen=True, slots=True)
class PolynomialResponse:
    """Ahmed/Liu polynomial model. Coefficients take the frequency in GHz.

    >>> m = PolynomialResponse(a=50, b=0, c=0, d=10, alpha=10, beta=-2, gamma=0, f_min_ghz=1.0, f_max_ghz=2.0)
    >>> m.at_frequency_ratio(1.0)
    (1.0, 1.0)
    >>> p, t = m.at_frequency_ratio(0.5)
    >>> round(p, 4), round(t, 4)
    (0.4615, 1.3333)
    """

    a: float
    b: float
    c: float
    d: float
    alpha: float
    beta: float
    gamma: float
    f_min_ghz: float
    f_max_ghz: float
    floor: float = 0.0

    def power(self, f_ghz: float) -> float:
        return self.a + f_ghz * (self.b + f_ghz * (self.c + f_ghz * self.d))

    def time(self, f_ghz: float) -> float:
        return self.alpha + f_ghz * (self.beta + f_ghz * self.gamma)

    def lowest(self) -> tuple[tuple[float, float], tuple[float, float]]:
        """``(f, p(f))`` and ``(f, t(f))`` where power and time are lowest on ``[f_min_ghz, f_max_ghz]``.

        The model is meaningful only if both are positive there.

        >>> PolynomialResponse(50, 0, 0, 10, 100, -50, 0, 1.2, 2.7).lowest()[1]
        (2.7, -35.0)
        """
        lo, hi = self.f_min_ghz, self.f_max_ghz
        p_at = [lo, hi, *_roots_in(3 * self.d, 2 * self.c, self.b, lo, hi)]
        t_at = [lo, hi, *_roots_in(0.0, 2 * self.gamma, self.beta, lo, hi)]
        fp = min(p_at, key=self.power)
        ft = min(t_at, key=self.time)
        return (fp, self.power(fp)), (ft, self.time(ft))

    def at_frequency_ratio(self, r: float) -> tuple[float, float]:
        f = min(self.f_max_ghz, max(self.f_min_ghz, r * self.f_max_ghz))
        p_ratio = self.power(f) / self.power(self.f_max_ghz)
        return max(p_ratio, self.floor), self.time(f) / self.time(self.f_max_ghz)

    def under_power_ratio(self, m: float) -> tuple[float, float]:
        m = _clamp_ratio(m, self.floor)
        target = m * self.power(self.f_max_ghz)
        lo, hi = self.f_min_ghz, self.f_max_ghz
        if self.power(lo) >= target:
            # below the lowest frequency: run at f_min, power cannot go lower
            return self.at_frequency_ratio(lo / self.f_max_ghz)
        for _ in range(50):
            mid = 0.5 * (lo + hi)
            if self.power(mid) > target:
                hi = mid
            else:
                lo = mid
        return m, self.time(lo) / self.time(self.f_max_ghz)


def _roots_in(a: float, b: float, c: float, lo: float, hi: float) -> list[float]:
    """Real roots of ``a x² + b x + c`` inside ``(lo, hi)``.

    >>> _roots_in(1.0, 0.0, -1.0, 0.0, 2.0), _roots_in(0.0, 2.0, -1.0, 0.0, 1.0)
    ([1.0], [0.5])
    """
    if a == 0:
        roots = [] if b == 0 else [-c / b]
    else:
        disc = b * b - 4 * a * c
        if disc < 0:
            return []
        # the stable form (Numerical Recipes §5.6): no cancellation when a is tiny next to b
        q = -0.5 * (b + math.copysign(math.sqrt(disc), b))
        roots = [q / a] + ([c / q] if q != 0 else [])
    return [x for x in roots if lo < x < hi]


IDENTITY = LinearResponse(f=0.0)
"""A job that is not slowed by caps (``F = 0``): duration multiplier is always 1."""


def response_from_spec(spec: dict) -> ResponseModel:
    """Build a response model from a config mapping such as ``{"model": "cpi", "cpi": 3}``.

    >>> response_from_spec({"model": "linear", "f": 0.75})
    LinearResponse(f=0.75, floor=0.0, reading='clamped')
    """
    spec = dict(spec)
    kind = spec.pop("model", "linear")
    classes = {"linear": LinearResponse, "cpi": CpiResponse, "poly": PolynomialResponse}
    if kind not in classes:
        raise ValueError(f"unknown response model {kind!r}; choose one of {sorted(classes)}")
    return classes[kind](**spec)


# Default classes used by the power augmentation: CPU-bound jobs slow down in
# proportion to the power taken away, memory-bound ones barely (CPI 5, the
# paper's memory-bound threshold), mixed ones in between (F = 0.5, the middle of
# the factors 0.25/0.5/0.75 Borghesi et al. tried).
DEFAULT_CLASSES: dict[str, ResponseModel] = {
    "cpu": LinearResponse(f=1.0, floor=0.3),
    "memory": CpiResponse(cpi=5.0, floor=0.3),
    "mixed": LinearResponse(f=0.5, floor=0.3),
}


# ---------------------------------------------------------------- per-job response scenarios
# Borghesi et al. 2018, §5.1.1: "each job has its own factor ... drawn from one
# among three random distributions, one for each application type - memory-bound
# jobs will obtain lower factors (smaller duration increase) than the CPU
# intensive ones". The paper gives no ranges; these are wattsched's assumption:
# three adjacent intervals spanning the factors the paper tried (0.25, 0.5, 0.75, 1).
MIXED_F_RANGES: dict[str, tuple[float, float]] = {
    "cpu": (0.75, 1.0),
    "mixed": (0.5, 0.75),
    "memory": (0.25, 0.5),
}
"""Interval of ``F`` drawn (uniformly, per job) for each application class by the ``mixed`` scenario."""

# The CPI scenario draws each job's cycles per instruction by class. Eq. 4 needs
# only the CPI; a CPI of 1 is a purely CPU-bound job (D' = D / M), and the
# existing `memory` class of the augmentation uses CPI 5 as memory-bound.
CPI_RANGES: dict[str, tuple[float, float]] = {
    "cpu": (1.0, 1.5),
    "mixed": (1.5, 5.0),
    "memory": (5.0, 10.0),
}
"""Interval of the CPI drawn (uniformly, per job) for each application class by the ``cpi`` scenario."""

SCENARIO_KINDS = ("classes", "linear", "mixed", "cpi")


def _unit_draw(seed: int, job_id: int) -> float:
    """A uniform number in [0, 1) fixed by ``(seed, job_id)``: the same job gets the same draw live and in replay.

    >>> _unit_draw(0, 7) == _unit_draw(0, 7), 0.0 <= _unit_draw(3, 7) < 1.0
    (True, True)
    """
    import numpy as np

    return float(np.random.default_rng([seed & 0xFFFFFFFF, job_id & 0xFFFFFFFFFFFF]).random())


@dataclass(frozen=True, slots=True)
class ResponseScenario:
    """How every job of a run responds to a power cut: one of §5.1.1's scenarios of Borghesi et al. 2018.

    ``kind``
        ``classes``: each job gets its application class's model from the
        platform (``response_classes``), the ratios taken on the node's whole
        power (wattsched's default).
        ``linear``: every job ``D' = F · M^D · D`` with the one factor ``f``.
        ``mixed``: ``F`` drawn per job from its class's interval
        (:data:`MIXED_F_RANGES`; an unknown class counts as ``mixed``).
        ``cpi``: Eq. 4 with a CPI drawn per job from its class's interval
        (:data:`CPI_RANGES`).
    ``floor_w``
        The least dynamic power a job keeps on a node under any cap (W; the
        paper's 1 W).
    ``reading``
        How ``linear`` and ``mixed`` read ``D' = F · M^D · D``:
        ``interpolated`` (default), ``D' = D·(1 + F·(1/M − 1))``; or
        ``clamped``, ``D' = max(1, F/M)·D`` (:class:`LinearResponse`).
    ``seed``
        Seed of the per-job draws (each job's draw depends on the seed and its
        id only, so it does not depend on the order in which jobs start).

    In the three paper scenarios the power multiplier ``M^P`` applies to the
    *dynamic* power, the node's power above its idle power (§5.1.1: "we can
    remove from the power estimation the idle power of each resource"); the
    engine asks :meth:`for_job` for the model and :attr:`dynamic` for how to
    take the ratio.

    >>> s = ResponseScenario.parse("0.5")
    >>> s.kind, s.f, s.for_job(1, "cpu")
    ('linear', 0.5, LinearResponse(f=0.5, floor=0.0, reading='interpolated'))
    >>> m = ResponseScenario.parse("mixed", seed=1).for_job(9, "memory")
    >>> 0.25 <= m.f <= 0.5
    True
    """

    kind: str = "classes"
    f: float = 1.0
    floor_w: float = 1.0
    seed: int = 0
    reading: str = "interpolated"

    @property
    def dynamic(self) -> bool:
        """Whether the power ratio is taken on the dynamic power (the paper's scenarios) or the whole node power."""
        return self.kind != "classes"

    @classmethod
    def parse(cls, spec: str | float, *, floor_w: float = 1.0, seed: int = 0,
              reading: str = "interpolated") -> ResponseScenario:
        """Read a scenario: ``classes``, ``mixed``, ``cpi``, or a factor ``F`` in [0, 1] (``linear`` with it).

        >>> ResponseScenario.parse("linear:0.25").f
        0.25
        >>> ResponseScenario.parse("fast")
        Traceback (most recent call last):
        ...
        ValueError: unknown response 'fast': give classes, mixed, cpi, or a factor F in [0, 1] such as 0.5
        """
        if reading not in LINEAR_READINGS:
            raise ValueError(f"unknown response reading {reading!r}: use {' or '.join(LINEAR_READINGS)}")
        text = str(spec).strip().lower()
        if text.startswith("linear:"):
            text = text[len("linear:"):]
        if text in ("classes", "mixed", "cpi"):
            return cls(text, 1.0, floor_w, seed, reading)
        try:
            f = float(text)
        except ValueError:
            raise ValueError(f"unknown response {spec!r}: give classes, mixed, cpi, or a factor F in [0, 1] "
                             "such as 0.5") from None
        if not 0.0 <= f <= 1.0:
            raise ValueError(f"response factor F must be in [0, 1], got {spec!r}")
        if floor_w < 0 or floor_w != floor_w:
            raise ValueError(f"response floor must be >= 0 W, got {floor_w!r}")
        return cls("linear", f, floor_w, seed, reading)

    def for_job(self, job_id: int, app_class: str, classes: dict | None = None) -> ResponseModel | None:
        """The response model of one job (``None`` under ``classes`` for a class ``classes`` lacks)."""
        if self.kind == "classes":
            return (classes or DEFAULT_CLASSES).get(app_class)
        if self.kind == "linear":
            return LinearResponse(f=self.f, reading=self.reading)
        cls_name = app_class if app_class in MIXED_F_RANGES else "mixed"
        u = _unit_draw(self.seed, job_id)
        if self.kind == "mixed":
            lo, hi = MIXED_F_RANGES[cls_name]
            return LinearResponse(f=lo + (hi - lo) * u, reading=self.reading)
        lo, hi = CPI_RANGES[cls_name]
        return CpiResponse(cpi=lo + (hi - lo) * u)

    def label(self) -> str:
        """Short text for reports: ``mixed``, ``cpi``, ``F=0.5`` or ``classes`` (``, clamped`` for that reading)."""
        text = f"F={self.f:g}" if self.kind == "linear" else self.kind
        return text + (", clamped" if self.reading == "clamped" and self.kind in ("linear", "mixed") else "")
