"""The fake sysfs tree and the Sysfs reader/writer, on real files."""

import glob
import math
import os
import stat
from pathlib import Path

import pytest

from wattsched.agent.sysfs import EnergyMeter, Sysfs, SysfsError, energy_delta_uj
from wattsched.errors import WattschedError
from wattsched.testing.fake_sysfs import advance_energy, main, make_fake_node

ZONE = "class/powercap/intel-rapl:{}"
POLICY = "devices/system/cpu/cpufreq/policy{}"


def mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def text(path: Path) -> str:
    return path.read_text().strip()


@pytest.fixture
def root(tmp_path):
    return make_fake_node(tmp_path / "sys", packages=2, cpus=3)


@pytest.fixture
def sysfs(root):
    return Sysfs(root)


# --- the fake tree ---------------------------------------------------------------------------------------------------
def test_fake_tree_has_the_kernel_layout_values_and_modes(root):
    control = root / "class/powercap/intel-rapl"
    assert control.is_symlink() and os.readlink(control) == "../../devices/virtual/powercap/intel-rapl"
    assert text(control / "enabled") == "1"
    for n in (0, 1):
        zone = root / ZONE.format(n)
        assert zone.is_symlink()
        assert zone.resolve() == (root / f"devices/virtual/powercap/intel-rapl/intel-rapl:{n}").resolve()
        assert text(zone / "name") == f"package-{n}"
        assert text(zone / "energy_uj") == "0"
        assert text(zone / "max_energy_range_uj") == "262143328850"
        assert text(zone / "constraint_0_name") == "long_term"
        assert text(zone / "constraint_1_name") == "short_term"
        assert text(zone / "constraint_0_power_limit_uw") == "200000000"
        assert text(zone / "constraint_0_max_power_uw") == "250000000"
        assert mode(zone / "energy_uj") == 0o400  # root-only since Linux 5.10 (CVE-2020-8694)
        for ro in ("name", "max_energy_range_uj", "constraint_0_name", "constraint_0_max_power_uw",
                   "constraint_1_name", "constraint_1_max_power_uw"):
            assert mode(zone / ro) == 0o444, ro
        for rw in ("enabled", "constraint_0_power_limit_uw", "constraint_0_time_window_us",
                   "constraint_1_power_limit_uw", "constraint_1_time_window_us"):
            assert mode(zone / rw) == 0o644, rw
    # what node_exporter's procfs does: list class/powercap and read <entry>/name through the symlinks
    names = sorted(text(Path(p)) for p in glob.glob(str(root / "class/powercap/*/name")))
    assert names == ["package-0", "package-1"]

    for k in range(3):
        policy = root / POLICY.format(k)
        assert (root / f"devices/system/cpu/cpu{k}/cpufreq").resolve() == policy.resolve()
        assert os.readlink(root / f"devices/system/cpu/cpu{k}/cpufreq") == f"../cpufreq/policy{k}"
        assert text(policy / "cpuinfo_min_freq") == "1200000"  # kHz, as the kernel writes them
        assert text(policy / "cpuinfo_max_freq") == "2400000"
        assert text(policy / "scaling_max_freq") == "2400000"
        assert text(policy / "scaling_min_freq") == "1200000"
        assert text(policy / "scaling_driver") == "acpi-cpufreq"
        assert "performance" in text(policy / "scaling_available_governors").split()
        freqs = (policy / "scaling_available_frequencies").read_text()
        assert freqs.endswith(" \n")  # "%u " per entry, then a newline
        values = [int(f) for f in freqs.split()]
        assert values[0] == 2400000 and values[-1] == 1200000 and values == sorted(values, reverse=True)
        assert mode(policy / "scaling_max_freq") == 0o644 and mode(policy / "cpuinfo_max_freq") == 0o444
    assert text(root / "devices/system/cpu/online") == "0-2"


def test_fake_tree_takes_an_explicit_frequency_table(tmp_path):
    root = make_fake_node(tmp_path, cpus=1, freqs=[1.2e9, 2.4e9, 1.8e9])
    assert (root / POLICY.format(0) / "scaling_available_frequencies").read_text() == "2400000 1800000 1200000 \n"


def test_fake_tree_is_idempotent_and_keeps_state(root):
    advance_energy(root, 0, 12.5)
    (root / ZONE.format(1) / "constraint_0_power_limit_uw").write_text("150000000\n")
    (root / POLICY.format(2) / "scaling_max_freq").write_text("1800000\n")
    make_fake_node(root, packages=2, cpus=3)
    assert text(root / ZONE.format(0) / "energy_uj") == "12500000"
    assert text(root / ZONE.format(1) / "constraint_0_power_limit_uw") == "150000000"
    assert text(root / POLICY.format(2) / "scaling_max_freq") == "1800000"
    assert mode(root / ZONE.format(0) / "energy_uj") == 0o400
    assert not list(root.rglob(".*tmp*"))  # no temporary files left behind


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"tdp_w": 300.0}, "tdp_w .* must not exceed max_power_w"),
    ({"max_power_w": math.nan}, "max_power_w must be a positive finite number"),
    ({"min_freq_hz": 3e9}, "min_freq_hz .* must not exceed max_freq_hz"),
    ({"freqs": [3e9]}, "freqs must be non-empty and within"),
    ({"packages": 0}, "packages and cpus must be at least 1"),
])
def test_fake_tree_refuses_impossible_hardware(tmp_path, kwargs, match):
    with pytest.raises(ValueError, match=match):
        make_fake_node(tmp_path, **kwargs)


def test_advance_energy_wraps_like_the_hardware(tmp_path):
    root = make_fake_node(tmp_path, max_energy_range_uj=1_000_000)
    assert advance_energy(root, 0, 0.75) == 750_000
    assert advance_energy(root, 0, 0.5) == 250_000  # 1.25 J on a 1 J counter
    assert text(root / ZONE.format(0) / "energy_uj") == "250000"
    assert mode(root / ZONE.format(0) / "energy_uj") == 0o400
    with pytest.raises(ValueError, match="energy counters only go up"):
        advance_energy(root, 0, -1)
    with pytest.raises(ValueError, match="no such package"):
        advance_energy(root, 5, 1)


def test_fake_module_entry_point(tmp_path, capsys):
    assert main([str(tmp_path), "--packages", "2", "--cpus", "1"]) == 0
    assert main([str(tmp_path), "--advance", "1", "2"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "2000000"
    assert main([str(tmp_path), "--tdp", "900"]) == 2
    assert "must not exceed" in capsys.readouterr().err


# --- Sysfs: RAPL ------------------------------------------------------------------------------------------------------
def test_reads_packages_energy_and_limits(root, sysfs):
    packages = sysfs.packages()
    assert [(p.index, p.name) for p in packages] == [(0, "package-0"), (1, "package-1")]
    assert packages[0].path == root / ZONE.format(0)
    advance_energy(root, 1, 3.0)
    assert sysfs.energy_uj(1) == 3_000_000 and sysfs.energy_uj(packages[0]) == 0
    assert sysfs.max_energy_range_uj(0) == 262143328850
    assert sysfs.power_limit_w(0) == 200.0
    assert sysfs.max_power_w(0) == 250.0


def test_other_zones_are_not_packages(root, sysfs):
    sub = root / "devices/virtual/powercap/intel-rapl/intel-rapl:0/intel-rapl:0:0"
    sub.mkdir()
    (sub / "name").write_text("core\n")
    os.symlink("../../devices/virtual/powercap/intel-rapl/intel-rapl:0/intel-rapl:0:0",
               root / "class/powercap/intel-rapl:0:0")
    psys = root / "devices/virtual/powercap/intel-rapl/intel-rapl:2"
    psys.mkdir()
    (psys / "name").write_text("psys\n")
    os.symlink("../../devices/virtual/powercap/intel-rapl/intel-rapl:2", root / "class/powercap/intel-rapl:2")
    assert [p.name for p in sysfs.packages()] == ["package-0", "package-1"]


def test_no_powercap_means_no_packages(tmp_path):
    assert Sysfs(tmp_path).packages() == []
    assert Sysfs(tmp_path).cpufreq_policies() == []
    with pytest.raises(ValueError, match=r"no RAPL package 0 .* \(packages: none\)"):
        Sysfs(tmp_path).power_limit_w(0)


def test_set_power_limit_writes_integer_microwatts(root, sysfs):
    assert sysfs.set_power_limit_w(1, 150.5) == 150.5
    assert (root / ZONE.format(1) / "constraint_0_power_limit_uw").read_text() == "150500000\n"
    assert sysfs.set_power_limit_w(1, 99) == 99.0
    assert (root / ZONE.format(1) / "constraint_0_power_limit_uw").read_text() == "99000000\n"
    assert text(root / ZONE.format(0) / "constraint_0_power_limit_uw") == "200000000"  # other package untouched
    assert text(root / ZONE.format(1) / "constraint_1_power_limit_uw") == "250000000"  # short term untouched


@pytest.mark.parametrize(("watts", "match"), [
    (-5, "power limit must be positive, got -5 W"),
    (0, "power limit must be positive, got 0 W"),
    (math.nan, "power limit must be a number of W, got NaN"),
    (math.inf, "power limit must be finite, got inf W"),
    (-math.inf, "power limit must be finite, got -inf W"),
    ("100", "power limit must be a number of W, got '100'"),
    (None, "power limit must be a number of W, got None"),
    (True, "power limit must be a number of W, got True"),
    (0.5, r"power limit 0.5 W for package-0 is below the minimum 1 W"),
    (250.001, r"power limit 250.001 W for package-0 is above its maximum 250 W \(constraint_0_max_power_uw\)"),
])
def test_bad_power_limits_are_refused_before_writing(root, sysfs, watts, match):
    with pytest.raises(ValueError, match=match):
        sysfs.set_power_limit_w(0, watts)
    assert text(root / ZONE.format(0) / "constraint_0_power_limit_uw") == "200000000"


def test_power_floor_is_configurable(root):
    sysfs = Sysfs(root, min_power_w=60)
    with pytest.raises(ValueError, match="power limit 59 W for package-0 is below the minimum 60 W"):
        sysfs.set_power_limit_w(0, 59)
    assert sysfs.set_power_limit_w(0, 60) == 60.0
    assert sysfs.set_power_limit_w(0, 250) == 250.0  # the maximum itself is allowed


def test_long_term_constraint_is_found_by_name_not_index(root, sysfs):
    zone = root / ZONE.format(0)
    for path, value in (("constraint_0_name", "short_term"), ("constraint_1_name", "long_term"),
                        ("constraint_0_power_limit_uw", "300000000"), ("constraint_1_power_limit_uw", "120000000"),
                        ("constraint_0_max_power_uw", "400000000"), ("constraint_1_max_power_uw", "180000000")):
        os.chmod(zone / path, 0o644)
        (zone / path).write_text(value + "\n")
    assert sysfs.constraint(0) == 1
    assert sysfs.power_limit_w(0) == 120.0
    assert sysfs.max_power_w(0) == 180.0
    with pytest.raises(ValueError, match=r"above its maximum 180 W \(constraint_1_max_power_uw\)"):
        sysfs.set_power_limit_w(0, 200)
    sysfs.set_power_limit_w(0, 100)
    assert text(zone / "constraint_1_power_limit_uw") == "100000000"
    assert text(zone / "constraint_0_power_limit_uw") == "300000000"


def test_missing_long_term_constraint_is_a_sysfs_error(root, sysfs):
    (root / ZONE.format(0) / "constraint_0_name").write_text("peak_power\n")
    with pytest.raises(SysfsError, match=r"intel-rapl:0: no constraint named 'long_term' \(found \['peak_power', "
                                         r"'short_term'\]\)"):
        sysfs.power_limit_w(0)


def test_missing_energy_file_is_a_sysfs_error_naming_it(root, sysfs):
    # root bypasses file modes, so an unreadable energy_uj is shown by a missing one: the same OSError path
    (root / ZONE.format(0) / "energy_uj").unlink()
    with pytest.raises(SysfsError, match=r"intel-rapl:0/energy_uj: cannot read: No such file or directory") as info:
        sysfs.energy_uj(0)
    assert isinstance(info.value, WattschedError)
    assert info.value.path.endswith("intel-rapl:0/energy_uj")


def test_missing_limit_file_on_write_is_a_sysfs_error_and_creates_nothing(root, sysfs):
    path = root / ZONE.format(0) / "constraint_0_power_limit_uw"
    path.unlink()
    with pytest.raises(SysfsError, match=r"constraint_0_power_limit_uw: cannot open for writing: No such file"):
        sysfs.set_power_limit_w(0, 100)
    assert not path.exists()


def test_garbage_in_a_file_is_a_sysfs_error(root, sysfs):
    (root / ZONE.format(0) / "max_energy_range_uj").write_text("lots\n")
    with pytest.raises(SysfsError, match=r"max_energy_range_uj: expected an integer, read 'lots'"):
        sysfs.max_energy_range_uj(0)


# --- Sysfs: cpufreq ---------------------------------------------------------------------------------------------------
def test_reads_frequency_range(sysfs):
    assert [p.name for p in sysfs.cpufreq_policies()] == ["policy0", "policy1", "policy2"]
    assert sysfs.max_freq_hz() == 2.4e9
    assert sysfs.min_freq_hz() == 1.2e9
    assert sysfs.scaling_max_freq_hz() == 2.4e9


def test_set_max_freq_writes_every_policy_in_khz(root, sysfs):
    assert sysfs.set_max_freq_hz(1.8e9) == 1.8e9
    for k in range(3):
        assert (root / POLICY.format(k) / "scaling_max_freq").read_text() == "1800000\n"
    assert sysfs.policy_scaling_max_freq_hz() == {"policy0": 1.8e9, "policy1": 1.8e9, "policy2": 1.8e9}
    assert sysfs.reset_max_freq() == 2.4e9
    assert all(text(root / POLICY.format(k) / "scaling_max_freq") == "2400000" for k in range(3))


@pytest.mark.parametrize(("hz", "match"), [
    (-1e9, "frequency must be positive, got -1e\\+09 Hz"),
    (0, "frequency must be positive, got 0 Hz"),
    (math.nan, "frequency must be a number of Hz, got NaN"),
    (math.inf, "frequency must be finite, got inf Hz"),
    (1.1e9, r"frequency 1.1e\+09 Hz is below the hardware minimum 1.2e\+09 Hz \(cpuinfo_min_freq\)"),
    (2.5e9, r"frequency 2.5e\+09 Hz is above the hardware maximum 2.4e\+09 Hz \(cpuinfo_max_freq\)"),
])
def test_bad_frequencies_are_refused_before_writing(root, sysfs, hz, match):
    with pytest.raises(ValueError, match=match):
        sysfs.set_max_freq_hz(hz)
    assert all(text(root / POLICY.format(k) / "scaling_max_freq") == "2400000" for k in range(3))


def test_max_freq_must_stay_above_scaling_min(root, sysfs):
    (root / POLICY.format(1) / "scaling_min_freq").write_text("2000000\n")
    with pytest.raises(ValueError, match=r"below policy1's scaling_min_freq 2e\+09 Hz .* lower scaling_min_freq "
                                         r"first"):
        sysfs.set_max_freq_hz(1.8e9)
    assert text(root / POLICY.format(0) / "scaling_max_freq") == "2400000"  # nothing written, not even policy0


def test_no_cpufreq_is_a_sysfs_error_for_frequency_reads(tmp_path):
    with pytest.raises(SysfsError, match="no cpufreq policies"):
        Sysfs(tmp_path).max_freq_hz()


# --- energy -----------------------------------------------------------------------------------------------------------
def test_energy_delta_handles_one_wrap():
    assert energy_delta_uj(10, 30, 100) == 20
    assert energy_delta_uj(90, 10, 100) == 20
    assert EnergyMeter.power_w(90, 1.0, 10, 3.0, range_uj=100) == pytest.approx(1e-5)
    with pytest.raises(ValueError, match="readings must be in time order"):
        EnergyMeter.power_w(0, 2.0, 1, 2.0, range_uj=100)


def test_energy_meter_across_a_counter_wrap(tmp_path):
    root = make_fake_node(tmp_path, max_energy_range_uj=1_000_000_000)  # 1 kJ counter
    advance_energy(root, 0, 900)
    now = [100.0]
    meter = EnergyMeter(Sysfs(root), 0, clock=lambda: now[0])
    assert meter.sample() is None
    advance_energy(root, 0, 400)  # 900 J + 400 J wraps to 300 J
    now[0] = 102.0
    assert Sysfs(root).energy_uj(0) == 300_000_000
    assert meter.sample() == pytest.approx(200.0)
    advance_energy(root, 0, 50)
    now[0] = 103.0
    assert meter.sample() == pytest.approx(50.0)


def test_a_read_waits_for_a_writer_descheduled_between_truncate_and_write(sysfs):
    import threading
    import time

    pkg = sysfs.packages()[0]
    path = pkg.path / f"constraint_{sysfs.constraint(pkg)}_power_limit_uw"
    path.write_text("")  # truncated, as by a writer that a loaded machine has not run again yet for 20 ms
    writer = threading.Timer(0.02, lambda: path.write_text("150000000\n"))
    writer.start()
    try:
        assert sysfs.power_limit_w(pkg) == 150.0
    finally:
        writer.join()
    path.write_text("")  # never written: an error naming the file, after a bounded wait
    t0 = time.monotonic()
    with pytest.raises(SysfsError, match=r"constraint_0_power_limit_uw: empty file"):
        sysfs.power_limit_w(pkg)
    assert time.monotonic() - t0 < 1.0
