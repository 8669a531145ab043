"""The sweep's Dask cluster speaks TLS with client certificates: a client without them cannot submit code."""

from __future__ import annotations

import gc
import socket
import ssl

import pytest

distributed = pytest.importorskip("distributed")

from wattsched.sweep.execute import make_cluster  # noqa: E402
from wattsched.sweep.spec import ClusterConfig  # noqa: E402


def test_the_local_cluster_runs_code_for_its_client_only(tmp_path):
    client, cluster = make_cluster(ClusterConfig(workers=1), log_dir=tmp_path / "logs")
    try:
        address = cluster.scheduler_address
        assert address.startswith("tls://127.0.0.1:")
        assert client.submit(sum, [20, 22]).result(timeout=60) == 42  # the campaign's own client works
        host, port = address.removeprefix("tls://").rsplit(":", 1)
        # a plain Dask client, as anyone on the host could start one: no connection without the credentials
        for attempt in (address, f"tcp://{host}:{port}"):
            with pytest.raises((OSError, TimeoutError, TypeError, ValueError)), \
                    distributed.Client(attempt, timeout="3s") as intruder:
                intruder.submit(sum, [1]).result(timeout=5)
            # The refused client is finalised here: left to the garbage collector, its __del__ may run in the
            # next client's starting IO-loop thread and wait there for its own loop to stop (a distributed quirk)
            gc.collect()
        # nor with TLS but no client certificate: the scheduler requires one (mutual TLS)
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        with socket.create_connection((host, int(port)), timeout=5) as raw, \
                pytest.raises((ssl.SSLError, ConnectionError)), context.wrap_socket(raw) as tls:
            tls.sendall(b"\0" * 8)
            if not tls.recv(1):  # a TLS 1.3 server reports the missing certificate on first read
                raise ConnectionError("closed without a certificate")
    finally:
        client.close()
        cluster.close()


def test_slurm_workers_get_the_campaigns_certificate_through_shared_files(tmp_path, monkeypatch):
    """SLURMCluster: the scheduler speaks TLS and each worker job is told where the key pair is (no job submitted)."""
    import stat

    dask_jobqueue = pytest.importorskip("dask_jobqueue")

    class NoSubmit(dask_jobqueue.SLURMCluster):
        def scale(self, *args, **kwargs):  # this machine's Slurm is not for this test
            pass

    monkeypatch.setattr(dask_jobqueue, "SLURMCluster", NoSubmit)
    logs = tmp_path / "logs"
    client, cluster = make_cluster(ClusterConfig(kind="slurm", scheduler_host="127.0.0.1"), log_dir=logs)
    try:
        assert cluster.scheduler_address.startswith("tls://127.0.0.1:")
        script = cluster.job_script()
        assert "--protocol tls://" in script or "tls://127.0.0.1" in script
        for option in ("--tls-ca-file", "--tls-cert", "--tls-key"):
            assert option in script
        dumped = list(logs.glob(".dask-jobqueue.worker.*"))
        assert dumped and all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in dumped)
    finally:
        client.close()
        cluster.close()
