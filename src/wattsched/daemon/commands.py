"""The daemon's commands: ``wattsched daemon``, ``status``, ``audit`` and ``release``."""

from __future__ import annotations

import argparse
import datetime as dt
import logging
import os
import time
from pathlib import Path

from wattsched.cliargs import finite_float, positive_int
from wattsched.daemon.clock import local_time
from wattsched.errors import ConfigError, OptionError, describe

AUDIT_ACTIONS = ("hold", "start", "started", "release", "requeue", "cancel", "power_down", "power_up", "set_cap",
                 "set_freq", "plan", "dr_event", "dr_opt", "dr_report", "dr_vtn", "dr_verify")
"""Actions the daemon writes into its audit log (``wattsched audit --action``)."""

log = logging.getLogger("wattsched.daemon")


CLI_OPTIONS = {"dry_run": "--dry-run", "state_dir": "--state-dir", "poll_interval_s": "--poll-interval",
               "shadow": "--shadow"}
"""Config keys the daemon commands take from the command line, and their options."""

DEMO = {"policy": "easy-pc", "predictor": "history", "cap_w": "60%", "poll_interval_s": 1.0,
        "state_dir": "runs/daemon-sim"}
"""The embedded demo of ``--backend sim`` without a config: EASY+PC under a cap, one cycle a second."""


def load_daemon_config(args: argparse.Namespace, environ=None):
    """The daemon config of a command: file (if any), then ``WATTSCHED_*`` environment, then options.

    Precedence is the config layers' (``wattsched.config``): command line over
    environment over file over defaults, with or without ``--config``. An
    invalid option value is reported against the option, e.g.
    ``--poll-interval: Input should be greater than 0, got -3``.
    """
    from wattsched.config import load_config, merge_overrides
    from wattsched.config.daemon import DaemonConfig, sim_speed, with_sim_telemetry

    env = os.environ if environ is None else environ
    cli = {}
    if getattr(args, "dry_run", False):
        cli["dry_run"] = True
    if getattr(args, "shadow", False):
        cli["shadow"] = cli["dry_run"] = True
    if getattr(args, "state_dir", None):
        cli["state_dir"] = args.state_dir
    if getattr(args, "poll_interval", None) is not None:
        cli["poll_interval_s"] = args.poll_interval
    backend = getattr(args, "backend", None)
    try:
        if args.config is None:
            base = {"kind": "daemon", **(DEMO if backend == "sim" else {})}
            config = merge_overrides(DaemonConfig.model_validate(base), cli, env=env)
        else:
            config = load_config(args.config, DaemonConfig, cli=cli, env=env)
    except ConfigError as exc:
        raise _against_options(exc) from None
    if backend:
        config = config.model_copy(update={"slurm": config.slurm.model_copy(update={"backend": backend})})
        config = with_sim_telemetry(config)  # the simulated cluster reports node power: export it
    speed = getattr(args, "speed", None)
    if speed is not None:
        if config.slurm.backend != "sim":
            raise OptionError("--speed", f"the speed of the simulated cluster; the backend is "
                              f"{config.slurm.backend!r} (add --backend sim)")
        config = config.model_copy(update={"sim": config.sim.model_copy(update={"speedup": speed})})
        sim_speed(config, source="--speed")
    return config, None if args.config is None else Path(args.config)


def _against_options(exc: ConfigError) -> ConfigError:
    """``command line: poll_interval_s: msg`` becomes ``--poll-interval: msg``."""
    lines = []
    for line in str(exc).splitlines():
        for key, option in CLI_OPTIONS.items():
            prefix = f"command line: {key}: "
            if line.lstrip().startswith(prefix):
                line = line.replace(prefix, f"{option}: ", 1)
        lines.append(line)
    return ConfigError("\n".join(lines))


def make_backend(config):
    kind = config.slurm.backend
    if kind == "cli":
        from wattsched.daemon.slurm.cli import SlurmCLI

        s = config.slurm
        return SlurmCLI(conf=s.conf, bin_dir=s.bin_dir, output=s.output, timeout_s=s.timeout_s, retries=s.retries,
                        retry_backoff_s=s.retry_backoff_s)
    if kind == "pyslurm":
        from wattsched.daemon.slurm.pyslurm_backend import PyslurmBackend

        return PyslurmBackend(conf=config.slurm.conf)
    if kind == "rest":
        from wattsched.daemon.slurm.rest import SlurmREST

        s = config.slurm
        return SlurmREST(s.url, s.token_file, user=s.user, api_version=s.api_version, timeout_s=s.timeout_s,
                         retries=s.retries, retry_backoff_s=s.retry_backoff_s, full_read_every=s.full_read_every)
    from wattsched.config.daemon import sim_speed
    from wattsched.daemon.simcluster import SimCluster

    return SimCluster.from_config(config.sim, speed=sim_speed(config))


def cmd_daemon(args: argparse.Namespace) -> int:
    config, path = load_daemon_config(args)
    if args.verbose == 0:
        logging.getLogger("wattsched").setLevel(logging.INFO)
    if not config.dry_run:
        from wattsched.daemon.files import ensure_dir

        # refuse at start, not only cycle by cycle, a heartbeat directory other users could change
        ensure_dir(config.heartbeat_path.parent, 0o755, what="heartbeat directory")
    lock = lock_state_dir(Path(config.state_dir))
    try:
        return _run_daemon(args, config, path)
    finally:
        os.close(lock)


def _run_daemon(args: argparse.Namespace, config, path) -> int:
    from wattsched.daemon.loop import Daemon
    from wattsched.daemon.metrics import serve

    backend = make_backend(config)
    daemon = Daemon(config, backend)
    daemon.config_path = path
    daemon.install_signal_handlers()
    server = None
    if config.metrics.port:
        try:
            server = serve(daemon.metrics, config.metrics.address, config.metrics.port)
        except OSError as exc:
            daemon.store.close()
            raise ConfigError(f"metrics: cannot listen on {config.metrics.address}:{config.metrics.port}: "
                              f"{exc.strerror or exc} (set metrics.port, or 0 for no endpoint)") from exc
        log.info("metrics on http://%s:%d/metrics", config.metrics.address, config.metrics.port)
    mode = "SHADOW (dry-run, recording)" if config.shadow else "DRY-RUN" if config.dry_run else "gate " + config.gate
    if config.shadow_record and not config.shadow:
        mode += ", recording"
    log.info("wattsched daemon: policy %s, backend %s, %s, state %s, every %g s", config.policy,
             config.slurm.backend, mode, config.state_dir, config.poll_interval_s)
    if config.slurm.backend == "sim":
        speed = backend.speedup
        log.info("simulated cluster at %g simulated seconds per real second (--speed); its clock starts at %s%s",
                 speed, local_time(backend.epoch_s),
                 "" if speed == 1 else ", and the times in its audit and status run ahead of the wall clock")
    try:
        status = daemon.run(max_cycles=args.cycles)
        if args.show_metrics:
            from prometheus_client import generate_latest

            text = generate_latest(daemon.metrics.registry).decode()
            print("\n".join(line for line in text.splitlines() if line.startswith("wattsched_")
                            and "_created" not in line and "_bucket" not in line))
        return status
    finally:
        if server is not None:
            server.shutdown()
        daemon.store.close()


LOCK_FILE = "daemon.lock"
"""The file in the state directory that one running daemon holds an exclusive ``flock`` on, with its pid."""


def lock_state_dir(state_dir: Path) -> int:
    """Take the state directory for this daemon: an exclusive ``flock`` on its lock file, which names our pid.

    Two daemons on one state directory would interleave their cycles and audit
    rows and both act on the same jobs; the second is refused, naming the
    first's pid. The lock goes with the process (no stale lock after a crash).
    Returns the lock file's descriptor, to keep open.
    """
    import fcntl

    from wattsched.daemon.files import ensure_dir

    path = state_dir / LOCK_FILE
    ensure_dir(state_dir, 0o711, what="state directory")  # as the store makes it: no one else's directory
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot open the state directory's lock file: {exc.strerror}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        other = os.read(fd, 64).decode("ascii", "replace").strip() or "unknown"
        os.close(fd)
        raise ConfigError(f"{path}: another wattsched daemon (pid {other}) is running on state directory "
                          f"{state_dir}; stop it first, or give this one another --state-dir") from None
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    return fd


def _naming_the_store(command):
    """``command``, with an SQLite error met while it reads the state store (damage SQLite finds only when it
    reaches a page) reported as the store's, naming its file."""
    import functools

    @functools.wraps(command)
    def wrapped(args: argparse.Namespace) -> int:
        import sqlite3

        from wattsched.daemon.store import StoreError
        from wattsched.errors import damage_of, damaged_database

        try:
            return command(args)
        except (sqlite3.DatabaseError, UnicodeDecodeError) as exc:
            config, _ = load_daemon_config(args)
            path = Path(config.state_dir) / "state.db"
            if isinstance(exc, UnicodeDecodeError):  # SQLite's own message quoting damaged bytes
                raise StoreError(damaged_database(path, f"text that is not UTF-8 ({exc.reason})")) from None
            if damage_of(exc) is not None:
                raise StoreError(damaged_database(path, exc)) from None
            raise StoreError(f"{path}: SQLite: {exc}") from None

    return wrapped


def _store(args, *, read_only: bool = False):
    from wattsched.daemon.store import Store

    config, _ = load_daemon_config(args)
    path = Path(config.state_dir) / "state.db"
    if not path.exists():
        raise ConfigError(f"{path}: no state store (has the daemon run with state_dir {config.state_dir}?)")
    return config, Store(path, read_only=read_only)


@_naming_the_store
def cmd_status(args: argparse.Namespace) -> int:
    from wattsched.daemon.loop import Daemon

    config, store = _store(args, read_only=True)
    if config.slurm.backend == "sim":
        try:
            return _status_of_daemon(config, store, args.limit)
        finally:
            store.close()
    daemon = Daemon(config, make_backend(config), store=store)
    view_state = daemon.backend.read_state()
    from wattsched.daemon.view import build_view

    daemon._now = view_state.read_at
    view = build_view(
        view_state, partitions=daemon.partitions, holds=store.holds(), starts=store.starts(), power=daemon.power,
        cap_w=daemon._cap_w, estimator=None, epoch=0, include_adopted=False, platform_cache={}, indexes=False,
        take_user_holds=config.gate == "lua",
    )
    c, snap = view.classified, view.snapshot
    # announced demand-response events as the daemon sees them (same baselines)
    baselines = dict(store.get("dr_baselines", {}) or {})
    snap.dr_events = daemon.constraints.noticed(snap.platform, view_state.read_at, baselines, snap.platform_power_w)
    from wattsched.model.constraints import NoticedEvent

    for g in daemon.grid.events(view_state.read_at):  # from a VTN, as the daemon last saved them
        base = baselines.get(g.event.key, g.baseline_w)
        event = g.event.to_event(base)
        snap.dr_events.append(NoticedEvent(event, base, event.target_cap_w(base)))
    for e in snap.dr_events:
        snap.cap = snap.cap.with_limit(e.event.start_s, e.event.end_s, e.cap_w, e.event.label)
    holds = store.holds()
    print(f"policy {config.policy}, {'dry-run' if config.dry_run else 'active'}, cycle {store.get('cycle', 0)}")
    hb = config.heartbeat_path
    if hb.exists():
        age = time.time() - hb.stat().st_mtime
        print(f"heartbeat {hb}: {age:.0f} s old" + (" (stale: the lua gate is open)" if age > 60 else ""))
    print(f"jobs: {len(c.running)} running, {len(c.starting)} released and starting, {len(c.ours)} held by "
          f"wattsched, {len(c.adopt)} pending not held, {len(c.others_held)} held by users or admins")
    cap = snap.cap_w
    print(f"cap: {'none' if cap == float('inf') else f'{cap:,.0f} W'}; estimated power {snap.platform_power_w:,.0f} W "
          f"on {len(snap.platform)} nodes")
    _print_constraints(store, snap, view_state.read_at)
    _print_held([(job.job_id, job.user, job.node_count,
                  holds.get(job.job_id, ("", ""))[1] or "waiting for the next cycle") for job in c.ours],
                len(c.ours), args.limit)
    _print_shadow(store, config)
    store.close()
    return 0


def _print_held(rows, total: int, limit: int) -> None:
    """The table of jobs wattsched holds, with its header."""
    if not rows:
        return
    print("held by wattsched:")
    print(f"  {'JOB':>8}  {'USER':<10} {'NODES':>5}  REASON")
    for job_id, user, nodes, reason in rows[:limit]:
        print(f"  {job_id:>8}  {user:<10} {nodes:>5}  {reason}")
    if total > limit:
        print(f"  ... and {total - limit} more")


def _status_of_daemon(config, store, limit: int) -> int:
    """``status`` of the simulated cluster, which lives in the daemon process only: what its last cycle saw,
    as the daemon wrote it into the state store."""
    cycle = store.get("cycle", 0)
    s = store.get("status")
    if not s:
        raise ConfigError(f"{Path(config.state_dir) / 'state.db'}: no cycle recorded yet: the simulated cluster "
                          "lives in the daemon process, and status shows what the daemon's last cycle saw; start "
                          "wattsched daemon --backend sim with this state directory first")
    age = time.time() - s["wall_time"]
    print(f"policy {s['policy']}, {'dry-run' if s['dry_run'] else 'active'}, cycle {cycle}, simulated cluster "
          f"at {s['speed']:g}x")
    print(f"as of the daemon's last cycle, {age:.0f} s ago (simulated time {local_time(s['time'])}); the simulated "
          "cluster lives in the daemon process, so this is what the daemon wrote, not a fresh reading")
    j = s["jobs"]
    print(f"jobs: {j['running']} running, {j['starting']} released and starting, {j['held']} held by wattsched, "
          f"{j['pending_unheld']} pending not held, {j['held_by_others']} held by users or admins")
    cap = "none" if s["cap_w"] is None else f"{s['cap_w']:,.0f} W"
    print(f"cap: {cap}; {'measured' if s['measured'] else 'estimated'} power {s['power_w']:,.0f} W "
          f"(predicted {s['predicted_w']:,.0f} W) on {s['nodes']} nodes")
    if s.get("next_cap_change"):
        t, w = s["next_cap_change"]
        print(f"next cap change: {local_time(t, '%Y-%m-%d %H:%M')} to {'none' if w is None else f'{w:,.0f} W'}")
    for label, start, end, cap_w in s.get("dr_events", ()):
        state = "in force" if start <= s["time"] else "announced"
        print(f"demand response {label!r}: {local_time(start, '%Y-%m-%d %H:%M')} to "
              f"{local_time(end, '%Y-%m-%d %H:%M')}, cap {cap_w:,.0f} W ({state})")
    _print_settings(store)
    _print_held(s["held_jobs"], j["held"], limit)
    _print_shadow(store, config)
    return 0


def _print_shadow(store, config) -> None:
    """How much the shadow record holds: window, cycles, jobs, size (nothing without a record)."""
    from wattsched.daemon.shadow import record_summary

    r = record_summary(store.db)
    if r is None:
        if config.shadow or config.shadow_record:
            print("shadow record: empty (no cycle recorded yet)")
        return
    hours = (r["end"] - r["start"]) / 3600
    print(f"shadow record: {local_time(r['start'])} to {local_time(r['end'])} "
          f"({hours:.1f} h, retention {config.shadow_retention_s / 3600:g} h), {r['cycles']} cycles, {r['jobs']} jobs, "
          f"{r['bytes'] / 1024:,.0f} KiB")


def _print_constraints(store, snap, now: float) -> None:
    """Next cap change, announced demand-response events and the node settings wattsched keeps."""
    def when(t: float) -> str:
        return local_time(t, "%Y-%m-%d %H:%M")

    def watts(w: float) -> str:
        return "none" if w == float("inf") else f"{w:,.0f} W"

    events = snap.dr_events
    cap = snap.cap
    nxt = cap.next_change_after(now)
    if nxt != float("inf"):
        print(f"next cap change: {when(nxt)} to {watts(cap.cap_at(nxt))}")
    for e in events:
        state = "in force" if e.event.start_s <= now else "announced"
        print(f"demand response {e.event.label!r}: {when(e.event.start_s)} to {when(e.event.end_s)}, "
              f"cap {watts(e.cap_w)} ({state})")
    _print_settings(store)


def _print_settings(store) -> None:
    """The table of node settings wattsched keeps, with its header."""
    from wattsched.daemon.reconciler import describe_setting as _describe

    desired = store.desired()
    if desired:
        print("node settings wattsched keeps:")
        print(f"  {'NODE':<12} {'KIND':<4} {'VALUE':<18} {'STATE':<10} JOB")
        for (node, kind), w in desired.items():
            job = str(w.job_id) if w.job_id is not None else "-"
            print(f"  {node:<12} {kind:<4} {_describe(kind, w.value):<18} {w.state:<10} {job}")


def _parse_since(text: str) -> float:
    text = text.strip()
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    if text and text[-1] in units and text[:-1].replace(".", "", 1).isdigit():
        return time.time() - float(text[:-1]) * units[text[-1]]
    try:
        when = dt.datetime.fromisoformat(text)
    except ValueError:
        raise ConfigError(f"--since: expected a duration such as 2h or 30m, or a date such as 2026-11-22T10:00, "
                          f"got {text!r}") from None
    if when.tzinfo is None:
        when = when.astimezone()
    return when.timestamp()


@_naming_the_store
def cmd_audit(args: argparse.Namespace) -> int:
    _config, store = _store(args, read_only=True)
    entries = store.audit_since(_parse_since(args.since))
    if args.action:
        known = {e.action for e in entries} | set(AUDIT_ACTIONS)
        unknown = [a for a in args.action if a not in known]
        if unknown:
            store.close()
            raise OptionError("--action", f"unknown action {unknown[0]!r}; actions are {', '.join(AUDIT_ACTIONS)}")
        entries = [e for e in entries if e.action in args.action]
    shown = entries[-args.limit:] if args.limit else entries
    if shown:
        print(f"{'TIME':<19}  {'CYCLE':<6} {'ACTION':<11} {'TARGET':<10} {'OUTCOME':<10} REASON")
    else:
        print(f"no audit entries since {local_time(_parse_since(args.since))}")
    for e in shown:
        when = local_time(e.time, "%Y-%m-%d %H:%M:%S")
        flag = " [dry-run]" if e.dry_run else ""
        print(f"{when}  {e.cycle:<6} {e.action:<11} {e.target:<10} {e.outcome:<10}{flag} {e.reason}")
    store.close()
    return 0


@_naming_the_store
def cmd_release(args: argparse.Namespace) -> int:
    from wattsched.daemon.loop import Daemon

    config, store = _store(args)
    daemon = Daemon(config.model_copy(update={"dry_run": False}), make_backend(config), store=store)
    released = daemon.release_all(reason="released by wattsched release")
    print(f"released {len(released)} jobs held by wattsched" + (f": {', '.join(map(str, released))}" if released
                                                                  else ""))
    store.close()
    return 0


def cmd_history_import(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from wattsched.daemon.history import import_history, parse_sacct, sacct_args
    from wattsched.daemon.power import Telemetry

    config, _ = load_daemon_config(args)
    if config.telemetry.source != "prometheus":
        raise ConfigError(f"{args.config or 'config'}: telemetry.source: history import reads job power from "
                          "Prometheus; set telemetry.source: prometheus")
    if args.sacct_file:
        try:
            text = Path(args.sacct_file).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            why = exc.strerror if isinstance(exc, OSError) else describe(exc)
            raise OptionError("--sacct-file", f"{args.sacct_file}: {why}") from None
        source = args.sacct_file
    else:
        from wattsched.daemon.slurm.cli import SlurmCLI

        s = config.slurm
        text = SlurmCLI(conf=s.conf, bin_dir=s.bin_dir, timeout_s=max(s.timeout_s, 120)).run(sacct_args(args.since))
        source = "sacct"
    jobs = parse_sacct(text, source)
    from wattsched.daemon.store import Store

    store = Store(Path(config.state_dir) / "state.db")
    telemetry = Telemetry(config.telemetry)
    new, missing = import_history(jobs, telemetry, store,
                                  progress=None if args.quiet else lambda it: tqdm(it, desc="jobs", unit="job"))
    store.close()
    print(f"{len(jobs)} finished jobs since {args.since}: {new} added to the power history, "
          f"{len(jobs) - new - missing} already there, {missing} without power data in Prometheus")
    return 0


def add_commands(sub) -> None:
    def common(p, config_required=False):
        p.add_argument("--config", "-c", metavar="FILE", required=config_required,
                       help="daemon config (YAML); see docs/config.md")
        p.add_argument("--state-dir", metavar="DIR", help="state directory (overrides the config)")
        p.add_argument("--backend", choices=("cli", "pyslurm", "rest", "sim"),
                       help="Slurm backend (overrides the config)")

    p = sub.add_parser(
        "daemon", help="run the power-aware dispatcher against Slurm (or the built-in simulated cluster)",
        description="Each cycle: read the Slurm queue and nodes, predict job power, run the policy, check its plan, "
        "and act (release jobs pinned to the chosen nodes, hold, requeue, power nodes down and up). SIGHUP reloads "
        "the config, SIGTERM stops (on_stop: release or keep held jobs). With --backend sim it runs against a "
        "simulated cluster replaying the bundled trace, no Slurm needed.",
        epilog="Examples: wattsched daemon --backend sim;  wattsched daemon -c /etc/wattsched/wattsched.yaml --dry-run",
    )
    common(p)
    p.add_argument("--dry-run", action="store_true", help="decide, audit and export; change nothing")
    p.add_argument("--shadow", action="store_true",
                   help="shadow mode: a dry run that also records, each cycle, the jobs' submit, start and end "
                   "(with their nodes), node states, measured power, cap and demand-response events in force, in "
                   "the state store (bounded by shadow_retention_s), for `wattsched shadow replay`")
    p.add_argument("--cycles", type=int, metavar="N", help="stop after N cycles (default: run until stopped)")
    p.add_argument("--poll-interval", type=float, metavar="S", help="seconds between cycles (overrides the config)")
    p.add_argument("--speed", type=finite_float(0.0, what="a speed"), metavar="X",
                   help="with --backend sim: simulated seconds per real second (overrides sim.speedup; default 600, "
                   "or 1 with a VTN, whose events are in wall-clock time)")
    p.add_argument("--show-metrics", action="store_true", help="print the daemon's metrics when it stops")
    p.set_defaults(func=cmd_daemon)

    p = sub.add_parser("status", help="jobs by state, the jobs wattsched holds and why, cap and power",
                       description="Read Slurm and the daemon's state store and print what wattsched is doing.")
    common(p)
    p.add_argument("--limit", type=positive_int, default=20, metavar="N", help="held jobs listed (default 20)")
    p.set_defaults(func=cmd_status)

    p = sub.add_parser("audit", help="list the daemon's decisions",
                       description="List decisions from the audit log: time, cycle, action, target, outcome, reason.")
    common(p)
    p.add_argument("--since", default="1h", help="a duration (30m, 2h, 7d) or a date (default 1h)")
    p.add_argument("--action", action="append", help="only this action (start, hold, requeue, ...); repeatable")
    p.add_argument("--limit", type=positive_int, metavar="N", help="only the last N entries (default all)")
    p.set_defaults(func=cmd_audit)

    p = sub.add_parser("history", help="the job power history the predictors learn from")
    hsub = p.add_subparsers(dest="history_command", metavar="SUBCOMMAND", required=True)
    h = hsub.add_parser("import", help="bootstrap the power history from sacct and Prometheus",
                        description="List jobs finished since --since with sacct, measure each one's per-node power "
                        "over its run from Prometheus (telemetry block of the config), and store mean, max and std "
                        "in the state store, where the daemon's predictor learns from them.")
    common(h)
    h.add_argument("--since", required=True, help="start date for sacct, e.g. 2026-11-01 or now-7days")
    h.add_argument("--sacct-file", metavar="FILE", help="read `sacct -P -n -o ...` output from FILE instead of "
                   "running sacct")
    h.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    h.set_defaults(func=cmd_history_import)

    p = sub.add_parser("release", help="release every job wattsched holds (roll back)",
                       description="Release all jobs held by wattsched, unpinned, so Slurm schedules them itself. "
                       "Stop the daemon first, or it holds new jobs again.")
    common(p)
    p.set_defaults(func=cmd_release)
