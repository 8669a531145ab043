"""The compiled simulation core: same results as its sources, never used once its source changed."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import wattsched
from wattsched import _native

PACKAGE = Path(wattsched.__file__).resolve().parent
BUNDLED = PACKAGE / "data" / "traces" / "KTH-SP2-1996-2.1-cln-first5000.swf.gz"

needs_compiled = pytest.mark.skipif(
    not _native.compiled_in_use(),
    reason=f"the compiled simulation core is not in use in this install: {sorted(set(_native.status().values()))}",
)


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != _native.ENV_PURE}
    env.update(extra)
    return env


def _simulate(out: Path, env: dict[str, str]) -> None:
    cmd = [sys.executable, "-m", "wattsched", "simulate", "--trace", str(BUNDLED), "--policy", "easy-pc",
           "--cap", "60%", "--predictor", "history", "-q", "--no-report", "--out", str(out)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr


def _version(env: dict[str, str]) -> str:
    proc = subprocess.run([sys.executable, "-m", "wattsched", "--version"], env=env, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@needs_compiled
def test_the_compiled_core_schedules_exactly_as_its_sources(tmp_path):
    assert "compiled simulation core" in _version(_env())
    pure_env = _env(**{_native.ENV_PURE: "1"})
    assert "pure-Python simulation core" in _version(pure_env)
    _simulate(tmp_path / "compiled", _env())
    _simulate(tmp_path / "pure", pure_env)
    for name in ("jobs.csv", "timeline.csv", "workload.csv.gz"):
        compiled = (tmp_path / "compiled" / name).read_bytes()
        assert compiled == (tmp_path / "pure" / name).read_bytes(), name
    assert b"\n" in (tmp_path / "compiled" / "jobs.csv").read_bytes()


def _probe_with_edited_source(tmp_path: Path, source: str, probe: str, lines: int) -> tuple[Path, Path, list[str]]:
    """Run ``probe`` against a copy of the installed package (compiled modules and manifest included) whose
    ``source`` (a path in the package) was edited after the build; the copy, the edited file, the printed lines."""
    copy = tmp_path / "wattsched"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__", "*.c"))
    edited = copy / source
    edited.write_text(edited.read_text() + "\nEDITED_AFTER_THE_BUILD = True\n")
    proc = subprocess.run([sys.executable, "-c", probe], env=_env(PYTHONPATH=str(tmp_path)), cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return copy, edited, proc.stdout.split("\n")[:lines]


@needs_compiled
def test_an_edited_source_is_loaded_instead_of_its_stale_compiled_module(tmp_path):
    probe = (
        "import wattsched.model.plan as plan, wattsched.model.job as job\n"
        "from wattsched import _native\n"
        "print(plan.__file__); print(job.__file__); print(plan.EDITED_AFTER_THE_BUILD)\n"
        "print(_native.status()['wattsched.model.plan']); print(_native.compiled_in_use())\n"
    )
    copy, edited, printed = _probe_with_edited_source(tmp_path, "model/plan.py", probe, 5)
    plan_file, job_file, edited_flag, why, all_compiled = printed
    assert plan_file == str(edited)
    assert job_file.startswith(str(copy / "model" / "job.")) and not job_file.endswith(".py")
    assert edited_flag == "True"
    assert why.startswith("source (changed since it was compiled")
    assert all_compiled == "False"


def test_without_extension_modules_every_module_is_reported_as_source(tmp_path):
    copy = tmp_path / "wattsched"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__", "*.c", "*.so", "*.pyd"))
    probe = ("import wattsched.sim.engine as e\nfrom wattsched import _native\n"
             "print(e.__file__); print(sorted(set(_native.status().values())))\n")
    proc = subprocess.run([sys.executable, "-c", probe], env=_env(PYTHONPATH=str(tmp_path)), cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    engine_file, kinds = proc.stdout.split("\n")[:2]
    assert engine_file == str(copy / "sim" / "engine.py")
    assert kinds == "['not compiled']"


@pytest.mark.skipif(not os.environ.get("WATTSCHED_EXPECT_COMPILED"),
                    reason="WATTSCHED_EXPECT_COMPILED is not set (CI sets it: its machine has a C compiler)")
def test_the_install_compiled_the_simulation_core():
    if not (shutil.which("cc") or shutil.which("gcc")):
        pytest.skip("no C compiler on PATH: the install could only be pure Python")
    assert _native.compiled_in_use(), _native.status()


def test_every_compiled_module_exists_as_source():
    for name in _native.COMPILED:
        assert PACKAGE.parent.joinpath(*name.split(".")).with_suffix(".py").is_file(), name


@needs_compiled
def test_a_module_whose_cimported_dependency_is_stale_is_loaded_from_source_too(tmp_path):
    # the engine's compiled build uses the compiled Rows type: with rows.py edited, both load as source, and run
    probe = (
        "import wattsched.sim.engine as engine, wattsched.sim.rows as rows\n"
        "from wattsched import _native\n"
        "print(engine.__file__); print(rows.__file__); print(_native.status()['wattsched.sim.engine'])\n"
        "from wattsched.model.platform import Platform\nfrom wattsched.policies import make_policy\n"
        "from wattsched.workload.records import TraceJob\n"
        "r = engine.Engine(Platform.homogeneous_cluster(2), [TraceJob(1, 0.0, 5.0, 10.0, 1, 1)],"
        " make_policy('easy')).run()\n"
        "print(r.jobs['end_s'].tolist())\n"
    )
    copy, edited, printed = _probe_with_edited_source(tmp_path, "sim/rows.py", probe, 4)
    engine_file, rows_file, why, ends = printed
    assert engine_file == str(copy / "sim" / "engine.py") and rows_file == str(edited)
    assert why == "source (it uses wattsched.sim.rows, which is not loaded compiled)"
    assert ends == "[5.0]"


def test_every_cimported_dependency_is_compiled_before_its_user():
    for name, needs in _native.CIMPORTS.items():
        assert name in _native.COMPILED
        assert all(dep in _native.COMPILED for dep in needs), needs


def test_a_module_lists_the_dependencies_of_the_compiled_modules_it_uses_and_comes_after_them():
    # install_guard walks CIMPORTS in order: a user must come after its dependencies to see them stale
    order = list(_native.CIMPORTS)
    for name, needs in _native.CIMPORTS.items():
        for dep in needs:
            if dep in _native.CIMPORTS:
                assert order.index(dep) < order.index(name), (dep, name)
                assert set(_native.CIMPORTS[dep]) <= set(needs), (name, dep)


def test_without_cython_installed_the_sources_run_as_pure_python(tmp_path):
    """Cython builds wattsched but need not be installed to run it: the sources fall back to ``wattsched._shadow``,
    the job model is slotted and frozen as pure Python, and a run schedules as the compiled core does."""
    probe = (
        "import sys; sys.modules['cython'] = None\n"  # an import of it raises ImportError
        "import dataclasses\n"
        "from wattsched.model import job\n"
        "from wattsched.policies import easy\n"
        "from wattsched import _shadow\n"
        "assert job.cython is _shadow and easy.cython is _shadow\n"
        "j = job.job_from_fields(*range(23))\n"
        "assert type(j) is job.Job and j == job.Job(*range(23)) and job.Job.__slots__[0] == 'id'\n"
        "try:\n"
        "    j.nodes = 1\n"
        "except dataclasses.FrozenInstanceError:\n"
        "    pass\n"
        "else:\n"
        "    raise AssertionError('a Job can be changed')\n"
        "from wattsched.cli import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    out = tmp_path / "no-cython"
    proc = subprocess.run([sys.executable, "-c", probe, "simulate", "--trace", str(BUNDLED), "--policy", "easy", "-q",
                           "--no-report", "--out", str(out)], env=_env(**{_native.ENV_PURE: "1"}),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    ref = tmp_path / "default"
    proc = subprocess.run([sys.executable, "-m", "wattsched", "simulate", "--trace", str(BUNDLED), "--policy", "easy",
                           "-q", "--no-report", "--out", str(ref)], env=_env(), capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    for name in ("jobs.csv", "timeline.csv"):
        assert (out / name).read_bytes() == (ref / name).read_bytes(), name
