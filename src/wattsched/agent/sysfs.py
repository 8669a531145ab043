"""RAPL powercap and cpufreq through sysfs: read counters and limits, write validated limits.

Facts this module relies on (REFERENCE-slurm-power.md §5; Linux Documentation/power/powercap/powercap.rst,
Documentation/ABI/testing/sysfs-class-powercap, Documentation/admin-guide/pm/cpufreq.rst):

- Packages are the zones ``class/powercap/intel-rapl:N`` named ``package-N``. Other top-level zones (``psys`` on
  many laptops) and sub-zones (``intel-rapl:N:M``: core, uncore, dram) are not packages.
- Constraints are numbered by the driver, not by meaning: the long-term limit (PL1) is the constraint whose
  ``constraint_X_name`` is ``long_term``, which is usually but not always ``X = 0``.
- Power is in µW, energy in µJ, time windows in µs; RAPL has no power file, power is Δenergy/Δt, and
  ``energy_uj`` wraps at ``max_energy_range_uj``. Since Linux 5.10 ``energy_uj`` is readable by root only.
- cpufreq values are in kHz; ``scaling_max_freq`` must stay at or above ``scaling_min_freq``.

Bad values raise ``ValueError`` before anything is written; I/O failures raise :class:`SysfsError` naming the file.
"""

from __future__ import annotations

import errno
import math
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from wattsched.errors import WattschedError

__all__ = ["CpufreqPolicy", "EnergyMeter", "Package", "Sysfs", "SysfsError", "energy_delta_uj"]

_ZONE = re.compile(r"^intel-rapl:(\d+)$")
_PACKAGE_NAME = re.compile(r"^package-(\d+)$")
_POLICY = re.compile(r"^policy(\d+)$")


class SysfsError(WattschedError):
    """A sysfs file could not be read or written. ``path`` names it."""

    def __init__(self, path: str | os.PathLike, message: str):
        self.path = str(path)
        super().__init__(f"{path}: {message}")


@dataclass(frozen=True)
class Package:
    """A RAPL package zone: ``index`` from its name ``package-N``, ``path`` its ``class/powercap`` directory."""

    index: int
    name: str
    path: Path


@dataclass(frozen=True)
class CpufreqPolicy:
    """A cpufreq policy directory (``devices/system/cpu/cpufreq/policyK``)."""

    name: str
    path: Path


def _number(what: str, value: object, unit: str) -> float:
    """``value`` as a positive finite float, or a ``ValueError`` saying what is wrong with it."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{what} must be a number of {unit}, got {value!r}")
    value = float(value)
    if math.isnan(value):
        raise ValueError(f"{what} must be a number of {unit}, got NaN")
    if math.isinf(value):
        raise ValueError(f"{what} must be finite, got {value} {unit}")
    if value <= 0:
        raise ValueError(f"{what} must be positive, got {value:g} {unit}")
    return value


def _hz(khz: int) -> float:
    return khz * 1000.0


class Sysfs:
    """Reads and writes RAPL powercap and cpufreq attributes under ``root`` (``/sys``, or a fake tree).

    Parameters
    ----------
    root : path
        The sysfs mount point.
    min_power_w : float
        Lowest power limit :meth:`set_power_limit_w` accepts per package (default 1 W). Sites set a realistic
        floor (e.g. the idle power) so that a bad command cannot starve a node.
    """

    def __init__(self, root: str | os.PathLike = "/sys", *, min_power_w: float = 1.0):
        self.root = Path(root)
        self.min_power_w = min_power_w

    def __repr__(self) -> str:
        return f"Sysfs(root={str(self.root)!r}, min_power_w={self.min_power_w!r})"

    # --- raw file access ---------------------------------------------------------------------------------------
    EMPTY_WAIT_S = 0.1
    """How long a read waits for a file found empty to be written (a fake tree's writer between truncate and
    write, descheduled on a loaded machine); sysfs itself is never empty."""

    def _read(self, path: Path) -> str:
        deadline = time.monotonic() + self.EMPTY_WAIT_S
        while True:
            try:
                with open(path) as f:
                    text = f.read().strip()
            except OSError as exc:
                hint = ""
                if exc.errno in (errno.EACCES, errno.EPERM) and path.name == "energy_uj":
                    hint = " (energy_uj is root-only since Linux 5.10, CVE-2020-8694: run the agent as root)"
                raise SysfsError(path, f"cannot read: {exc.strerror or exc}{hint}") from exc
            if text:
                return text
            if time.monotonic() > deadline:
                raise SysfsError(path, "empty file")
            time.sleep(0.001)

    def _read_int(self, path: Path) -> int:
        text = self._read(path)
        try:
            return int(text)
        except ValueError:
            raise SysfsError(path, f"expected an integer, read {text!r}") from None

    def _write(self, path: Path, value: int | str) -> None:
        # O_WRONLY without O_CREAT: never create a file (sysfs refuses it anyway); O_TRUNC so a fake tree's
        # file holds only the new value (sysfs ignores it).
        try:
            fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
        except OSError as exc:
            raise SysfsError(path, f"cannot open for writing: {exc.strerror or exc}") from exc
        try:
            os.write(fd, f"{value}\n".encode())
        except OSError as exc:
            raise SysfsError(path, f"writing {value!r} failed: {exc.strerror or exc}") from exc
        finally:
            os.close(fd)

    # --- RAPL powercap ---------------------------------------------------------------------------------------------
    def packages(self) -> list[Package]:
        """The RAPL package zones, by index. Empty when the machine has no powercap (no RAPL driver, a VM)."""
        base = self.root / "class" / "powercap"
        try:
            entries = sorted(os.listdir(base))
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise SysfsError(base, f"cannot list: {exc.strerror or exc}") from exc
        found = []
        for entry in entries:
            if not _ZONE.match(entry):
                continue
            path = base / entry
            name = self._read(path / "name")
            m = _PACKAGE_NAME.match(name)
            if m:  # psys and other top-level zones are not packages
                found.append(Package(int(m.group(1)), name, path))
        return sorted(found, key=lambda p: p.index)

    def package(self, pkg: Package | int) -> Package:
        """``pkg`` itself, or the package with that index (``ValueError`` if there is none)."""
        if isinstance(pkg, Package):
            return pkg
        packages = self.packages()
        for p in packages:
            if p.index == pkg:
                return p
        have = ", ".join(str(p.index) for p in packages) or "none"
        raise ValueError(f"no RAPL package {pkg!r} under {self.root / 'class/powercap'} (packages: {have})")

    def constraint(self, pkg: Package | int, name: str = "long_term") -> int:
        """The number X of the constraint named ``name`` (``constraint_X_name``); ``SysfsError`` if absent."""
        p = self.package(pkg)
        names = []
        for x in range(16):
            path = p.path / f"constraint_{x}_name"
            if not path.exists():
                break
            found = self._read(path)
            if found == name:
                return x
            names.append(found)
        raise SysfsError(p.path, f"no constraint named {name!r} (found {names or 'none'})")

    def energy_uj(self, pkg: Package | int) -> int:
        """The package's energy counter in µJ (wraps at :meth:`max_energy_range_uj`)."""
        return self._read_int(self.package(pkg).path / "energy_uj")

    def max_energy_range_uj(self, pkg: Package | int) -> int:
        return self._read_int(self.package(pkg).path / "max_energy_range_uj")

    def power_limit_w(self, pkg: Package | int) -> float:
        """The long-term (PL1) power limit in W."""
        p = self.package(pkg)
        return self._read_int(p.path / f"constraint_{self.constraint(p)}_power_limit_uw") / 1e6

    def max_power_w(self, pkg: Package | int) -> float:
        """The highest long-term limit the package accepts, in W (0 when the driver does not know it)."""
        p = self.package(pkg)
        return self._read_int(p.path / f"constraint_{self.constraint(p)}_max_power_uw") / 1e6

    def check_power_limit_w(self, pkg: Package | int, watts: object) -> int:
        """Validate a long-term limit for ``pkg`` and return it in µW; ``ValueError`` says what is wrong."""
        p = self.package(pkg)
        w = _number("power limit", watts, "W")
        floor = float(self.min_power_w)
        if w < floor:
            raise ValueError(f"power limit {w:g} W for {p.name} is below the minimum {floor:g} W")
        top = self.max_power_w(p)
        if top > 0 and w > top:
            raise ValueError(f"power limit {w:g} W for {p.name} is above its maximum {top:g} W "
                             f"(constraint_{self.constraint(p)}_max_power_uw)")
        return round(w * 1e6)

    def set_power_limit_w(self, pkg: Package | int, watts: object) -> float:
        """Write the long-term limit of ``pkg`` (as integer µW) and return the value read back, in W."""
        p = self.package(pkg)
        uw = self.check_power_limit_w(p, watts)
        path = p.path / f"constraint_{self.constraint(p)}_power_limit_uw"
        self._write(path, uw)
        return self._read_int(path) / 1e6

    # --- cpufreq ---------------------------------------------------------------------------------------------------
    def cpufreq_policies(self) -> list[CpufreqPolicy]:
        """The cpufreq policies in numeric order. Empty when the machine has no cpufreq driver."""
        base = self.root / "devices" / "system" / "cpu" / "cpufreq"
        try:
            entries = os.listdir(base)
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise SysfsError(base, f"cannot list: {exc.strerror or exc}") from exc
        found = [(int(m.group(1)), e) for e in entries if (m := _POLICY.match(e))]
        return [CpufreqPolicy(e, base / e) for _, e in sorted(found)]

    def _policies(self) -> list[CpufreqPolicy]:
        policies = self.cpufreq_policies()
        if not policies:
            raise SysfsError(self.root / "devices/system/cpu/cpufreq", "no cpufreq policies (no cpufreq driver?)")
        return policies

    def _khz(self, policy: CpufreqPolicy, name: str) -> int:
        return self._read_int(policy.path / name)

    def max_freq_hz(self) -> float:
        """Highest hardware frequency of the node (``cpuinfo_max_freq``, highest over policies), in Hz."""
        return _hz(max(self._khz(p, "cpuinfo_max_freq") for p in self._policies()))

    def min_freq_hz(self) -> float:
        """Lowest hardware frequency of the node (``cpuinfo_min_freq``, lowest over policies), in Hz."""
        return _hz(min(self._khz(p, "cpuinfo_min_freq") for p in self._policies()))

    def scaling_max_freq_hz(self) -> float:
        """The node's frequency ceiling: the highest ``scaling_max_freq`` over policies, in Hz."""
        return _hz(max(self._khz(p, "scaling_max_freq") for p in self._policies()))

    def policy_scaling_max_freq_hz(self) -> dict[str, float]:
        """``scaling_max_freq`` of every policy, in Hz."""
        return {p.name: _hz(self._khz(p, "scaling_max_freq")) for p in self._policies()}

    def check_max_freq_hz(self, hz: object) -> dict[CpufreqPolicy, int]:
        """Validate a node frequency ceiling; return the kHz to write into each policy.

        The value must lie in the node's hardware range; each policy gets it clipped to its own
        ``cpuinfo_*`` range (they differ only on heterogeneous CPUs), and it must not fall below a policy's
        ``scaling_min_freq``.
        """
        f = _number("frequency", hz, "Hz")
        khz = round(f / 1000)
        policies = self._policies()
        ranges = {p: (self._khz(p, "cpuinfo_min_freq"), self._khz(p, "cpuinfo_max_freq")) for p in policies}
        lo = min(r[0] for r in ranges.values())
        hi = max(r[1] for r in ranges.values())
        if khz < lo:
            raise ValueError(f"frequency {f:g} Hz is below the hardware minimum {_hz(lo):g} Hz (cpuinfo_min_freq)")
        if khz > hi:
            raise ValueError(f"frequency {f:g} Hz is above the hardware maximum {_hz(hi):g} Hz (cpuinfo_max_freq)")
        plan = {}
        for p, (plo, phi) in ranges.items():
            target = min(max(khz, plo), phi)
            floor = self._khz(p, "scaling_min_freq")
            if target < floor:
                raise ValueError(f"frequency {f:g} Hz is below {p.name}'s scaling_min_freq {_hz(floor):g} Hz "
                                 "(scaling_max_freq must stay at or above it; lower scaling_min_freq first)")
            plan[p] = target
        return plan

    def set_max_freq_hz(self, hz: object) -> float:
        """Write ``hz`` (as kHz) into every policy's ``scaling_max_freq``; return :meth:`scaling_max_freq_hz`.

        Every policy is validated before any is written.
        """
        for policy, khz in self.check_max_freq_hz(hz).items():
            self._write(policy.path / "scaling_max_freq", khz)
        return self.scaling_max_freq_hz()

    def reset_max_freq(self) -> float:
        """Restore every policy's ``scaling_max_freq`` to its ``cpuinfo_max_freq``; return the node ceiling."""
        for policy in self._policies():
            self._write(policy.path / "scaling_max_freq", self._khz(policy, "cpuinfo_max_freq"))
        return self.scaling_max_freq_hz()


def energy_delta_uj(e1_uj: int, e2_uj: int, range_uj: int) -> int:
    """Energy between two readings of a counter that wraps at ``range_uj`` (at most one wrap in between).

    >>> energy_delta_uj(100, 250, 1000)
    150
    >>> energy_delta_uj(900, 100, 1000)
    200
    """
    return (e2_uj - e1_uj) % range_uj


class EnergyMeter:
    """Average package power between successive readings of ``energy_uj``.

    Read at least once per wrap period (``max_energy_range_uj`` / peak power: about 17 minutes for a 262 kJ
    range at 250 W) or a whole wrap is lost.

    Parameters
    ----------
    sysfs : Sysfs
    package : Package or int
    clock : callable
        Seconds, monotonic; injected so tests control time.

    Examples
    --------
    >>> EnergyMeter.power_w(900_000, 10.0, 100_000, 12.0, range_uj=1_000_000)
    0.1
    """

    def __init__(self, sysfs: Sysfs, package: Package | int, clock: Callable[[], float] = time.monotonic):
        self.sysfs = sysfs
        self.package = package
        self.clock = clock
        self._last: tuple[int, float] | None = None
        self._range: int | None = None

    @staticmethod
    def power_w(e1_uj: int, t1_s: float, e2_uj: int, t2_s: float, range_uj: int) -> float:
        """Mean power in W between two readings, one wrap-around allowed."""
        if t2_s <= t1_s:
            raise ValueError(f"readings must be in time order, got t1={t1_s} and t2={t2_s}")
        return energy_delta_uj(e1_uj, e2_uj, range_uj) / 1e6 / (t2_s - t1_s)

    def sample(self) -> float | None:
        """Read the counter; return the mean power since the previous sample, or ``None`` on the first call."""
        if self._range is None:
            self._range = self.sysfs.max_energy_range_uj(self.package)
        now = self.clock()
        energy = self.sysfs.energy_uj(self.package)
        last, self._last = self._last, (energy, now)
        if last is None or now <= last[1]:
            return None
        return self.power_w(last[0], last[1], energy, now, self._range)
