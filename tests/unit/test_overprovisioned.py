"""Overprovisioned platforms (Sarood et al. 2014): budget, CPU power levels, base and memory power per node."""

from __future__ import annotations

import math
import textwrap
import time

import pytest

from builders import cli, kth_excerpt, read_summary
from wattsched.config.platform import DEFAULT_MAX_NODES, load_platform, packaged_platforms, platform_from_procs
from wattsched.errors import ConfigError
from wattsched.model.platform import Platform


def write(tmp_path, text: str):
    path = tmp_path / "platform.yaml"
    path.write_text(textwrap.dedent(text))
    return path


GROUP = """\
node_groups:
  - name: n
    count: 4
    power: {idle_w: 60, busy_min_w: 80, busy_w: 116, cap_min_w: 80, cap_max_w: 116}
"""


def test_sarood_testbed():
    p = load_platform("sarood-testbed")
    assert len(p) == 38 and p.nodes[0].cores == 6 and p.nodes[-1].name == "pc0037"
    assert p.budget_w == 3300.0
    assert p.cpu_power_levels_w == (30.0, 32.0, 34.0, 39.0, 45.0, 55.0)
    assert (p.base_w, p.mem_w) == (38.0, 18.0)
    pm = p.nodes[0].power
    # the node model agrees with base + memory + CPU: 116 W at the 60 W the CPU never exceeds, 86 W at 30 W
    assert pm.busy_w == 38 + 18 + 60 and pm.busy_min_w == p.node_power_at_level_w(30.0) == 86.0
    assert (pm.cap_min_w, pm.cap_max_w) == (86.0, 116.0)
    assert pm.idle_w == 38 + 18 + 13.5
    # overprovisioned: the budget feeds floor(3300 / 116) = 28 nodes at full power, all 38 at the lowest level
    assert math.floor(p.budget_w / pm.busy_w) == 28 < len(p)
    assert len(p) * p.node_power_at_level_w(p.cpu_power_levels_w[0]) <= p.budget_w < p.max_power_w


def test_intrepid_overprovisioned_loads_fast_within_the_limit():
    start = time.perf_counter()
    p = load_platform("intrepid-overprovisioned")
    elapsed = time.perf_counter() - start
    assert len(p) == 40_960 <= DEFAULT_MAX_NODES
    assert p.nodes[-1].name == "int40959" and p.homogeneous
    assert p.budget_w == 4_751_360.0 == 40_960 * 116 == p.max_power_w
    assert p.cpu_power_levels_w == (30.0, 33.0, 36.0, 44.0, 50.0, 60.0)
    # the paper's naive strategy: floor(W_max / (30 + 18 + 38)) = 55,248 nodes at 30 W
    assert math.floor(p.budget_w / p.node_power_at_level_w(30.0)) == 55_248
    assert elapsed < 5.0, f"loading 40,960 nodes took {elapsed:.2f} s"  # about 0.2 s measured


def test_an_explicit_lower_limit_still_applies_to_a_packaged_platform():
    with pytest.raises(ConfigError, match=r"node_groups\[0\]\.count: a machine of 40,960 nodes is more than the "
                                          r"sanity limit of 1,000"):
        load_platform("intrepid-overprovisioned", max_nodes=1000)


def test_every_other_platform_has_none():
    others = [name for name in packaged_platforms() if name not in ("sarood-testbed", "intrepid-overprovisioned")]
    assert {"default", "marconi100", "eurora", "ahmed2017"} <= set(others)
    built = [load_platform(name) for name in others]
    built += [platform_from_procs(16), Platform.homogeneous_cluster(2)]
    for p in built:
        assert (p.budget_w, p.cpu_power_levels_w, p.base_w, p.mem_w) == (None, None, None, None), p
    with pytest.raises(ValueError, match="not an overprovisioned platform"):
        built[0].node_power_at_level_w(30.0)


def test_with_response_classes_keeps_the_fields():
    p = load_platform("sarood-testbed").with_response_classes({})
    assert (p.budget_w, p.cpu_power_levels_w, p.base_w, p.mem_w) == (3300.0, (30.0, 32.0, 34.0, 39.0, 45.0, 55.0),
                                                                      38.0, 18.0)


def test_levels_are_sorted(tmp_path):
    p = load_platform(write(tmp_path, "name: x\nbudget_w: 400\ncpu_power_levels_w: [60, 30, 45]\nbase_w: 38\n"
                                      "mem_w: 18\n" + GROUP))
    assert p.cpu_power_levels_w == (30.0, 45.0, 60.0)


@pytest.mark.parametrize("keys, message", [
    ("budget_w: 0\n", r"platform\.yaml:2: budget_w: Input should be greater than 0"),
    ("budget_w: .inf\n", r"platform\.yaml:2: budget_w: Input should be a finite number"),
    ("cpu_power_levels_w: [30, 45]\nmem_w: 18\n", r"base_w: required with cpu_power_levels_w"),
    ("cpu_power_levels_w: [30, 45]\nbase_w: 38\n", r"mem_w: required with cpu_power_levels_w"),
    ("cpu_power_levels_w: [30, -5]\nbase_w: 38\nmem_w: 18\n",
     r"platform\.yaml:2: cpu_power_levels_w\[1\]: must be a positive finite number of watts, got -5"),
    ("cpu_power_levels_w: [30, 30]\nbase_w: 38\nmem_w: 18\n", r"cpu_power_levels_w\[1\]: 30 W is listed twice"),
    ("cpu_power_levels_w: []\nbase_w: 38\nmem_w: 18\n", r"cpu_power_levels_w: give at least one level"),
    ("base_w: 38\n", r"base_w: only means something with cpu_power_levels_w"),
    ("mem_w: -1\n", r"mem_w: Input should be greater than or equal to 0"),
    ("cpu_power_levels_w: [30, 61]\nbase_w: 38\nmem_w: 18\n",
     r"node_groups\[0\]\.power\.busy_w: 116 W is below base_w \+ mem_w \+ the highest CPU level "
     r"\(38 \+ 18 \+ 61 = 117 W\)"),
])
def test_bad_overprovisioning_keys_are_named(tmp_path, keys, message):
    path = write(tmp_path, "name: x\n" + keys + GROUP)
    with pytest.raises(ConfigError, match=message):
        load_platform(path)


def test_check_config_accepts_the_packaged_files(tmp_path):
    from wattsched.config.platform import load_platform_config

    for name in ("sarood-testbed", "intrepid-overprovisioned"):
        _, label = load_platform_config(name)
        proc = cli("check-config", label, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert "valid platform config" in proc.stdout


def test_simulate_kth_on_the_testbed_end_to_end(tmp_path):
    swf = kth_excerpt(tmp_path, 400)
    out = tmp_path / "run"
    proc = cli("simulate", "--trace", swf, "--platform", "sarood-testbed", "--policy", "easy", "--out", out, "-q",
               "--no-report", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    summary = read_summary(out)["summary"]
    assert summary["n_jobs"] == summary["jobs_completed"] + summary["jobs_timeout"] == 400
    assert summary["machine"] == "38 nodes × 6 cores (platform sarood-testbed)"
