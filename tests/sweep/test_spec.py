"""Sweep files: validation before any run, expansion (product, zip, exclude, grid blocks), run keys."""

import pytest
from helpers_sweep import KTH, SMALL

from wattsched.errors import ConfigError
from wattsched.sweep.expand import expand
from wattsched.sweep.spec import load_sweep


def test_small_sweep_expands_to_the_product_minus_excluded(write_sweep):
    runs = expand(load_sweep(write_sweep(SMALL)))
    assert len(runs) == 10
    assert len({r.key for r in runs}) == 10
    assert {r.axes["slice"] for r in runs} == {0, 1}
    assert not [r for r in runs if r.axes["policy"] == "easy" and r.axes["cap"] == "70%"]
    checks = sorted({r.axes.get("policy.check") for r in runs if r.axes["policy"] == "easy-pc"})
    assert checks == ["gaussian_99", "mean"]
    # the slice's own seed is the run seed when there is no seeds axis
    assert {r.spec["sim"]["seed"] for r in runs} == {7000, 7001}


def test_keys_are_stable_and_a_changed_file_changes_only_affected_runs(write_sweep):
    a = expand(load_sweep(write_sweep(SMALL)))
    b = expand(load_sweep(write_sweep(SMALL.replace('["50%", "70%"]', '["50%", "70%", "80%"]'), "b.yaml")))
    assert {r.key for r in a} < {r.key for r in b}
    assert len({r.key for r in b} - {r.key for r in a}) == 6  # 2 slices x (easy + 2 checks) at 80 %


def test_zip_groups_advance_together(write_sweep):
    text = f"""\
    kind: sweep
    base: {{trace: "{KTH}", procs: 100}}
    axes:
      caps: [50000, 60000, 70000]
      seeds: [1, 2, 3]
      policies: [easy, fcfs]
    zip: [[caps, seeds]]
    """
    runs = expand(load_sweep(write_sweep(text)))
    assert len(runs) == 6
    assert {(r.axes["cap"], r.axes["seed"]) for r in runs} == {(50000, 1), (60000, 2), (70000, 3)}


def test_grid_blocks_are_a_union(write_sweep):
    text = f"""\
    kind: sweep
    base: {{trace: "{KTH}", procs: 100}}
    axes: {{seeds: [1, 2]}}
    grid:
      - {{policies: [easy]}}
      - policies: [{{name: easy-pc, params: {{check: [max, mean]}}}}]
        caps: ["60%"]
    """
    runs = expand(load_sweep(write_sweep(text)))
    assert len(runs) == 2 + 4


@pytest.mark.parametrize("change, message", [
    ("  caps: [\"50%\", \"70%\"]\n", r":9: axes\.capz: unknown key; did you mean 'caps'\?"),
    ("  caps: [\"150%\", \"70%\"]\n",
     r":9: axes\.caps\[0\]: a percentage cap must be in \(0%, 100%\], got '150%'"),
    ("  slices: {trace: \"{trace}\", count: 2, length_h: 24, warmup_h: 12, seed: 7}\n",
     r":5: axes\.slices\.trace: no such file '.*nowhere\.swf'"),
])
def test_bad_sweep_files_fail_naming_file_key_and_line(write_sweep, change, message):
    text = SMALL
    if "150%" in change:
        text = text.replace('["50%", "70%"]', '["150%", "70%"]')
    elif "slices" in change:
        text = text.replace('trace: "{trace}"', 'trace: nowhere.swf')
    else:
        text = text.replace("  caps:", "  capz:")
    path = write_sweep(text)
    with pytest.raises(ConfigError, match=message) as exc:
        expand(load_sweep(path))
    assert str(path) in str(exc.value)


def test_bad_policy_parameter_names_the_axis_entry(write_sweep):
    path = write_sweep(SMALL.replace("check: [mean, gaussian_99]", "check: [mean, gaussian_42]"))
    with pytest.raises(ConfigError, match=r"axes\.policies\[1\]\.params\.check") as exc:
        expand(load_sweep(path))
    assert str(path) in str(exc.value)


def test_unknown_policy_and_exclude_column(write_sweep):
    with pytest.raises(ConfigError, match=r"axes\.policies\[0\].*no-such-policy|no-such-policy"):
        expand(load_sweep(write_sweep(SMALL.replace("    - easy\n", "    - no-such-policy\n"))))
    with pytest.raises(ConfigError, match=r"exclude\[0\]\.polcy: no axis column 'polcy'"):
        expand(load_sweep(write_sweep(SMALL.replace("{policy: easy, cap", "{polcy: easy, cap"))))


def test_zip_of_unequal_axes_and_unknown_axis(write_sweep):
    base = f'kind: sweep\nbase: {{trace: "{KTH}", procs: 100}}\naxes: {{caps: [50000, 60000], seeds: [1, 2, 3]}}\n'
    with pytest.raises(ConfigError, match=r"zip\[0\]: zipped axes need equal lengths, got caps: 2, seeds: 3"):
        expand(load_sweep(write_sweep(base + "zip: [[caps, seeds]]\n")))
    with pytest.raises(ConfigError, match=r"zip\[0\]\[1\]: unknown axis 'sedes'"):
        load_sweep(write_sweep(base + "zip: [[caps, sedes]]\n"))


def test_base_key_unknown_to_the_simulation_config(write_sweep):
    with pytest.raises(ConfigError, match=r":3: base\.polcy: not a key of the base simulation config"):
        load_sweep(write_sweep(SMALL.replace("base: {procs: 100,", "base: {polcy: easy, procs: 100,")))


def test_the_cap_reference_only_keys_percentage_runs(write_sweep):
    text = SMALL.replace('caps: ["50%", "70%"]', 'caps: ["50%", 20000, null]') + "cap_reference_dyn_w: 5000\n"
    a = {r.key: r for r in expand(load_sweep(write_sweep(text)))}
    b = {r.key: r for r in expand(load_sweep(write_sweep(text.replace(": 5000\n", ": 6000\n"), "b.yaml")))}
    kept = set(a) & set(b)
    assert kept and all(a[k].axes["cap"] != "50%" for k in kept)
    assert {r.axes["cap"] for k, r in a.items() if k not in kept} == {"50%"}
