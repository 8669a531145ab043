"""``wattsched agent``: run the node agent until SIGTERM (or SIGINT)."""

from __future__ import annotations

import argparse
import logging
import pwd
import signal
import socket
import threading

from wattsched.cliargs import finite_float, int_in, positive_int
from wattsched.errors import ConfigError, OptionError

log = logging.getLogger("wattsched.agent")


def _uid(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a numeric UID, got {text!r} (use --slurm-user for names)") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a UID >= 0, got {value}")
    return value


def allowed_uids(allow: list[int], slurm_user: str | None) -> set[int]:
    """Root, the ``--allow-uid`` values and the SlurmUser's UID.

    Without ``--slurm-user`` the user ``slurm`` is added when it exists (Debian's slurm packages create it).
    """
    uids = {0, *allow}
    name = slurm_user or "slurm"
    try:
        uids.add(pwd.getpwnam(name).pw_uid)
    except KeyError:
        if slurm_user is not None:
            raise ConfigError(f"--slurm-user {slurm_user}: no such user (give the SlurmUser of slurm.conf, "
                              "or --allow-uid UID)") from None
        log.info("no user 'slurm' on this node; allowing uids %s", sorted(uids))
    return uids


def node_name(given: str | None) -> str:
    """The name the agent answers to: ``--node-name``, else this host's short name (Slurm's default NodeName)."""
    name = given or socket.gethostname().split(".", 1)[0]
    if not name or any(c.isspace() for c in name):
        raise OptionError("--node-name", f"must be the node's Slurm NodeName, got {name!r}")
    return name


def cmd_agent(args: argparse.Namespace) -> int:
    from wattsched.agent.auth import Verifier
    from wattsched.agent.server import AgentServer
    from wattsched.agent.sysfs import Sysfs

    if getattr(args, "verbose", 0) == 0:
        logging.getLogger("wattsched").setLevel(logging.INFO)
    if not args.min_power > 0 or args.min_power == float("inf"):
        raise OptionError("--min-power", f"must be a positive number of watts, got {args.min_power:g}")
    sysfs = Sysfs(args.sysfs_root, min_power_w=args.min_power)
    packages, policies = sysfs.packages(), sysfs.cpufreq_policies()
    if not packages:
        log.warning("no RAPL packages under %s/class/powercap: caps will be refused", args.sysfs_root)
    if not policies:
        log.warning("no cpufreq policies under %s/devices/system/cpu/cpufreq: frequency commands will be refused",
                    args.sysfs_root)
    uids = allowed_uids(args.allow_uid, args.slurm_user)
    verifier = Verifier(uids, socket=args.munge_socket, ttl_s=args.ttl, node=node_name(args.node_name))
    try:
        server = AgentServer(sysfs, verifier, address=args.address, port=args.port, timeout_s=args.timeout_s,
                             energy_period_s=max(0.01, args.energy_period_s),
                             max_connections=args.max_connections, max_per_peer=args.max_per_peer)
    except OSError as exc:
        raise ConfigError(f"cannot listen on {args.address}:{args.port}: {exc.strerror or exc} "
                          "(is another agent running? use --port)") from exc

    stop = threading.Event()

    def request_stop(signum, _frame):
        log.info("signal %s: stopping", signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    thread = server.start()
    log.info("wattsched agent of node %s on %s: sysfs %s (%d RAPL packages, %d cpufreq policies), munge socket %s, "
             "allowed uids %s", verifier.node, server.url, args.sysfs_root, len(packages), len(policies),
             args.munge_socket or "default", sorted(uids))
    try:
        while not stop.wait(1.0):
            if not thread.is_alive():
                log.error("the HTTP server thread died")
                return 1
    finally:
        server.shutdown()
    return 0


def add_commands(sub) -> None:
    """Add ``agent`` to an argparse subparsers object."""
    p = sub.add_parser(
        "agent", help="run the node agent: RAPL and cpufreq through sysfs, /metrics, munge-authenticated commands",
        description="Serve GET /metrics and /v1/state, and POST /v1/cap {\"watts\": W} (a node cap split evenly "
        "across packages, or {\"watts\": W, \"package\": i}) and /v1/freq {\"hz\": F} (null restores the hardware "
        "maximum). Commands need a munge credential from root or the SlurmUser. Runs until SIGTERM.",
    )
    p.add_argument("--sysfs-root", default="/sys", metavar="DIR", help="sysfs mount point (default /sys)")
    p.add_argument("--address", default="127.0.0.1",
                   help="address to listen on (default 127.0.0.1, this host only; give the node's management-network "
                   "address, or 0.0.0.0 for every interface, so the daemon can reach the agent)")
    p.add_argument("--port", type=int_in(0, 65535, "a port number"), default=9818,
                   help="port to listen on (default 9818)")
    p.add_argument("--node-name", metavar="NAME",
                   help="this node's Slurm NodeName: commands signed for another node are refused, and answers are "
                   "signed with it (default: the short hostname)")
    p.add_argument("--timeout", type=finite_float(), default=10.0, metavar="S", dest="timeout_s",
                   help="a request (head and body) must arrive within S seconds in total (default 10)")
    p.add_argument("--max-connections", type=positive_int, default=16, metavar="N",
                   help="requests served at once; more are answered 503 (default 16)")
    p.add_argument("--max-per-peer", type=positive_int, default=4, metavar="N",
                   help="requests served at once for one client address; more are answered 503 (default 4)")
    p.add_argument("--munge-socket", metavar="PATH", help="munged's socket (default: munge's default)")
    p.add_argument("--allow-uid", type=_uid, action="append", default=[], metavar="UID",
                   help="also accept commands from this UID (repeatable; root is always allowed)")
    p.add_argument("--slurm-user", metavar="NAME",
                   help="the SlurmUser of slurm.conf, whose commands are accepted (default: slurm, if it exists)")
    p.add_argument("--min-power", type=float, default=1.0, metavar="W",
                   help="lowest per-package power limit accepted (default 1 W)")
    p.add_argument("--ttl", type=float, default=300.0, metavar="S", help="maximum credential age (default 300 s)")
    p.add_argument("--energy-period", type=finite_float(), default=1.0, metavar="S", dest="energy_period_s",
                   help="RAPL energy is read from sysfs at most once per S seconds and served in whole joules "
                        "(default 1 s); a daemon polling every few seconds through the agents wants 0.1")
    p.set_defaults(func=cmd_agent)
