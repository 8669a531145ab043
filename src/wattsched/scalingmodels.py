"""PASS application models of Sarood et al. 2014: the packaged Table IV set and fitting from measurements.

The model itself is :class:`wattsched.model.scaling.PassModel` (run time on
``n`` nodes at CPU cap ``p``). This module packages the paper's five
applications (:func:`packaged_pass_models`, from
``data/apps/sarood2014.yaml``, which says which numbers are the paper's and
which are chosen here) and fits the parameters to measured ``(n, p, time)``
points (:func:`fit_pass`, ``wattsched models fit --model pass FILE.csv``).

What a fit can find
-------------------
* ``a``, ``b``, ``c`` (Eq. 18) need the frequency the CPU ran at under each
  cap: from run times alone they are known only up to a scale of the
  frequency. A ``freq_ghz`` column (the frequency the CPU ran at under the
  cap, with the cap binding) gives them (linear least squares, ``a > 0``,
  ``b, c >= 0``); without it they must be given (``--power-model A,B,C``,
  which wins over the column when both are there).
* ``p_l`` is the lowest cap measured: the paper measures from ``p_l`` up, and
  points below it (throttling) are outside the model.
* ``beta`` and ``p_h`` need three or more distinct caps; ``p_h`` is at most the
  highest cap measured.
* Downey's ``A``, ``sigma``, ``T1`` need three or more distinct node counts;
  with fewer (the paper profiled at 20 nodes) they are left out and the fit
  reports the run time at ``p_h`` per node count instead.
* At least as many points as time parameters fitted (5, or 2 plus one per
  node count).

The time parameters are fitted by nonlinear least squares on log run times
(relative errors), from several starting points (Downey's model has kinks at
``A`` and ``2A - 1``), with ``T1`` solved in closed form at each step.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path
from types import MappingProxyType

import numpy as np

from wattsched.appmodels import measured_number, measurement_rows
from wattsched.errors import ConfigError, read_config_text
from wattsched.model.scaling import PassModel

PACKAGED_YAML = "sarood2014.yaml"
COLUMNS = ("app", "nodes", "cpu_power_w", "time_s")
"""Required columns of a measurements file; ``freq_ghz`` is optional."""


@dataclass(frozen=True, slots=True)
class Point:
    nodes: float
    cpu_power_w: float
    time_s: float
    freq_ghz: float | None = None


@functools.cache
def packaged_pass_models() -> Mapping[str, PassModel]:
    """The five applications of Table IV: ``leanmd``, ``wave2d``, ``lulesh``, ``amr``, ``jacobi2d``.

    Read once per process (the moldable block, the engine and every run of a sweep share it), read-only.

    >>> m = packaged_pass_models()["leanmd"]
    >>> round(m.max_speedup, 4), round(m.time(20, 52))
    (1.6667, 3600)
    """
    import yaml

    doc = yaml.safe_load((files("wattsched") / "data" / "apps" / PACKAGED_YAML).read_text())
    out = {}
    for app, entry in doc["apps"].items():
        model = PassModel(c=float(doc["c"]), ref_nodes=float(doc.get("ref_nodes", 0)),
                          **{k: float(v) for k, v in entry.items()})
        problems = model.problems()
        if problems:  # a broken packaged file is a bug of wattsched, not of the user's input
            raise ValueError(f"<packaged>/{PACKAGED_YAML}: {app}: {problems[0]}")
        out[app] = model
    return MappingProxyType(out)


# ---------------------------------------------------------------- reading measurements
def read_pass_measurements(path: str | Path) -> dict[str, list[Point]]:
    """Read a CSV of ``app,nodes,cpu_power_w,time_s[,freq_ghz]`` rows (``#`` lines are comments).

    Raises
    ------
    ConfigError
        ``FILE:LINE: KEY: message`` for a missing column, a missing cell or a
        value that is not a positive number (a node count below 1).
    """
    return parse_pass_measurements(read_config_text(path), str(path))


def parse_pass_measurements(text: str, where: str) -> dict[str, list[Point]]:
    """Parse the text of a measurements file; ``where`` names it in errors.

    >>> pts = parse_pass_measurements("app,nodes,cpu_power_w,time_s\\nx,4,40,100\\n", "m.csv")
    >>> pts["x"]
    [Point(nodes=4.0, cpu_power_w=40.0, time_s=100.0, freq_ghz=None)]
    >>> parse_pass_measurements("app,nodes,cpu_power_w,time_s\\nx,0.5,40,100\\n", "m.csv")
    Traceback (most recent call last):
    ...
    wattsched.errors.ConfigError: m.csv:2: nodes: must be a number >= 1, got 0.5
    """
    out: dict[str, list[Point]] = {}
    for no, row in measurement_rows(text, where, COLUMNS, ("freq_ghz",)):
        v = {key: measured_number(where, no, key, cell, at_least=1 if key == "nodes" else None)
             for key, cell in row.items() if key != "app"}
        out.setdefault(row["app"], []).append(Point(v["nodes"], v["cpu_power_w"], v["time_s"], v.get("freq_ghz")))
    if not out:
        raise ConfigError(f"{where}: no data rows after the header")
    return out


# ---------------------------------------------------------------- fitting
@dataclass(frozen=True, slots=True)
class PassFit:
    """One application's fitted PASS parameters and the fit's mean relative time error (a fraction).

    ``A``, ``sigma`` and ``T1`` are None when the points have fewer than three
    node counts; ``t_h_by_nodes`` then gives the fitted run time at ``p_h``
    per node count.
    """

    app: str
    a: float
    b: float
    c: float
    p_l: float
    p_h: float
    beta: float
    A: float | None
    sigma: float | None
    T1: float | None
    time_error: float
    points: int
    t_h_by_nodes: dict[float, float] = field(default_factory=dict)

    @property
    def model(self) -> PassModel:
        """The fitted model (needs ``A``, ``sigma`` and ``T1``)."""
        if self.T1 is None:
            raise ConfigError(f"app {self.app!r}: the points have fewer than 3 node counts, so Downey's A, sigma "
                              "and T1 are not fitted; measure at 3 or more node counts")
        return PassModel(self.a, self.b, self.c, self.p_l, self.p_h, self.beta, self.A, self.sigma, self.T1)

    def spec(self) -> dict[str, object]:
        out: dict[str, object] = {k: getattr(self, k) for k in ("a", "b", "c", "p_l", "p_h", "beta", "A", "sigma",
                                                                "T1")}
        out.update(time_error=self.time_error, points=self.points)
        if self.t_h_by_nodes:
            out["t_h_by_nodes"] = {f"{n:g}": t for n, t in self.t_h_by_nodes.items()}
        return out


def fit_pass(measurements: dict[str, list[Point]], where: str = "measurements",
             power_model: tuple[float, float, float] | None = None) -> dict[str, PassFit]:
    """Fit PASS per application (see the module doc for what the points must hold).

    >>> true = PassModel(a=2.0, b=8.0, c=13.5, p_l=30, p_h=50, beta=0.3, A=12, sigma=0.5, T1=1000.0)
    >>> pts = [Point(n, p, true.time(n, p)) for n in (1, 4, 8, 16, 24, 32) for p in (30, 35, 40, 45, 50, 60)]
    >>> fit = fit_pass({"x": pts}, power_model=(2.0, 8.0, 13.5))["x"]
    >>> round(fit.beta, 4), round(fit.p_h, 3), round(fit.A, 3), round(fit.T1, 1), fit.time_error < 1e-6
    (0.3, 50.0, 12.0, 1000.0, True)
    """
    try:
        from scipy.optimize import least_squares, lsq_linear
    except ImportError:
        raise ConfigError("fitting PASS models needs scipy, which is not installed: "
                          "pip install 'wattsched[dr]'") from None
    return {app: _fit_one(app, pts, f"{where}: app {app!r}", power_model, least_squares, lsq_linear)
            for app, pts in measurements.items()}


def _fit_one(app: str, pts: list[Point], tag: str, power_model, least_squares, lsq_linear) -> PassFit:
    n = np.array([q.nodes for q in pts])
    p = np.array([q.cpu_power_w for q in pts])
    t = np.array([q.time_s for q in pts])
    caps = np.unique(p)
    if caps.size < 3:
        raise ConfigError(f"{tag}: needs measurements at 3 or more distinct CPU caps (cpu_power_w) to fit beta "
                          f"and p_h, got {caps.size}")
    a, b, c = _power_model(pts, tag, power_model, lsq_linear)
    p_l, p_max = float(caps[0]), float(caps[-1])
    if p_l <= c:
        raise ConfigError(f"{tag}: the lowest cap, {p_l:g} W, is not above the CPU base power c = {c:g} W; "
                          "the power model and the caps disagree")
    counts = np.unique(n)
    fitted = 5 if counts.size >= 3 else 2 + counts.size  # beta, p_h and T1, A, sigma or one T_h per node count
    if len(pts) < fitted:
        raise ConfigError(f"{tag}: needs {fitted} or more points for the {fitted} time parameters it fits "
                          f"here, got {len(pts)}")
    log_t = np.log(t)
    ph_lo = p_l + 1e-6 * (p_max - p_l)

    def model(x, T1=1.0, A=1.0, sigma=0.0):
        beta, p_h = x[0], x[1]
        return PassModel(a, b, c, p_l, p_h, beta, A, sigma, T1)

    if counts.size >= 3:
        def resid(x):
            base = np.log(model(x[2:], A=x[0], sigma=x[1]).time(n, p))
            return base + np.mean(log_t - base) - log_t

        starts = [(A0, s0, b0, ph0)
                  for A0 in np.geomspace(1.5, 2 * counts[-1], 5) for s0 in (0.3, 1.5) for b0 in (0.1, 0.35)
                  for ph0 in (0.5 * (p_l + p_max), p_max)]
        lo, hi = [1.0, 0.0, 0.0, ph_lo], [1e5, 100.0, 0.999, p_max]
    else:
        groups = np.searchsorted(counts, n)

        def resid(x):
            base = np.log(model(x).slowdown(p))
            scale = np.bincount(groups, log_t - base) / np.bincount(groups)
            return base + scale[groups] - log_t

        starts = [(b0, ph0) for b0 in (0.05, 0.2, 0.4) for ph0 in (0.5 * (p_l + p_max), p_max)]
        lo, hi = [0.0, ph_lo], [0.999, p_max]
    best = None
    for x0 in starts:
        x0 = np.clip(np.array(x0, dtype=float), lo, hi)
        r = least_squares(resid, x0, bounds=(lo, hi), x_scale="jac", xtol=1e-12, ftol=1e-12, gtol=1e-12)
        if best is None or r.cost < best.cost:
            best = r
    x = best.x
    if counts.size >= 3:
        m = model(x[2:], A=x[0], sigma=x[1])
        T1 = float(np.exp(np.mean(log_t - np.log(m.time(n, p)))))
        m = model(x[2:], T1=T1, A=x[0], sigma=x[1])
        pred, A, sigma, by_n = m.time(n, p), float(x[0]), float(x[1]), {}
        beta, p_h = float(x[2]), float(x[3])
    else:
        m = model(x)
        base = np.log(m.slowdown(p))
        scale = np.exp(np.bincount(groups, log_t - base) / np.bincount(groups))
        pred, A, sigma, T1 = np.exp(base) * scale[groups], None, None, None
        by_n = {float(k): float(v) for k, v in zip(counts, scale, strict=True)}
        beta, p_h = float(x[0]), float(x[1])
    err = float(np.mean(np.abs(pred - t) / t))
    return PassFit(app, a, b, c, p_l, p_h, beta, A, sigma, T1, err, len(pts), by_n)


def _power_model(pts: list[Point], tag: str, given, lsq_linear) -> tuple[float, float, float]:
    if given is not None:  # given explicitly: it wins over a freq_ghz column
        return tuple(float(v) for v in given)
    freqs = [q.freq_ghz for q in pts if q.freq_ghz is not None]
    if not freqs:
        raise ConfigError(f"{tag}: a, b, c (CPU power p = a f^3 + b f + c) need the CPU frequency at each point: "
                          "add a freq_ghz column, or give them with --power-model A,B,C "
                          "(e.g. --power-model 1.65,7.74,13.5)")
    f = np.array(freqs)
    if np.unique(f).size < 3:
        raise ConfigError(f"{tag}: needs 3 or more distinct frequencies (freq_ghz) to fit a, b and c, "
                          f"got {np.unique(f).size}")
    pw = np.array([q.cpu_power_w for q in pts])
    X = np.column_stack([f ** 3, f, np.ones_like(f)])
    res = lsq_linear(X, pw, bounds=([1e-12, 0.0, 0.0], [np.inf, np.inf, np.inf]))
    a, b, c = (float(v) for v in res.x)
    return a, b, c
