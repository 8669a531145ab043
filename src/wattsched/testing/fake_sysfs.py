"""A fake sysfs tree with the layout, values and file modes of a real node's RAPL powercap and cpufreq.

The tree is what the kernel shows under ``/sys`` (Documentation/power/powercap/powercap.rst,
Documentation/ABI/testing/sysfs-class-powercap, Documentation/admin-guide/pm/cpufreq.rst)::

    ROOT/devices/virtual/powercap/intel-rapl/enabled               control type ("1")
    ROOT/devices/virtual/powercap/intel-rapl/intel-rapl:N/         one zone per package
        name  enabled  energy_uj (0400)  max_energy_range_uj
        constraint_{0,1}_{name,power_limit_uw,time_window_us,max_power_uw}
    ROOT/class/powercap/intel-rapl   -> ../../devices/virtual/powercap/intel-rapl
    ROOT/class/powercap/intel-rapl:N -> ../../devices/virtual/powercap/intel-rapl/intel-rapl:N
    ROOT/devices/system/cpu/cpufreq/policyK/                        one policy per CPU (acpi-cpufreq), in kHz
        cpuinfo_{min,max}_freq  cpuinfo_cur_freq (0400)  scaling_{min,max}_freq (rw)  scaling_cur_freq
        scaling_available_{frequencies,governors}  scaling_governor (rw)  scaling_setspeed (rw)  scaling_driver
    ROOT/devices/system/cpu/cpuK/cpufreq -> ../cpufreq/policyK
    ROOT/devices/system/cpu/{online,present,possible}

``energy_uj`` is root-only (0400) as it is since Linux 5.10 (CVE-2020-8694), read-only attributes are 0444 and
writable ones 0644. Everything under ``class/powercap`` is reached through symlinks, as on a real machine, so readers
that list ``class/powercap/*`` (node_exporter's procfs, our :class:`~wattsched.agent.sysfs.Sysfs`) see the same thing
they see on hardware. Point them at ROOT (``node_exporter --path.sysfs=ROOT``, ``Sysfs(root=ROOT)``).

:func:`make_fake_node` is idempotent: on an existing tree it rewrites the hardware description (names, ranges,
frequency tables) and file modes, and keeps the state (energy counters, power limits, time windows, ``enabled``,
``scaling_*`` frequencies and governor) as they are. :func:`advance_energy` moves a package's counter forward and
wraps it at ``max_energy_range_uj`` as the hardware does; a power emulator calls it.

Run as a module to build a tree from a shell::

    python -m wattsched.testing.fake_sysfs ROOT --packages 2 --cpus 8
    python -m wattsched.testing.fake_sysfs ROOT --advance 0 150.5     # add 150.5 J to package 0
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Sequence
from pathlib import Path

__all__ = ["GOVERNORS", "advance_energy", "make_fake_node", "main"]

RO = 0o444
RW = 0o644
ROOT_ONLY = 0o400

GOVERNORS = ("conservative", "ondemand", "userspace", "powersave", "performance", "schedutil")
"""What acpi-cpufreq offers in ``scaling_available_governors`` on a Debian kernel."""

LONG_TERM_WINDOW_US = 27983872  # PL1 window a common BIOS sets (~28 s)
SHORT_TERM_WINDOW_US = 2440  # PL2 window (~2.4 ms)

_RAPL_DEVICE = Path("devices/virtual/powercap/intel-rapl")
_CPU = Path("devices/system/cpu")


def _write(path: Path, text: str, mode: int) -> None:
    """Write ``text`` atomically (a reader never sees a half-written file) and set ``mode``."""
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)
    os.chmod(tmp, mode)
    os.replace(tmp, path)


def _put(path: Path, value: object, mode: int, *, keep: bool = False) -> None:
    """Write a sysfs attribute the way the kernel shows it (value and a newline); keep state if asked."""
    if keep and path.is_file():
        os.chmod(path, mode)
        return
    _write(path, f"{value}\n", mode)


def _symlink(link: Path, target: str) -> None:
    """Create ``link -> target`` (relative, as sysfs does) unless something is there already."""
    if link.is_symlink():
        if os.readlink(link) == target:
            return
        link.unlink()
    elif link.exists():
        return  # a real directory left by someone else: leave it alone
    link.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(target, link)


def _check_positive(name: str, value: float) -> float:
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number, got {value!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a positive finite number, got {value!r}")
    return value


def _cpu_list(n: int) -> str:
    return "0" if n == 1 else f"0-{n - 1}"


def make_fake_node(
    root: str | os.PathLike,
    *,
    packages: int = 1,
    cpus: int = 2,
    max_power_w: float = 250.0,
    tdp_w: float = 200.0,
    min_freq_hz: float = 1.2e9,
    max_freq_hz: float = 2.4e9,
    freqs: Sequence[float] | None = None,
    max_energy_range_uj: int = 262143328850,
) -> Path:
    """Create (or refresh) a fake RAPL + cpufreq sysfs tree under ``root``.

    Parameters
    ----------
    root : path
        Directory standing for ``/sys``; created if missing.
    packages : int
        Number of CPU packages, each an ``intel-rapl:N`` zone named ``package-N``.
    cpus : int
        Number of CPUs, each with its own cpufreq policy (as acpi-cpufreq has).
    max_power_w : float
        ``constraint_{0,1}_max_power_uw``: the highest limit the package accepts.
    tdp_w : float
        Initial long-term limit (``constraint_0_power_limit_uw``), as firmware sets PL1 to TDP. The short-term limit
        starts at ``max_power_w``.
    min_freq_hz, max_freq_hz : float
        Hardware frequency range (``cpuinfo_min_freq``/``cpuinfo_max_freq``); scaling limits start at it.
    freqs : sequence of float, optional
        ``scaling_available_frequencies`` in Hz; default every 100 MHz from max down to min. Each must lie in the
        hardware range.
    max_energy_range_uj : int
        Range of ``energy_uj``; counters wrap at it.

    Returns
    -------
    Path
        ``root``.
    """
    root = Path(root)
    if int(packages) < 1 or int(cpus) < 1:
        raise ValueError(f"packages and cpus must be at least 1, got packages={packages}, cpus={cpus}")
    max_power_w = _check_positive("max_power_w", max_power_w)
    tdp_w = _check_positive("tdp_w", tdp_w)
    if tdp_w > max_power_w:
        raise ValueError(f"tdp_w ({tdp_w:g}) must not exceed max_power_w ({max_power_w:g})")
    min_khz = round(_check_positive("min_freq_hz", min_freq_hz) / 1000)
    max_khz = round(_check_positive("max_freq_hz", max_freq_hz) / 1000)
    if min_khz > max_khz:
        raise ValueError(f"min_freq_hz ({min_freq_hz:g}) must not exceed max_freq_hz ({max_freq_hz:g})")
    if freqs is None:
        table = list(range(max_khz, min_khz - 1, -100_000))
        if table[-1] != min_khz:
            table.append(min_khz)
    else:
        table = sorted({round(_check_positive("freqs", f) / 1000) for f in freqs}, reverse=True)
        outside = [k for k in table if not min_khz <= k <= max_khz]
        if not table or outside:
            raise ValueError(f"freqs must be non-empty and within [{min_freq_hz:g}, {max_freq_hz:g}] Hz, "
                             f"got {list(freqs)!r}")
    if int(max_energy_range_uj) < 1:
        raise ValueError(f"max_energy_range_uj must be positive, got {max_energy_range_uj!r}")
    max_energy_range_uj = int(max_energy_range_uj)

    # --- powercap: the control type and one zone per package, reached through class/ symlinks -------------------
    control = root / _RAPL_DEVICE
    control.mkdir(parents=True, exist_ok=True)
    _put(control / "enabled", 1, RW, keep=True)
    _symlink(root / "class/powercap/intel-rapl", "../../devices/virtual/powercap/intel-rapl")
    max_uw = round(max_power_w * 1e6)
    for n in range(int(packages)):
        zone = control / f"intel-rapl:{n}"
        zone.mkdir(exist_ok=True)
        _put(zone / "name", f"package-{n}", RO)
        _put(zone / "enabled", 1, RW, keep=True)
        _put(zone / "max_energy_range_uj", max_energy_range_uj, RO)
        energy = zone / "energy_uj"
        if energy.is_file():
            current = int(energy.read_text().strip() or 0)
            if current >= max_energy_range_uj:  # the range shrank: wrap as the counter would have
                _put(energy, current % max_energy_range_uj, ROOT_ONLY)
            os.chmod(energy, ROOT_ONLY)
        else:
            _put(energy, 0, ROOT_ONLY)
        for i, (cname, limit_w, window_us) in enumerate(
            (("long_term", tdp_w, LONG_TERM_WINDOW_US), ("short_term", max_power_w, SHORT_TERM_WINDOW_US))
        ):
            _put(zone / f"constraint_{i}_name", cname, RO)
            _put(zone / f"constraint_{i}_power_limit_uw", round(limit_w * 1e6), RW, keep=True)
            _put(zone / f"constraint_{i}_time_window_us", window_us, RW, keep=True)
            _put(zone / f"constraint_{i}_max_power_uw", max_uw, RO)
        _symlink(root / f"class/powercap/intel-rapl:{n}", f"../../devices/virtual/powercap/intel-rapl/intel-rapl:{n}")

    # --- cpufreq: one policy per CPU (acpi-cpufreq), values in kHz ----------------------------------------------
    cpu_dir = root / _CPU
    (cpu_dir / "cpufreq").mkdir(parents=True, exist_ok=True)
    for name in ("online", "present", "possible"):
        _put(cpu_dir / name, _cpu_list(int(cpus)), RO)
    available = "".join(f"{k} " for k in table)  # the kernel prints "%u " per entry, then a newline
    governors = "".join(f"{g} " for g in GOVERNORS)
    for k in range(int(cpus)):
        policy = cpu_dir / "cpufreq" / f"policy{k}"
        policy.mkdir(exist_ok=True)
        _put(policy / "affected_cpus", k, RO)
        _put(policy / "related_cpus", k, RO)
        _put(policy / "cpuinfo_min_freq", min_khz, RO)
        _put(policy / "cpuinfo_max_freq", max_khz, RO)
        _put(policy / "cpuinfo_transition_latency", 10000, RO)
        _put(policy / "scaling_available_frequencies", available, RO)
        _put(policy / "scaling_available_governors", governors, RO)
        _put(policy / "scaling_driver", "acpi-cpufreq", RO)
        _put(policy / "scaling_min_freq", min_khz, RW, keep=True)
        _put(policy / "scaling_max_freq", max_khz, RW, keep=True)
        _put(policy / "scaling_cur_freq", max_khz, RO, keep=True)
        _put(policy / "scaling_governor", "schedutil", RW, keep=True)
        # only meaningful under the userspace governor; the kernel shows "<unsupported>" otherwise
        _put(policy / "scaling_setspeed", "<unsupported>", RW, keep=True)
        _put(policy / "cpuinfo_cur_freq", max_khz, ROOT_ONLY, keep=True)  # read from hardware: root-only
        (cpu_dir / f"cpu{k}").mkdir(exist_ok=True)
        _symlink(cpu_dir / f"cpu{k}" / "cpufreq", f"../cpufreq/policy{k}")
    return root


def advance_energy(root: str | os.PathLike, package: int, joules: float) -> int:
    """Add ``joules`` to package ``package``'s ``energy_uj``, wrapping at ``max_energy_range_uj``.

    The new value is written atomically with mode 0400 kept, so a concurrent reader (node_exporter, the agent)
    sees either the old or the new counter. One writer per package is assumed.

    Returns
    -------
    int
        The new counter in µJ.
    """
    joules = float(joules)
    if not math.isfinite(joules) or joules < 0:
        raise ValueError(f"joules must be a non-negative finite number (energy counters only go up), got {joules!r}")
    zone = Path(root) / "class/powercap" / f"intel-rapl:{int(package)}"
    energy = zone / "energy_uj"
    try:
        current = int(energy.read_text().strip())
        span = int((zone / "max_energy_range_uj").read_text().strip())
    except FileNotFoundError as exc:
        raise ValueError(f"{exc.filename}: no such package in the fake tree (make_fake_node first)") from None
    value = (current + round(joules * 1e6)) % span
    _write(energy, f"{value}\n", ROOT_ONLY)
    return value


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m wattsched.testing.fake_sysfs",
                                description="Create or refresh a fake RAPL powercap + cpufreq sysfs tree under ROOT.")
    p.add_argument("root", metavar="ROOT", help="directory standing for /sys")
    p.add_argument("--packages", type=int, default=1, help="CPU packages (RAPL zones), default 1")
    p.add_argument("--cpus", type=int, default=2, help="CPUs (cpufreq policies), default 2")
    p.add_argument("--max-power", type=float, default=250.0, metavar="W", help="constraint max power, default 250")
    p.add_argument("--tdp", type=float, default=200.0, metavar="W", help="initial long-term limit, default 200")
    p.add_argument("--min-freq", type=float, default=1.2e9, metavar="HZ", help="cpuinfo_min_freq in Hz")
    p.add_argument("--max-freq", type=float, default=2.4e9, metavar="HZ", help="cpuinfo_max_freq in Hz")
    p.add_argument("--freqs", type=float, nargs="+", metavar="HZ", help="available frequencies in Hz")
    p.add_argument("--max-energy-range-uj", type=int, default=262143328850, metavar="UJ")
    p.add_argument("--advance", nargs=2, metavar=("PACKAGE", "JOULES"),
                   help="instead of building, add JOULES to PACKAGE's energy counter and print it")
    args = p.parse_args(argv)
    try:
        if args.advance:
            print(advance_energy(args.root, int(args.advance[0]), float(args.advance[1])))
            return 0
        make_fake_node(args.root, packages=args.packages, cpus=args.cpus, max_power_w=args.max_power,
                       tdp_w=args.tdp, min_freq_hz=args.min_freq, max_freq_hz=args.max_freq, freqs=args.freqs,
                       max_energy_range_uj=args.max_energy_range_uj)
    except (ValueError, OSError) as exc:
        print(f"{p.prog}: error: {exc}", file=sys.stderr)
        return 2
    print(args.root)
    return 0


if __name__ == "__main__":
    sys.exit(main())
