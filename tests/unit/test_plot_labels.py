"""Log-axis tick labels are drawn as plain text, at the ticks and with the values matplotlib's mathtext labels have."""

from __future__ import annotations

import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from wattsched.sim.plots import _plain_log_labels, _PlainLogLabels


def drawn_labels(scale: str, lo: float, hi: float, *, plain: bool, **kw) -> list[tuple[float, str]]:
    fig = Figure(dpi=110)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ax.set_xscale(scale, **kw)
    if plain:
        _plain_log_labels(ax.xaxis)
    ax.set_xlim(lo, hi)
    fig.canvas.draw()
    ticks = ax.get_xticklabels() + ax.get_xticklabels(minor=True)
    return [(t.get_position()[0], t.get_text()) for t in ticks if t.get_text()]


@pytest.mark.parametrize("scale, lo, hi, kw", [
    ("log", 1.0, 1e4, {}),
    ("log", 1e-3, 0.5, {}),
    ("log", 15.0, 45.0, {}),  # less than a decade: matplotlib labels some minor ticks too
    ("symlog", -100.0, 1000.0, {"linthresh": 1.0}),
    ("symlog", 0.0, 3e5, {"linthresh": 1.0 / 60}),
])
def test_the_same_ticks_as_matplotlib_in_plain_text(scale, lo, hi, kw):
    mathtext = drawn_labels(scale, lo, hi, plain=False, **kw)
    plain = drawn_labels(scale, lo, hi, plain=True, **kw)
    assert [x for x, _ in plain] == [x for x, _ in mathtext] and plain
    assert [text for _, text in plain] == [_PlainLogLabels._plain(text) for _, text in mathtext]
    assert all("$" in text for _, text in mathtext) and not any("$" in text for _, text in plain)


def test_labels_read_as_numbers():
    labels = dict(drawn_labels("symlog", -100.0, 1000.0, plain=True, linthresh=1.0))
    assert labels[0.0] == "0" and labels[-100.0] == "−10²" and labels[1000.0] == "10³"
    minor = [text for _, text in drawn_labels("log", 15.0, 45.0, plain=True)]
    assert "2×10¹" in minor and "3×10¹" in minor
