"""node_caps.csv and node_caps.png stay bounded on a machine of tens of thousands of nodes."""

from __future__ import annotations

import csv
import resource

import numpy as np

from wattsched.sim import nodecaps


def test_a_large_machine_is_drawn_from_a_bounded_matrix_and_every_change_is_in_the_csv(tmp_path, monkeypatch):
    nodes = 40_960
    rng = np.random.default_rng(0)
    log = [(float(t), "cap", int(n), float(c), -1)
           for t, n, c in zip(np.sort(rng.uniform(0, 86_400, 20_000)), rng.integers(0, nodes, 20_000),
                              rng.choice([86.0, 92.0, 116.0], 20_000), strict=True)]
    seen = {}

    def spy(changes, n, end_s, max_rows=2000):
        times, caps = real(changes, n, end_s, max_rows)
        seen["cells"] = caps.size
        return times, caps

    real = nodecaps.cap_matrix
    monkeypatch.setattr(nodecaps, "cap_matrix", spy)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    paths = nodecaps.write_node_cap_outputs(tmp_path, log, {"t_s": [0.0, 86_400.0], "cap_w": [4.7e6, 4.7e6]},
                                            [f"n{i}" for i in range(nodes)])
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert [p.name for p in paths] == ["node_caps.csv", "node_caps.png"]
    assert seen["cells"] <= nodecaps.MAX_CELLS
    assert grown_mb < 1500, grown_mb  # a whole Intrepid run drawing 2,000 x 40,960 cells peaked at 10 GB
    with open(tmp_path / "node_caps.csv", newline="") as fh:
        assert sum(1 for _ in csv.DictReader(fh)) == 20_000


def test_node_groups_average_consecutive_nodes_and_keep_uncapped_groups_empty():
    caps = np.full((2, 1000), np.nan)
    caps[0, :10] = 100.0
    caps[1, 5] = 50.0
    grouped, k = nodecaps.node_groups(caps, rows=100)
    assert k == 10 and grouped.shape == (2, 100)
    assert grouped[0, 0] == 100.0 and grouped[1, 0] == 50.0 and np.isnan(grouped[:, 1:]).all()
