"""The simulator's per-job constructors build exactly what the dataclasses' own constructors build."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from wattsched.model.job import Job, RunningJob, Unit, job_from_fields, running_job_from_fields


@pytest.mark.parametrize(("cls", "build"), [(Job, job_from_fields), (RunningJob, running_job_from_fields)])
def test_builders_take_every_field_in_order(cls, build):
    assert list(inspect.signature(build).parameters) == [f.name for f in dataclasses.fields(cls)]


def test_built_jobs_equal_constructed_ones_and_stay_frozen():
    values = (7, 1.5, 60.0, 2, "u", "g", "a", "p", "q", 16, 8, 1, 1024, 1, 4, True, False, 3.0, "cpu", ("x",),
              (Unit(4, 1, 0, 2048), Unit(2)), True, "lulesh")
    job = job_from_fields(*values)
    assert type(job) is Job
    assert job == Job(*values) and hash(job) == hash(Job(*values))
    assert tuple(getattr(job, f.name) for f in dataclasses.fields(Job)) == values
    with pytest.raises(AttributeError):  # FrozenInstanceError as pure Python; compiled, a read-only C field
        job.nodes = 3
    running = running_job_from_fields(job, 10.0, (0, 1), 70.0, 500.0, 0.5, 2.0e9, 250.0, 4.0, 12.0)
    assert type(running) is RunningJob
    assert running == RunningJob(job, 10.0, (0, 1), 70.0, 500.0, 0.5, 2.0e9, 250.0, 4.0, 12.0)
    assert running.progress(14.0) == pytest.approx((4.0 + 2.0 * 0.5) / 60.0)
    with pytest.raises(AttributeError):
        running.speed = 1.0
    assert dataclasses.replace(job, nodes=3).nodes == 3


def test_start_nodes_is_a_plain_start():
    from wattsched.model.plan import Start, start_nodes

    built = start_nodes(4, (3, 2))
    assert type(built) is Start and built == Start(4, (3, 2)) and hash(built) == hash(Start(4, (3, 2)))
    assert built.freq_hz is None and built.cap_w is None
    with pytest.raises(AttributeError):  # FrozenInstanceError as pure Python; compiled, a read-only C field
        built.nodes = (1,)


def test_trace_job_init_covers_every_field_in_order():
    from wattsched.workload.records import TraceJob

    names = [f.name for f in dataclasses.fields(TraceJob)]
    values = tuple({"field": i} if name == "extra" else f"value {i}" for i, name in enumerate(names))
    positional = TraceJob(*values)
    assert tuple(getattr(positional, name) for name in names) == values
    assert TraceJob(**dict(zip(names, values))) == positional
    job = TraceJob(3, 1.0, 5.0, 10.0, 4, 1)
    assert job.extra == {} and job.extra is not TraceJob(3, 1.0, 5.0, 10.0, 4, 1).extra
    assert job.mean_w is None and job.status == 1 and job.app_class == ""
    assert dataclasses.replace(job, mean_w=200.0).mean_w == 200.0


def test_power_estimate_builder_is_a_plain_estimate():
    from wattsched.model.job import PowerEstimate, power_estimate

    built = power_estimate(300.0, 350.0, 20.0)
    assert type(built) is PowerEstimate and built == PowerEstimate(300.0, 350.0, 20.0)
    assert hash(built) == hash(PowerEstimate(300.0, 350.0, 20.0)) and built.total_mean_w(4) == 1200.0
    with pytest.raises(dataclasses.FrozenInstanceError):
        built.mean_w = 1.0


def test_the_engine_builds_completed_jobs_like_the_dataclass():
    from wattsched.predictors.base import CompletedJob, completed_job_builder

    build = completed_job_builder()
    assert list(inspect.signature(build).parameters) == [f.name for f in dataclasses.fields(CompletedJob)]
    job = Job(3, 0.0, 60.0, 2)
    done = build(job, 5.0, 50.0, 210.0, 280.0, 12.5)
    assert type(done) is CompletedJob and done == CompletedJob(job, 5.0, 50.0, 210.0, 280.0, 12.5)
    assert hash(done) == hash(CompletedJob(job, 5.0, 50.0, 210.0, 280.0, 12.5))
    with pytest.raises(dataclasses.FrozenInstanceError):
        done.mean_w = 1.0
