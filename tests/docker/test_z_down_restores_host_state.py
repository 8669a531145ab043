"""Last of the docker tests (files run in name order): `deploy/docker/down` leaves the host as `up` found it.

The namespace test cluster (tests/integration, run after these) needs the host's
firewall, forwarding and mounts untouched by dockerd.
"""

from __future__ import annotations

import os

import pytest

from .conftest import host_state

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_down_removes_everything_and_restores_firewall_sysctl_and_mounts(docker_session):
    c = docker_session
    if c.host_before is None:
        pytest.skip("the cluster was kept from an earlier session (WATTSCHED_DOCKER_KEEP): its state before up "
                    "is unknown here")
    pid = int((c.dir / "dockerd.pid").read_text())
    c.down()
    after = host_state()
    for key, value in c.host_before.items():
        assert after[key] == value, f"{key} differs after down"
    assert not c.dir.exists(), "down leaves nothing of the docker dir"
    assert not os.path.exists(f"/proc/{pid}"), "dockerd is gone"
    c.down()  # idempotent: a second down has nothing to do
    assert host_state() == c.host_before
