"""Invalid config values derived from the config schemas, through the real commands.

For every field of the config models (SimConfig, DaemonConfig, the platform
models, and the fields of their nested blocks) a value is drawn that the
field's own annotation and constraints exclude (read from ``model_fields``):
a value beyond a declared bound, or of a type no member of the annotation
takes. The value is written into an otherwise valid config file and the real
command runs on it, in-process through :func:`wattsched.cli.main`:
``wattsched check-config FILE`` for every kind, ``wattsched simulate --config
FILE`` for simulation configs. Each must end with exit status 2, an error that
names the file and the key, and no traceback.
"""

from __future__ import annotations

import gzip
import math
import tempfile
import types
import typing
from importlib.resources import files
from pathlib import Path

import annotated_types as at
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from wattsched.cli import main
from wattsched.config import SimConfig
from wattsched.config.daemon import DaemonConfig
from wattsched.config.platform import PlatformConfig

BUNDLED = files("wattsched") / "data" / "traces" / "KTH-SP2-1996-2.1-cln-first5000.swf.gz"
PER_FIELD = settings(max_examples=5, deadline=None, derandomize=True,
                     suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
"""Examples per field: every field of every model is broken in every run of the suite (134 fields)."""
MAPPING = {"unexpected": [1, 2]}
"""A value of a type that no scalar, list or tuple field takes."""


# --------------------------------------------------------------------------- invalid values from a field


def _members(annotation) -> list:
    """The non-None members of an annotation, ``Annotated`` and ``Optional`` unwrapped."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _members(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        return [m for a in typing.get_args(annotation) for m in _members(a)]
    return [] if annotation is type(None) else [annotation]


def _kind(member) -> str:
    origin = typing.get_origin(member) or member
    if origin is typing.Literal:
        return "literal"
    if isinstance(origin, type) and issubclass(origin, BaseModel):
        return "model"
    if origin in (list, tuple, set, frozenset):
        return "list"
    if origin is dict:
        return "dict"
    if origin is bool:
        return "bool"
    if origin in (int, float):
        return "number"
    if origin in (str, Path):
        return "text"
    return "any"


def _beyond_bounds(info: FieldInfo, kinds: set[str]) -> list[st.SearchStrategy]:
    """Values just past each declared bound (numbers) or length (texts, lists)."""
    out = []
    integer = any(m is int for m in _members(info.annotation)) and "number" in kinds
    num = (lambda **kw: st.integers(**kw)) if integer else (
        lambda **kw: st.floats(allow_nan=False, allow_infinity=False, **kw))
    for m in info.metadata:
        if isinstance(m, at.Gt):
            out.append(num(max_value=m.gt, min_value=m.gt - 1e6))
        elif isinstance(m, at.Ge):
            out.append(num(max_value=m.ge - 1 if integer else math.nextafter(m.ge, -math.inf), min_value=m.ge - 1e6)
                       .filter(lambda v, m=m: v < m.ge))
        elif isinstance(m, at.Lt):
            out.append(num(min_value=m.lt, max_value=m.lt + 1e12))
        elif isinstance(m, at.Le):
            out.append(num(min_value=m.le + 1 if integer else math.nextafter(m.le, math.inf),
                           max_value=m.le + 1e12))
        elif isinstance(m, at.MinLen) and m.min_length >= 1:
            out.append(st.just("" if "text" in kinds else []))
    return out


def invalid_values(info: FieldInfo) -> st.SearchStrategy:
    """Values the field's annotation and constraints exclude: out of its bounds, or of a type it does not take."""
    members = _members(info.annotation)
    kinds = {_kind(m) for m in members}
    choices = _beyond_bounds(info, kinds)
    if kinds <= {"number"}:
        choices.append(st.sampled_from(["twelve", "1e3 W", "", "[1]"]))
    if kinds <= {"number", "text", "bool", "literal", "list"}:  # a mapping is none of these
        choices.append(st.just(MAPPING))
    if kinds <= {"dict", "model"}:
        choices.append(st.sampled_from([[1, 2], 7, "a string"]))
    if kinds == {"bool"}:
        choices.append(st.sampled_from(["maybe", 2, 0.5]))
    if kinds == {"literal"}:
        allowed = {a for m in members for a in typing.get_args(m)}
        choices.append(st.text(min_size=1, max_size=12).filter(lambda s: s not in allowed))
    if kinds == {"number"} and any(m is int for m in members):
        choices.append(st.sampled_from([1.5, -0.25]))
    return st.one_of(choices) if choices else st.nothing()


def fields(model: type[BaseModel], base: dict, prefix: tuple = ()) -> list[tuple[tuple, FieldInfo]]:
    """Every field of ``model`` with a key path, nested blocks included where ``base`` holds them or they have no
    required field (a value of a block that would also miss required keys would report those too)."""
    out = []
    for name, info in model.model_fields.items():
        out.append(((*prefix, name), info))
        members = _members(info.annotation)
        if len(members) == 1 and _kind(members[0]) == "model":
            sub = members[0]
            present = isinstance(base.get(name), dict)
            if present or not any(f.is_required() for f in sub.model_fields.values()):
                out += fields(sub, base.get(name) if present else {}, (*prefix, name))
        elif len(members) == 1 and typing.get_origin(members[0]) is list and isinstance(base.get(name), list):
            (item,) = typing.get_args(members[0])
            if _kind(item) == "model" and base[name] and isinstance(base[name][0], dict):
                out += fields(item, base[name][0], (*prefix, name, 0))
    return [(path, info) for path, info in out if invalid_values(info) is not st.nothing()]


def with_value(base: dict, path: tuple, value) -> dict:
    doc = yaml.safe_load(yaml.safe_dump(base))
    node = doc
    for key in path[:-1]:
        node = node.setdefault(key, {}) if isinstance(key, str) else node[key]
    node[path[-1]] = value
    return doc


def key_text(path: tuple) -> str:
    """``node_groups[0].power.idle_w``: how an error line names the key."""
    out = ""
    for key in path:
        out += f"[{key}]" if isinstance(key, int) else (f".{key}" if out else key)
    return out


# --------------------------------------------------------------------------- the commands


def refused(argv: list[str], capsys, config: Path, path: tuple) -> None:
    rc = main(argv)
    err = capsys.readouterr().err
    assert rc == 2, (argv, rc, err)
    assert "Traceback" not in err, err
    first = next(line for line in err.splitlines() if line.startswith("wattsched: error:"))
    assert config.name in first, (config.name, err)
    key = key_text(path)
    # the key, or (a block given a scalar) the block, is named on an error line
    assert key in err or (key_text(path[:-1]) + ":" in err and len(path) > 1), (key, err)


@pytest.fixture(scope="module")
def workdir():
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        lines = gzip.decompress(BUNDLED.read_bytes()).decode().splitlines()
        header = [x for x in lines if x.startswith(";")]
        jobs = [x for x in lines if not x.startswith(";")][:50]
        (d / "t.swf").write_text("\n".join(header + jobs) + "\n")
        yield d


def sim_base(d: Path) -> dict:
    return {"kind": "simulation", "trace": str(d / "t.swf"), "cap_schedule": [{"start_s": 0, "cap_w": 20000}],
            "energy_budgets": [{"start_s": 0, "end_s": 86400, "energy_j": 1e12}],
            "demand_response": [{"start_s": 100, "end_s": 900, "cap_w": "45%"}]}


def daemon_base(d: Path) -> dict:
    return {"kind": "daemon", "slurm": {"backend": "sim"}, "state_dir": str(d / "st"), "metrics": {"port": 0},
            "cap_schedule": [{"start_s": 0, "cap_w": 20000}],
            "demand_response": {"events": [{"start_s": 100, "end_s": 900, "cap_w": "45%"}]}}


def platform_base(_d: Path) -> dict:
    return {"kind": "platform", "name": "p",
            "node_groups": [{"name": "a", "count": 4, "power": {"idle_w": 100, "busy_w": 200}}]}


SIM_FIELDS = fields(SimConfig, sim_base(Path("/")))
DAEMON_FIELDS = fields(DaemonConfig, daemon_base(Path("/")))
PLATFORM_FIELDS = fields(PlatformConfig, platform_base(Path("/")))


@pytest.mark.parametrize("base", [sim_base, daemon_base, platform_base])
def test_the_configs_broken_below_are_valid(base, workdir, capsys):
    config = workdir / f"{base.__name__}.yaml"
    config.write_text(yaml.safe_dump(base(workdir)))
    assert main(["check-config", str(config)]) == 0, capsys.readouterr().err


def test_every_config_model_has_fields_to_break():
    for found in (SIM_FIELDS, DAEMON_FIELDS, PLATFORM_FIELDS):
        assert len(found) >= 10
    assert (("node_groups", 0, "power", "idle_w") in {p for p, _ in PLATFORM_FIELDS})
    assert (("slurm", "timeout_s") in {p for p, _ in DAEMON_FIELDS})


def _ids(found):
    return [key_text(path) for path, _ in found]


@pytest.mark.parametrize(("path", "info"), SIM_FIELDS, ids=_ids(SIM_FIELDS))
def test_simulation_config_invalid_values(path, info, workdir, capsys):
    @PER_FIELD
    @given(value=invalid_values(info))
    def check(value):
        config = workdir / "sim.yaml"
        config.write_text(yaml.safe_dump(with_value(sim_base(workdir), path, value)))
        refused(["check-config", str(config)], capsys, config, path)
        if path == ("out",):  # --out below takes its place (the command line over the file)
            return
        refused(["simulate", "--config", str(config), "--out", str(workdir / "r"), "-q", "--no-report"], capsys,
                config, path)
        assert not (workdir / "r").exists()

    check()


@pytest.mark.parametrize(("path", "info"), DAEMON_FIELDS, ids=_ids(DAEMON_FIELDS))
def test_daemon_config_invalid_values(path, info, workdir, capsys):
    @PER_FIELD
    @given(value=invalid_values(info))
    def check(value):
        config = workdir / "d.yaml"
        config.write_text(yaml.safe_dump(with_value(daemon_base(workdir), path, value)))
        refused(["check-config", str(config)], capsys, config, path)

    check()


@pytest.mark.parametrize(("path", "info"), PLATFORM_FIELDS, ids=_ids(PLATFORM_FIELDS))
def test_platform_config_invalid_values(path, info, workdir, capsys):
    @PER_FIELD
    @given(value=invalid_values(info))
    def check(value):
        config = workdir / "plat.yaml"
        config.write_text(yaml.safe_dump(with_value(platform_base(workdir), path, value)))
        refused(["check-config", str(config)], capsys, config, path)

    check()
