"""The sweep report reads as a table for people: human column names, one unit per column, no exponents."""

import re

import pytest

from wattsched.sweep.report import LABELS, METRICS, metric_unit, write_report
from wattsched.sweep.store import Store

AXES = ["trace", "slice", "t0_s", "policy", "policy.check", "cap"]


def _row(policy, check, cap, slice_, energy_j, turnaround_s, above):
    axes = {"trace": "kth.swf", "slice": slice_, "t0_s": 86400.0 * slice_, "policy": policy,
            "policy.check": check, "cap": cap}
    row = {"status": "ok", "mean_turnaround_s": turnaround_s, "mean_wait_s": turnaround_s / 3,
           "mean_bsld": 12.5, "utilization": 0.642, "energy_j": energy_j, "max_power_w": 18_500.0,
           "window_mean_power_w": 13_900.0, "window_power_utilization": 0.975, "window_frac_above_cap": above,
           "max_overshoot_pct": 1.7, "jobs_started_in_window": 12, "sim_wall_s": 0.24}
    return axes, row


@pytest.fixture
def report(tmp_path):
    store = Store(tmp_path)
    rows = [_row("easy", "", "50%", 0, 4.825e11, 16_380.0, 0.132),
            _row("easy", "", "50%", 1, 3.9e11, 19_000.0, 0.2),
            _row("easy-pc", "gaussian_99", "50%", 0, 4.1e11, 30_000.0, 0.0),
            _row("easy-pc", "gaussian_99", "70%", 0, 4.6e11, 21_000.0, 0.01)]
    for i, (axes, row) in enumerate(rows):
        store.add(f"k{i}", axes, row)
    store.set_meta("sweep", {"name": "t", "file": "t.yaml", "keys": [f"k{i}" for i in range(len(rows))],
                             "axes": AXES})
    store.close()
    return write_report(tmp_path).read_text()


def _table(html):
    table = html.split("<h2>Median [IQR] per combination</h2>", 1)[1].split("</table>", 1)[0]
    heads = re.findall(r"<th>(.*?)</th>", table)
    rows = [re.findall(r"<td>(.*?)</td>", tr) for tr in re.findall(r"<tr>(.*?)</tr>", table, re.S)[1:]]
    return heads, rows


def test_columns_have_human_names_and_units(report):
    heads, rows = _table(report)
    assert heads == ["trace", "policy", "policy check", "cap", "runs", "mean turnaround (h)", "mean wait (h)",
                     "mean bounded slowdown", "utilization (%)", "energy (MWh)", "max power (kW)",
                     "mean power in the window (kW)", "power / cap in the window (%)",
                     "time above cap in the window (%)", "max overshoot (% of cap)",
                     "jobs started in the window", "simulation wall time (s)"]
    assert not any("_" in h for h in heads)
    easy = next(r for r in rows if r[1] == "easy")
    cells = dict(zip(heads, easy))
    assert cells["energy (MWh)"] == "121 [115, 128]"  # 134.0 and 108.3 MWh
    assert cells["mean turnaround (h)"] == "4.91 [4.73, 5.10]"
    assert cells["time above cap in the window (%)"] == "16.6 [14.9, 18.3]"
    assert cells["utilization (%)"] == "64.2 [64.2, 64.2]"
    assert cells["max power (kW)"] == "18.5 [18.5, 18.5]"
    assert not any(re.search(r"\de[+-]\d", c) for r in rows for c in r), rows
    assert "Axes: trace, slice, slice start, policy, policy check, cap; aggregated over slice, slice start" in report


def test_plots_are_titled_with_human_names(report):
    titles = re.findall(r"<h2>(.*?)</h2>", report)
    assert "Mean turnaround against cap" in titles and "Time above cap in the window against cap" in titles
    assert not any("_" in t for t in titles)


def test_every_reported_metric_has_a_human_label():
    assert set(METRICS) <= set(LABELS)


@pytest.mark.parametrize("metric, values, unit", [
    ("energy_j", [5e3], "J"), ("energy_j", [7.2e6], "kWh"), ("energy_j", [4.825e11], "MWh"),
    ("energy_j", [4e13], "GWh"), ("mean_wait_s", [42.0], "s"), ("mean_wait_s", [5400.0], "min"),
    ("mean_wait_s", [3 * 86400.0], "days"), ("max_power_w", [950.0], "W"), ("max_power_w", [3.2e6], "MW"),
])
def test_units_follow_the_largest_value(metric, values, unit):
    assert metric_unit(metric, [*values, None])[1] == unit


HOSTILE = ("<script>alert(1)</script>", '"><img src=x onerror=alert(2)>')


def test_every_value_from_the_store_reaches_the_page_escaped(tmp_path):
    """Run keys, axis values (trace and policy names), errors and the sweep's name are text, never markup."""
    script, img = HOSTILE
    store = Store(tmp_path)
    axes, row = _row(f"easy{img}", "", "50%", 0, 4.8e11, 16_000.0, 0.1)
    store.add(f"ok{script}", {**axes, "trace": f"u{script}.swf"}, row)
    store.add(f"k{script}", {**axes, "policy": f"p{img}"}, {"status": "failed", "error": f"ValueError: {script}"})
    store.add(f"k{img}", axes, {"status": "failed", "error": img})
    store.set_meta("sweep", {"name": f"s{script}", "file": f"{img}.yaml",
                             "keys": [f"ok{script}", f"k{script}", f"k{img}"], "axes": AXES})
    store.close()
    page = write_report(tmp_path).read_text()
    assert "<script" not in page.lower() and "<img src=x" not in page
    assert "onerror=alert(2)>" not in page
    assert "k&lt;script&gt;alert(1)&lt;/script&gt;" in page  # the failed run's key, shown as text
    assert "k&quot;&gt;&lt;img src=x onerror=alert(2)&gt;" in page
    assert "easy&quot;&gt;&lt;img" in page and "u&lt;script&gt;" in page
    assert "<title>s&lt;script&gt;" in page
