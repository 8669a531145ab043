"""node_counts.csv and node_counts.png: the node count each moldable job was given in its range."""

from __future__ import annotations

import csv
import math

import numpy as np

from wattsched.sim.nodecounts import held_over_time, write_node_count_outputs


def test_each_moldable_job_is_a_row_with_its_range_and_the_plot_is_written(tmp_path):
    sizes = [(7, 0.0, 100.0, 4, 2, 8, 8), (9, 50.0, math.nan, 3, 3, 6, 6)]
    timeline = {"t_s": [0.0, 50.0, 100.0, 200.0], "busy_nodes": [4.0, 7.0, 3.0, 3.0]}
    paths = write_node_count_outputs(tmp_path, sizes, timeline, 10)
    assert [p.name for p in paths] == ["node_counts.csv", "node_counts.png"]
    with open(tmp_path / "node_counts.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert [(r["id"], r["nodes"], r["min_nodes"], r["max_nodes"], r["requested"], r["end_s"]) for r in rows] == [
        ("7", "4", "2", "8", "8", "100.0"), ("9", "3", "3", "6", "6", "")]
    assert (tmp_path / "node_counts.png").stat().st_size > 10_000
    assert write_node_count_outputs(tmp_path / "none", [], timeline, 10) == []


def test_the_requested_nodes_over_time_sum_the_running_jobs_at_every_change():
    t, n = held_over_time(np.array([0.0, 0.0, 5.0]), np.array([5.0, 10.0, 10.0]), np.array([1.0, 2.0, 4.0]))
    assert t.tolist() == [0.0, 5.0, 10.0] and n.tolist() == [3.0, 6.0, 0.0]
