"""Platform files: packaged platforms, node naming, validation messages."""

from __future__ import annotations

import re
import textwrap

import pytest

from wattsched.config.platform import (
    PlatformConfig,
    PlatformSizeWarning,
    PowerModelConfig,
    load_platform,
    load_platform_config,
    packaged_platforms,
    platform_from_procs,
    response_classes_of,
)
from wattsched.errors import ConfigError
from wattsched.model.platform import NodePowerModel
from wattsched.model.response import DEFAULT_CLASSES, CpiResponse, LinearResponse


def write(tmp_path, text: str, name: str = "platform.yaml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def error_of(path) -> str:
    with pytest.raises(ConfigError) as info:
        load_platform(path)
    return str(info.value)


# --------------------------------------------------------------------------- packaged files


def test_packaged_names():
    assert {"default", "marconi100"} <= set(packaged_platforms())


def test_default_platform_is_the_node_power_model_default():
    p = load_platform("default")
    assert len(p) == 128
    assert p.homogeneous
    assert p.nodes[0].name == "node0000" and p.nodes[-1].name == "node0127"
    assert p.nodes[0].group == "taurus"
    # the shipped data and the class defaults must not drift apart
    assert p.nodes[0].power == NodePowerModel()
    assert p.source.endswith("default.yaml")


def test_marconi100():
    p = load_platform("marconi100")
    assert len(p) == 980
    node = p.nodes[0]
    assert (node.cores, node.gpus) == (32, 4)
    assert node.power.busy_w + node.gpus * node.power.gpu_tdp_w == pytest.approx(2100.0)
    assert p.max_power_w == pytest.approx(980 * 2100.0)
    assert node.power.cap_max_w == 2100.0
    assert len({n.name for n in p.nodes}) == 980


def test_unknown_packaged_name_lists_the_known_ones():
    with pytest.raises(ConfigError, match=r"marconi: no packaged platform of that name; packaged .*marconi100"):
        load_platform("marconi")


def test_missing_file(tmp_path):
    with pytest.raises(ConfigError, match=r"nope\.yaml: no such file"):
        load_platform(tmp_path / "nope.yaml")


# --------------------------------------------------------------------------- groups and naming


def test_groups_naming_and_order(tmp_path):
    path = write(
        tmp_path,
        """\
        name: mixed
        node_groups:
          - name: cpu
            count: 3
            cores: 16
            mem_mb: 64000
          - name: gpu
            count: 2
            cores: 32
            gpus: 4
            prefix: g
            features: [gpu, nvlink]
            power: {idle_w: 300, busy_min_w: 400, busy_w: 900, gpu_tdp_w: 300, cap_min_w: 500, cap_max_w: 2100}
        """,
    )
    p = load_platform(path)
    assert [n.name for n in p.nodes] == ["cpu0000", "cpu0001", "cpu0002", "g0000", "g0001"]
    assert [n.index for n in p.nodes] == list(range(5))
    assert p.nodes[3].group == "gpu" and p.nodes[3].features == ("gpu", "nvlink")
    assert p.nodes[0].mem_mb == 64000 and p.nodes[0].power == NodePowerModel()
    assert p.nodes[4].power.idle_w == 300 and p.nodes[4].power.cap_max_w == 2100
    assert not p.homogeneous
    assert p.max_power_w == pytest.approx(3 * NodePowerModel().busy_w + 2 * 2100)


def test_wide_groups_get_more_digits():
    cfg = PlatformConfig.model_validate({"name": "big", "node_groups": [{"name": "n", "count": 10001}]})
    names = cfg.node_groups[0].node_names()
    assert names[0] == "n00000" and names[-1] == "n10000"


def test_node_names_must_be_unique_across_groups(tmp_path):
    path = write(
        tmp_path,
        """\
        name: clash
        node_groups:
          - {name: a, count: 2, prefix: node}
          - {name: b, count: 2, prefix: node}
        """,
    )
    msg = error_of(path)
    assert re.search(r"platform\.yaml:\d+: node_groups\[1\]\.prefix"
                     r": node name 'node0000' is also in node_groups\[0\]", msg)


def test_group_names_must_be_unique(tmp_path):
    path = write(tmp_path, "name: x\nnode_groups: [{name: a, count: 1}, {name: a, count: 1, prefix: b}]\n")
    with pytest.raises(ConfigError, match=r"node_groups\[1\]\.name: group name 'a' is already used by node_gro"):
        load_platform(path)


def test_cap_max_defaults_to_busy():
    pm = PowerModelConfig(idle_w=100, busy_min_w=150, busy_w=400).to_model()
    assert pm.cap_max_w == 400


def test_frequencies_are_sorted():
    pm = PowerModelConfig(freq_levels_hz=[2.0e9, 1.0e9]).to_model()
    assert pm.freq_levels_hz == (1.0e9, 2.0e9)
    assert PowerModelConfig(freq_levels_hz=[]).to_model().max_freq_hz == 0.0


# --------------------------------------------------------------------------- errors


def test_idle_above_busy_names_the_key_path(tmp_path):
    path = write(
        tmp_path,
        """\
        name: x
        node_groups:
          - name: a
            count: 1
          - name: b
            count: 1
            power:
              idle_w: 300
        """,
    )
    with pytest.raises(ConfigError, match=r"platform\.yaml:8: node_groups\[1\]\.power\.idle_w: must be ≤") as info:
        load_platform(path)
    assert "(190.738 W, the default; set busy_w too)" in str(info.value)
    assert ":8: node_groups[1].power.idle_w" in str(info.value)


def test_every_range_rule(tmp_path):
    path = write(
        tmp_path,
        """\
        name: x
        node_groups:
          - name: a
            count: 1
            power: {off_w: 50, idle_w: 40, busy_min_w: 200, busy_w: 150, cap_min_w: 300, cap_max_w: 200}
        """,
    )
    msg = error_of(path)
    lines = msg.splitlines()
    assert len(lines) == 3, msg
    assert any(re.search(r"node_groups\[0\]\.power\.off_w: must be ≤ idle_w \(40 W\), got 50", x) for x in lines)
    assert any(re.search(r"power\.busy_min_w: must be ≤ busy_w \(150 W\), got 200", x) for x in lines)
    assert any(re.search(r"power\.cap_min_w: must be ≤ cap_max_w \(200 W\), got 300", x) for x in lines)
    assert all(":5: " in x for x in lines)


def test_idle_above_busy_min(tmp_path):
    path = write(tmp_path, "name: x\nnode_groups: [{name: a, count: 1, power: {idle_w: 130}}]\n")
    with pytest.raises(ConfigError, match=r"power\.idle_w: must be ≤ busy_min_w \(125.88 W, the default; set busy_m"):
        load_platform(path)


def test_negative_and_bad_frequencies(tmp_path):
    path = write(tmp_path, "name: x\nnode_groups: [{name: a, count: 1, power: {freq_levels_hz: [1e9, 0, 1e9]}}]\n")
    msg = error_of(path)
    assert re.search(r"power\.freq_levels_hz\[1\]: must be a positive frequency in Hz, got 0", msg)
    assert re.search(r"power\.freq_levels_hz\[2\]: 1e\+09 Hz is listed twice", msg)


def test_unknown_keys_are_rejected_with_a_suggestion(tmp_path):
    path = write(
        tmp_path,
        """\
        name: x
        colour: blue
        node_groups:
          - name: a
            count: 1
            power: {idel_w: 3}
        """,
    )
    msg = error_of(path)
    expected = (r"platform\.yaml:2: colour: unknown key \(valid keys: kind, name, node_groups, response_classes, "
                r"budget_w, cpu_power_levels_w, base_w, mem_w\)")
    assert re.search(expected, msg)
    assert re.search(r":6: node_groups\[0\]\.power\.idel_w: unknown key; did you mean 'idle_w'\?", msg)


def test_all_errors_reported_at_once(tmp_path):
    path = write(
        tmp_path,
        """\
        name: x
        node_groups:
          - {name: a, count: 0}
          - {name: b, cores: -1}
        """,
    )
    lines = error_of(path).splitlines()
    assert len(lines) == 3
    assert re.search(r":3: node_groups\[0\]\.count: Input should be greater than 0, got 0", lines[0])
    assert re.search(r":4: node_groups\[1\]\.count: required key is missing", "\n".join(lines))
    assert re.search(r"node_groups\[1\]\.cores: Input should be greater than 0, got -1", "\n".join(lines))


def test_no_groups(tmp_path):
    path = write(tmp_path, "name: x\nnode_groups: []\n")
    with pytest.raises(ConfigError, match=r"node_groups: List should have at least 1 item"):
        load_platform(path)


def test_yaml_syntax_error_names_the_line(tmp_path):
    path = write(tmp_path, "name: x\nnode_groups:\n  - name: a\n    count: [1\n")
    with pytest.raises(ConfigError, match=r"platform\.yaml:5: invalid YAML \(column \d+\)"):
        load_platform(path)


def test_duplicate_yaml_keys_are_an_error(tmp_path):
    path = write(tmp_path, "name: x\nname: y\nnode_groups: [{name: a, count: 1}]\n")
    with pytest.raises(ConfigError, match=r"platform\.yaml:2: name: duplicate key \(first at line 1\)"):
        load_platform(path)


def test_empty_file(tmp_path):
    path = write(tmp_path, "# nothing\n")
    with pytest.raises(ConfigError, match=r"platform\.yaml: the file is empty"):
        load_platform(path)


# --------------------------------------------------------------------------- response classes


def test_response_classes_extend_the_defaults(tmp_path):
    path = write(
        tmp_path,
        """\
        name: x
        node_groups: [{name: a, count: 1}]
        response_classes:
          io: {model: cpi, cpi: 8, floor: 0.4}
          cpu: {model: linear, f: 0.9}
        """,
    )
    p = load_platform(path)
    assert p.response_classes["io"] == CpiResponse(cpi=8, floor=0.4)
    assert p.response_classes["cpu"] == LinearResponse(f=0.9)
    assert p.response_classes["memory"] == DEFAULT_CLASSES["memory"]
    assert response_classes_of(p) == dict(p.response_classes)


def test_bad_response_classes(tmp_path):
    path = write(
        tmp_path,
        """\
        name: x
        node_groups: [{name: a, count: 1}]
        response_classes:
          a: {model: quadratic}
          b: {model: linear, g: 1}
          c: {model: cpi, floor: 1.5}
          d: {model: poly, a: 1}
        """,
    )
    msg = error_of(path)
    assert re.search(r":4: response_classes\.a: model must be one of linear, cpi, poly, got 'quadratic'", msg)
    assert re.search(r"response_classes\.b: unknown parameter 'g' for model 'linear'; its parameters are f, floor", msg)
    assert re.search(r"response_classes\.c: floor must be in \[0, 1\), got 1\.5", msg)
    assert re.search(r"response_classes\.d: model 'poly' needs b, c, d, alpha", msg)


def test_load_platform_config_returns_model_and_label():
    cfg, label = load_platform_config("default")
    assert isinstance(cfg, PlatformConfig) and label.endswith("default.yaml")
    with pytest.raises(Exception, match="frozen"):
        cfg.name = "other"


# --------------------------------------------------------------------------- platform_from_procs


def test_platform_from_procs_exact():
    p = platform_from_procs(128)
    assert len(p) == 128 and p.total_cores == 128 and p.nodes[0].power == NodePowerModel()
    assert response_classes_of(p) == DEFAULT_CLASSES


def test_platform_from_procs_rounds_up_with_a_warning():
    with pytest.warns(PlatformSizeWarning, match=r"procs=130 is not a multiple of cores_per_node=8: using 17 nodes"):
        p = platform_from_procs(130, cores_per_node=8, name="kth")
    assert len(p) == 17 and p.name == "kth"


def test_platform_from_procs_custom_power():
    pm = NodePowerModel(idle_w=50, busy_w=100, busy_min_w=60, cap_max_w=100)
    assert platform_from_procs(4, power=pm).nodes[3].power is pm


@pytest.mark.parametrize("procs, cores, key", [(0, 1, "procs"), (4, 0, "cores_per_node"), (2.5, 1, "procs")])
def test_platform_from_procs_rejects_bad_sizes(procs, cores, key):
    with pytest.raises(ConfigError, match=rf"^{key}: must be a positive whole number"):
        platform_from_procs(procs, cores)


def test_eurora():
    p = load_platform("eurora")
    assert len(p) == 64
    gpu = [n for n in p.nodes if n.gpus]
    mic = [n for n in p.nodes if "mic" in n.features]
    assert len(gpu) == 32 and len(mic) == 32 and all(n.gpus == 2 for n in gpu)
    assert {(n.cores, n.mem_mb) for n in p.nodes} == {(16, 16384)}
    assert p.max_power_w == pytest.approx(30_700.0, rel=0.01)  # the paper's 30.7 kW Linpack peak
    assert len({n.name for n in p.nodes}) == 64
