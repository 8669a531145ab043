"""Application models of Ahmed, Liu and Wu (2017): power and time as polynomials of the CPU frequency.

Each application has ``p(f) = a + b f + c f² + d f³`` (average power per
processor, W, Eq. 1) and ``t(f) = α + β f + γ f²`` (execution time, s, Eq. 2),
``f`` in GHz, fitted by least squares to measurements at a few frequencies
(:func:`fit_models`, ``wattsched models fit FILE.csv``), with the mean relative
error of each fit reported as in the paper's §III-A.

The packaged set (:func:`packaged_models`) is fitted from
``data/apps/ahmed2017.csv``: Quantum ESPRESSO (``qe``), Gadget, Seissol and
WaLBerla on processors of 220 W peak with the frequency levels
:data:`FREQ_LEVELS_GHZ`; that file says how its points were chosen.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterator
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path

import numpy as np

from wattsched.errors import ConfigError, read_config_text
from wattsched.model.response import PolynomialResponse

FREQ_LEVELS_GHZ: tuple[float, ...] = (1.2, 1.4, 1.6, 1.8, 2.0, 2.2, 2.4, 2.7)
"""The processor's frequency levels in the paper's study: 1.2 to 2.4 GHz in 0.2 GHz steps, and 2.7 GHz."""

PEAK_W_PER_PROC = 220.0
"""Peak power of one processor in the paper's study."""

PACKAGED_CSV = "ahmed2017.csv"


@dataclass(frozen=True, slots=True)
class AppFit:
    """One application's fitted model and the fit's mean relative errors (fractions)."""

    app: str
    model: PolynomialResponse
    power_error: float
    time_error: float
    points: int

    def spec(self) -> dict[str, float | str]:
        """The model as a platform file's ``response_classes`` entry."""
        m = self.model
        return {"model": "poly", "a": m.a, "b": m.b, "c": m.c, "d": m.d, "alpha": m.alpha, "beta": m.beta,
                "gamma": m.gamma, "f_min_ghz": m.f_min_ghz, "f_max_ghz": m.f_max_ghz}


def read_measurements(path: str | Path) -> dict[str, list[tuple[float, float, float]]]:
    """Read a CSV of ``app,freq_ghz,power_w,time_s`` rows (``#`` lines are comments).

    Raises
    ------
    ConfigError
        ``FILE:LINE: KEY: message`` for a missing column or a value that is not a positive number.
    """
    return _parse(read_config_text(path), str(path))


def measurement_rows(text: str, where: str, need: tuple[str, ...], optional: tuple[str, ...] = (),
                     ) -> Iterator[tuple[int, dict[str, str]]]:
    """The data rows of a measurements CSV (blank and ``#`` lines skipped) as ``(line, {column: cell})``, with
    the columns ``need`` and those of ``optional`` the header has; ``where`` names the file in errors.

    Raises
    ------
    ConfigError
        ``FILE: no rows``, ``FILE:LINE: KEY: missing column`` (a column of ``need`` not in the header) or
        ``FILE:LINE: KEY: missing value`` (an empty or absent cell).

    >>> list(measurement_rows("# x\\napp,t\\na, 5\\n", "m.csv", ("app", "t")))
    [(3, {'app': 'a', 't': '5'})]
    """
    lines = [(i, line) for i, line in enumerate(text.splitlines(), 1)
             if line.strip() and not line.lstrip().startswith("#")]
    wanted = ", ".join(need) + (f"; {', '.join(optional)} optional" if optional else "")
    if not lines:
        raise ConfigError(f"{where}: no rows (need the columns {wanted})")
    header_no, header = lines[0]
    columns = [c.strip() for c in next(csv.reader([header]))]
    missing = [c for c in need if c not in columns]
    if missing:
        raise ConfigError(f"{where}:{header_no}: {missing[0]}: missing column (need {wanted})")
    idx = {c: columns.index(c) for c in (*need, *(c for c in optional if c in columns))}
    for no, line in lines[1:]:
        cells = [c.strip() for c in next(csv.reader([line]))]
        row = {}
        for key, i in idx.items():
            if i >= len(cells) or cells[i] == "":
                raise ConfigError(f"{where}:{no}: {key}: missing value")
            row[key] = cells[i]
        yield no, row


def measured_number(where: str, no: int, key: str, cell: str, at_least: float | None = None) -> float:
    """The number in ``cell`` (line ``no``, column ``key`` of ``where``): finite, and positive or ``>= at_least``.

    >>> measured_number("m.csv", 2, "nodes", "0", at_least=1)
    Traceback (most recent call last):
    ...
    wattsched.errors.ConfigError: m.csv:2: nodes: must be a number >= 1, got 0
    """
    try:
        v = float(cell)
    except ValueError:
        raise ConfigError(f"{where}:{no}: {key}: not a number: {cell!r}") from None
    if not (math.isfinite(v) and (v > 0 if at_least is None else v >= at_least)):
        need = "a positive number" if at_least is None else f"a number >= {at_least:g}"
        raise ConfigError(f"{where}:{no}: {key}: must be {need}, got {cell}")
    return v


def _parse(text: str, where: str) -> dict[str, list[tuple[float, float, float]]]:
    out: dict[str, list[tuple[float, float, float]]] = {}
    for no, row in measurement_rows(text, where, ("app", "freq_ghz", "power_w", "time_s")):
        f, p, t = (measured_number(where, no, key, row[key]) for key in ("freq_ghz", "power_w", "time_s"))
        out.setdefault(row["app"], []).append((f, p, t))
    return out


def fit_models(measurements: dict[str, list[tuple[float, float, float]]], where: str = "measurements",
               ) -> dict[str, AppFit]:
    """Least-squares fit of Eqs. 1-2 per application.

    A cubic needs four distinct frequencies (a quadratic three); fewer is an
    error naming the application.

    >>> pts = [(f, 50 + 10 * f ** 3, 100 / f) for f in (1.0, 1.5, 2.0, 2.5, 3.0)]
    >>> fit = fit_models({"x": pts})["x"]
    >>> round(fit.model.power(2.0), 6), fit.power_error < 1e-9
    (130.0, True)
    """
    fits: dict[str, AppFit] = {}
    for app, pts in measurements.items():
        f = np.array([p[0] for p in pts])
        if len(set(f.tolist())) < 4:
            raise ConfigError(f"{where}: app {app!r}: needs measurements at 4 or more distinct frequencies, "
                              f"got {len(set(f.tolist()))}")
        pw = np.array([p[1] for p in pts])
        tm = np.array([p[2] for p in pts])
        d, c, b, a = np.polyfit(f, pw, 3)
        gamma, beta, alpha = np.polyfit(f, tm, 2)
        model = PolynomialResponse(a=float(a), b=float(b), c=float(c), d=float(d), alpha=float(alpha),
                                   beta=float(beta), gamma=float(gamma), f_min_ghz=float(f.min()),
                                   f_max_ghz=float(f.max()))
        p_err = float(np.mean(np.abs(np.polyval([d, c, b, a], f) - pw) / pw))
        t_err = float(np.mean(np.abs(np.polyval([gamma, beta, alpha], f) - tm) / tm))
        fits[app] = AppFit(app, model, p_err, t_err, len(pts))
    return fits


def packaged_fits() -> dict[str, AppFit]:
    """The packaged fits of the paper's four applications."""
    res = files("wattsched") / "data" / "apps" / PACKAGED_CSV
    return fit_models(_parse(res.read_text(), f"<packaged>/{PACKAGED_CSV}"), PACKAGED_CSV)


def packaged_models() -> dict[str, PolynomialResponse]:
    """Response models by application name: ``qe``, ``gadget``, ``seissol``, ``walberla``."""
    return {app: fit.model for app, fit in packaged_fits().items()}


def app_class_probs(response_classes) -> dict[str, float] | None:
    """Equal shares of a platform's application classes (its polynomial models), or None when it has none.

    The power augmentation draws a job's class from these (seeded), so jobs of
    a trace without applications are assigned one.
    """
    apps = sorted(name for name, model in response_classes.items() if isinstance(model, PolynomialResponse))
    return {name: 1.0 / len(apps) for name in apps} if apps else None
