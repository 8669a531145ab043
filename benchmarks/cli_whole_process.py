"""The path users run: `wattsched simulate` as a whole process, with its default outputs and report.

Usage: python benchmarks/cli_whole_process.py [--traces DIR] [--repeat N] [--all] [--no-accasim]
                                              [--accasim-python PATH]

Each case runs `wattsched simulate --trace T --policy easy -q --out DIR` in a
fresh process (report included, as a user runs it) and prints its wall time
and peak memory (max RSS of that process, from getrusage of a per-case
parent). With --repeat N the median wall time of N runs is printed.

AccaSim 1.1.3 (PyPI `accasim`, which needs Python 3.9) runs its textbook
EASY backfilling (`EASYBackfilling` + `FirstFit`) on KTH-SP2 in the same
run, on a 100-node one-core system, writing its schedule as it does by
default. It runs in rounds with wattsched (one AccaSim run, then one
wattsched run, N rounds) and the ratio is of the two medians over the rounds,
so that a machine whose speed drifts during the minutes AccaSim takes weighs
on both sides alike; the ratio of each round is printed too. Each run of a
round starts after a 3 s pause, so that the aftermath of the run before it
does not fall on it. Its interpreter comes from --accasim-python, else
$WATTSCHED_ACCASIM_PYTHON, else `.bench/accasim/bin/python` in the source
tree, which is created (a venv with `accasim==1.1.3 numpy<2.1
matplotlib<3.10`) from a working `python3.9` on PATH or, failing that (a
pyenv shim that names no version fails), pyenv's own `versions/3.9*`.
Without one, the comparison is skipped and the reason printed.

wattsched's bytecode caches are compiled before the first case (`compileall`),
as a user's installation has them (pip compiles them at install time, an
editable install writes them at its first run): an environment with
PYTHONDONTWRITEBYTECODE set would otherwise compile every module in every run.

Targets (2-core machine): RICC-2010-2 easy whole CLI <= 12 s and <= 2 GiB;
KTH-SP2 easy whole CLI >= 15x faster than AccaSim's EASY in the same run.
The exit status is 1 when a target measured in this run is missed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

# Run one command and print its wall time and the peak RSS of its process tree's largest process.
TIMER = r"""
import json, resource, subprocess, sys, time
t0 = time.perf_counter()
rc = subprocess.call(sys.argv[1:], stdout=subprocess.DEVNULL)
wall = time.perf_counter() - t0
print(json.dumps({"rc": rc, "wall_s": wall,
                  "peak_mib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}))
"""

ACCASIM_DRIVER = r"""
import sys
from accasim.base.allocator_class import FirstFit
from accasim.base.scheduler_class import EASYBackfilling
from accasim.base.simulator_class import Simulator

trace, system, out = sys.argv[1:4]
sim = Simulator(trace, system, EASYBackfilling(FirstFit(seed=0), seed=0), RESULTS_FOLDER_PATH=out,
                scheduling_output=True, statistics_output=False, show_statistics=False, pprint_output=False)
sim.start_simulation()
"""

# (trace file, extra simulate options, wall target s, memory target MiB)
CASES = {
    "RICC-2010-2": ("RICC-2010-2.swf.gz", ["--procs", "8192"], 12.0, 2048.0),
    "KTH-SP2-1996-2.1-cln": ("KTH-SP2-1996-2.1-cln.swf", [], None, 2048.0),
}
RATIO_TARGET = 15.0


def timed(cmd: list[str], repeat: int) -> dict:
    runs = []
    for _ in range(repeat):
        out = subprocess.run([sys.executable, "-c", TIMER, *cmd], capture_output=True, text=True, check=True)
        r = json.loads(out.stdout)
        if r["rc"]:
            raise RuntimeError(f"{' '.join(cmd)} exited with {r['rc']}")
        runs.append(r)
    return {"wall_s": statistics.median(r["wall_s"] for r in runs), "peak_mib": max(r["peak_mib"] for r in runs),
            "walls": [r["wall_s"] for r in runs]}


PAUSE_S = 3.0
"""Pause before each run of the AccaSim rounds: a run started right after the other (its output written back,
its memory returned) was measured up to 20 % slower."""


def paused(fn, *args):
    time.sleep(PAUSE_S)
    return fn(*args)


def _runs(python: str) -> bool:
    try:
        out = subprocess.run([python, "-c", "import sys; print(sys.version_info[:2] == (3, 9))"],
                             capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.returncode == 0 and out.stdout.strip() == "True"


def find_python39() -> str | None:
    """A Python 3.9 that runs: on PATH (a pyenv shim may be there and fail), else pyenv's installs."""
    candidates = [shutil.which("python3.9")]
    try:
        root = subprocess.run(["pyenv", "root"], capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        root = ""
    for base in {Path(root) if root else None, Path.home() / ".pyenv"} - {None}:
        candidates += sorted(str(p) for p in base.glob("versions/3.9*/bin/python3.9"))[::-1]
    return next((c for c in candidates if c and _runs(c)), None)


def accasim_python(explicit: str | None) -> tuple[str | None, str]:
    """The interpreter that has AccaSim 1.1.3, or None and the reason."""
    candidate = explicit or os.environ.get("WATTSCHED_ACCASIM_PYTHON")
    if candidate:
        return candidate, "given"
    venv = ROOT / ".bench" / "accasim"
    python = venv / "bin" / "python"
    if python.exists():
        return str(python), "cached venv"
    base = find_python39()
    if base is None:
        return None, ("AccaSim 1.1.3 needs Python 3.9 and no working python3.9 was found on PATH or under "
                      "~/.pyenv/versions (give --accasim-python)")
    print(f"setting up AccaSim 1.1.3 in {venv} (once) ...", file=sys.stderr)
    try:
        subprocess.run([base, "-m", "venv", str(venv)], check=True, capture_output=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", "accasim==1.1.3", "numpy<2.1", "matplotlib<3.10"],
                       check=True, capture_output=True, text=True)
    except subprocess.CalledProcessError as exc:
        shutil.rmtree(venv, ignore_errors=True)
        return None, f"installing AccaSim failed: {(exc.stderr or '').strip().splitlines()[-1:]}"
    return str(python), "new venv"


def compile_bytecode() -> str:
    """Compile wattsched's bytecode caches, as an installed wattsched has them; what was done, as a line."""
    out = subprocess.run(
        [sys.executable, "-c", "import pathlib, wattsched; print(pathlib.Path(wattsched.__file__).parent)"],
        capture_output=True, text=True, check=True)
    package = out.stdout.strip()
    done = subprocess.run([sys.executable, "-m", "compileall", "-q", package], capture_output=True, text=True)
    if done.returncode:
        return f"(bytecode caches of {package} not all compiled: {(done.stdout + done.stderr).strip()[-200:]})"
    return f"(bytecode caches of {package} compiled, as an installation has them)"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--traces", default=str(ROOT.parent / "shared" / "traces"))
    ap.add_argument("--repeat", type=int, default=1, help="runs per case; the median wall time is printed")
    ap.add_argument("--only", help="run cases whose trace name contains this")
    ap.add_argument("--no-accasim", action="store_true", help="skip the AccaSim comparison")
    ap.add_argument("--accasim-python", metavar="PATH", help="Python interpreter that has accasim 1.1.3")
    args = ap.parse_args()
    traces = Path(args.traces)
    wattsched = str(Path(sys.executable).with_name("wattsched"))
    if not Path(wattsched).exists():
        wattsched_cmd = [sys.executable, "-m", "wattsched"]
    else:
        wattsched_cmd = [wattsched]
    print(compile_bytecode())
    missed = []
    results = {}
    commands = {}
    print(f"{'case':34s} {'wall s':>8s} {'peak MiB':>9s}  target")
    with tempfile.TemporaryDirectory(prefix="wattsched-bench-") as tmp:
        for name, (file, extra, wall_target, mem_target) in CASES.items():
            if args.only and args.only not in name:
                continue
            path = traces / file
            if not path.exists():
                print(f"{name + ' easy':34s} skipped: no trace at {path}")
                continue
            cmd = [*wattsched_cmd, "simulate", "--trace", str(path), "--policy", "easy", "-q",
                   "--out", str(Path(tmp) / name), *extra]
            commands[name] = cmd
            r = results[name] = timed(cmd, args.repeat)
            verdict = []
            if wall_target is not None:
                ok = r["wall_s"] <= wall_target
                verdict.append(f"wall <= {wall_target:g} s: {'met' if ok else 'MISSED'}")
                missed += [] if ok else [f"{name} wall"]
            ok = r["peak_mib"] <= mem_target
            verdict.append(f"peak <= {mem_target / 1024:g} GiB: {'met' if ok else 'MISSED'}")
            missed += [] if ok else [f"{name} memory"]
            print(f"{name + ' easy (wattsched)':34s} {r['wall_s']:8.2f} {r['peak_mib']:9.0f}  {'; '.join(verdict)}")

        kth = "KTH-SP2-1996-2.1-cln"
        if kth in results and not args.no_accasim:
            python, why = accasim_python(args.accasim_python)
            if python is None:
                print(f"{'KTH-SP2 EASY (AccaSim 1.1.3)':34s} skipped: {why}")
                print(f"{'KTH-SP2 AccaSim / wattsched':34s} target >= {RATIO_TARGET:g}x: not measured")
            else:
                system = Path(tmp) / "accasim-system.json"
                system.write_text(json.dumps({"groups": {"g0": {"core": 1}}, "resources": {"g0": 100}}))
                driver = Path(tmp) / "accasim_easy.py"
                driver.write_text(ACCASIM_DRIVER)
                acc_cmd = [python, str(driver), str(traces / CASES[kth][0]), str(system),
                           str(Path(tmp) / "accasim-out")]
                # in rounds of one run each, so that both sides of the ratio see the machine in the same state
                rounds = [(paused(timed, acc_cmd, 1), paused(timed, commands[kth], 1)) for _ in range(args.repeat)]
                acc, ours = ([r[i] for r in rounds] for i in (0, 1))
                acc_wall = statistics.median(a["wall_s"] for a in acc)
                ours_wall = statistics.median(w["wall_s"] for w in ours)
                ratio = acc_wall / ours_wall
                ok = ratio >= RATIO_TARGET
                missed += [] if ok else ["KTH ratio"]
                per_round = ", ".join(f"{a['wall_s'] / w['wall_s']:.1f}x" for a, w in rounds)
                print(f"{'KTH-SP2 EASY (AccaSim 1.1.3)':34s} {acc_wall:8.2f} {max(a['peak_mib'] for a in acc):9.0f}")
                print(f"{'KTH-SP2 easy (wattsched), beside':34s} {ours_wall:8.2f} "
                      f"{max(w['peak_mib'] for w in ours):9.0f}")
                print(f"{'KTH-SP2 AccaSim / wattsched':34s} {ratio:8.1f}x {'':9s}  "
                      f">= {RATIO_TARGET:g}x: {'met' if ok else 'MISSED'} (per round: {per_round})")
    load = os.getloadavg()[0]
    print(f"(load average {load:.1f} on {os.cpu_count()} cores while measuring)")
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
