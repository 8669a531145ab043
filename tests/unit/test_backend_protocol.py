"""Every Slurm backend declares what the daemon asks of it (``SlurmBackend``): commands, name and clock.

The daemon reads a backend's name and clock directly (status, metrics' wall-clock timestamps); a backend
missing one would fail the first cycle, so each is checked here against the protocol's own member list.
"""

import inspect

import pytest

from wattsched.daemon.simcluster import SimCluster
from wattsched.daemon.slurm.backend import SlurmBackend, WallClock
from wattsched.daemon.slurm.cli import SlurmCLI
from wattsched.daemon.slurm.pyslurm_backend import PyslurmBackend
from wattsched.daemon.slurm.rest import SlurmREST
from wattsched.model.platform import Platform

MEMBERS = sorted({name for name, _ in inspect.getmembers(SlurmBackend) if not name.startswith("_")}
                 | set(SlurmBackend.__annotations__))


def test_the_protocol_names_the_commands_the_name_and_the_clock():
    assert {"read_state", "hold", "release", "requeue", "cancel", "power_down", "power_up", "name", "speedup",
            "wall_time_of"} <= set(MEMBERS)


@pytest.mark.parametrize("backend", [SlurmCLI, SlurmREST, PyslurmBackend, SimCluster])
def test_each_backend_has_every_member_of_the_protocol(backend):
    missing = [m for m in MEMBERS if not hasattr(backend, m) and m not in getattr(backend, "__annotations__", {})]
    assert missing == []
    assert isinstance(backend.name, str) and backend.name


@pytest.mark.parametrize("backend", [SlurmCLI, SlurmREST, PyslurmBackend])
def test_a_real_slurm_runs_on_the_wall_clock(backend):
    assert issubclass(backend, WallClock)
    assert backend.speedup == 1.0 and backend.wall_time_of(object.__new__(backend), 1.7e9) == 1.7e9


def test_the_simulated_cluster_runs_ahead_of_the_wall_clock():
    sim = SimCluster([], Platform.homogeneous_cluster(2), speedup=600.0, epoch_s=1000.0)
    assert sim.speedup == 600.0
    assert sim.wall_time_of(1000.0 + 600.0) == pytest.approx(1001.0)
