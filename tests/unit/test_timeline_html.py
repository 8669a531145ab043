"""The report's timeline data (wattsched.sim.timeline_html): what the page decodes is the run's timeline."""

import base64
import math
import zlib

import numpy as np
import pytest

from wattsched.sim.timeline_html import timeline_payload, timeline_section


def decode(payload: dict) -> dict[str, np.ndarray]:
    """What the page's script does: inflate, put each value's bytes back together, read the typed arrays."""
    raw = np.frombuffer(zlib.decompress(base64.b64decode(payload["data"])), dtype=np.uint8)
    n = payload["rows"]

    def column(offset: int, size: int, dtype: str) -> np.ndarray:
        return raw[offset:offset + n * size].reshape(size, n).T.copy().view(dtype).ravel()

    out = {"t_s": column(0, 8, "<f8")}
    for i, name in enumerate(payload["columns"]):
        out[name] = column(8 * n + 4 * n * i, 4, "<f4").astype(float)
    return out


def test_a_short_timeline_travels_whole_without_the_rows_that_last_no_time():
    tl = {"t_s": np.array([0.0, 10.0, 10.0, 25.0, 40.0]), "power_w": np.array([100.0, 999.0, 300.0, 150.5, 0.0]),
          "cap_w": np.array([math.inf, 200.0, 200.0, 200.0, 200.0]), "busy_nodes": np.array([1.0, 9, 2, 1, 0]),
          "pending_jobs": np.array([0.0, 0, 3, 1, 0])}
    payload = timeline_payload(tl, {"origin_unix_s": 1e9, "nodes": 4})
    assert payload["binned"] is False and payload["origin_unix_s"] == 1e9 and payload["power_unit"] == "W"
    got = decode(payload)
    assert got["t_s"].tolist() == [0.0, 10.0, 25.0, 40.0]
    assert got["power_w"].tolist() == [100.0, 300.0, 150.5, 0.0]  # the 999 W row held no time
    assert np.isnan(got["cap_w"][0]) and got["cap_w"][1:].tolist() == [200.0] * 3  # no cap: a gap
    assert got["pending_jobs"].tolist() == [0.0, 3.0, 1.0, 0.0]


def test_budget_use_rises_inside_its_window_only():
    tl = {"t_s": np.array([0.0, 10.0, 20.0, 30.0]), "power_w": np.array([100.0, 200.0, 100.0, 0.0])}
    payload = timeline_payload(tl, {"energy_budgets": [{"start_s": 10.0, "end_s": 30.0, "energy_j": 6000.0}]})
    use = decode(payload)["budget_use"]
    assert np.isnan(use[0]) and use[1:] == pytest.approx([0.0, 2000.0 / 6000.0, 0.5], rel=1e-6)  # float32


def test_a_long_timeline_is_reduced_to_buckets_that_keep_every_peak_and_trough():
    rng = np.random.default_rng(4)
    n = 20_001
    t = np.arange(n, dtype=float)
    power = rng.uniform(1000.0, 2000.0, n)
    power[12_345] = 9_000.0  # one short peak
    power[777] = 10.0  # one short trough
    payload = timeline_payload({"t_s": t, "power_w": power}, {}, max_rows=1000)
    assert payload["binned"] is True and payload["rows"] == 1001 and payload["source_rows"] == n
    got = decode(payload)
    assert got["power_w"].max() == 9000.0 and got["power_w"].min() == 10.0
    assert got["t_s"][0] == 0.0 and got["t_s"][-1] == n - 1


def test_the_section_inlines_uplot_and_its_data_with_no_outside_reference():
    tl = {"t_s": np.array([0.0, 60.0]), "power_w": np.array([5.0, 0.0])}
    page = timeline_section(tl, {})
    assert "https://github.com/leeoniya/uPlot (v1.6.32)" in page and ".uplot" in page
    assert 'src="http' not in page and "<link" not in page  # works offline
    assert timeline_section({"t_s": np.array([0.0]), "power_w": np.array([0.0])}, {}).endswith(
        "<p>The run has no timeline to draw.</p>")
