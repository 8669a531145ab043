"""``wattsched traces import`` and ``wattsched platform fit``: accounting and telemetry as trace and platform."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from wattsched.cliargs import finite_float
from wattsched.errors import OptionError, TraceError, describe

__all__ = ["add_platform_commands", "add_traces_import"]


def _read_input(path: str, option: str) -> str:
    if path == "-":
        return sys.stdin.read()
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) else describe(exc)
        raise OptionError(option, f"{path}: {why}") from None


def _when(text: str, option: str, now: float) -> float:
    """An epoch time from ``30d``, ``12h``, ``now``, an epoch number or an ISO date (local time unless it says).

    >>> _when("2h", "--since", 10_000.0), _when("now", "--until", 5.0)
    (2800.0, 5.0)
    """
    from datetime import datetime

    t = text.strip()
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    if t == "now":
        return now
    if t and t[-1] in units and t[:-1].replace(".", "", 1).isdigit():
        return now - float(t[:-1]) * units[t[-1]]
    try:
        return float(t)
    except ValueError:
        pass
    try:
        stamp = datetime.fromisoformat(t)
    except ValueError:
        raise OptionError(option, f"expected a duration (30d, 12h), an ISO date or 'now', got {text!r}") from None
    return (stamp if stamp.tzinfo else stamp.astimezone()).timestamp()


def _prometheus(args: argparse.Namespace):
    if not args.prometheus:
        return None
    from wattsched.telemetry.prometheus import PrometheusSource

    return PrometheusSource(args.prometheus, args.power_query, node_label=args.node_label, node_map=args.node_map,
                            timeout_s=args.prometheus_timeout, rate_window=args.rate_window)


def _add_prometheus_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("power from Prometheus")
    g.add_argument("--prometheus", metavar="URL", help="Prometheus base URL, e.g. http://prometheus:9090")
    g.add_argument("--power-query", default="ipmi", metavar="NAME|PROMQL",
                   help="node power in watts, one series per node: a preset (ipmi, rapl, dcgm, agent) or PromQL, "
                   "e.g. node_power_watts (default ipmi)")
    g.add_argument("--node-label", default="instance", metavar="LABEL",
                   help="label naming the node (default instance)")
    g.add_argument("--node-map", metavar="REGEX",
                   help="regex with a group 'node' from the label value to the Slurm node name, e.g. "
                   r"'^(?P<node>[^:]+):\d+$' (default: the value is the name)")
    g.add_argument("--step", type=finite_float(), default=15.0, metavar="S",
                   help="resolution of the power series in seconds (default 15)")
    g.add_argument("--rate-window", default="1m", metavar="W", help="{range} of rate() queries (default 1m)")
    g.add_argument("--prometheus-timeout", type=finite_float(), default=30.0, metavar="S",
                   help="HTTP timeout of each query (default 30)")


def cmd_traces_import(args: argparse.Namespace) -> int:
    from wattsched.daemon.slurm.sacct import parse_sacct_json, parse_sacct_text
    from wattsched.daemon.traceimport import fetch_slurmdb_jobs, import_accounting
    from wattsched.workload.tables import write_job_table

    given = [o for o, v in (("--sacct-json", args.sacct_json), ("--sacct", args.sacct),
                            ("--slurmrestd", args.slurmrestd), ("--shadow-record", args.shadow_record)) if v]
    if len(given) != 1:
        raise OptionError("--sacct-json", "give exactly one of --sacct-json FILE, --sacct FILE, --slurmrestd URL or "
                          "--shadow-record DIR" + (f" (got {', '.join(given)})" if given else ""))
    if args.hash_users and not args.salt:
        raise OptionError("--hash-users", "needs --salt TEXT (a secret: the same salt gives the same names)")
    tz = None
    if args.tz:
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

        try:
            tz = ZoneInfo(args.tz)
        except (ZoneInfoNotFoundError, ValueError):
            raise OptionError("--tz", f"unknown time zone {args.tz!r}; e.g. Europe/Rome or UTC") from None
    if args.sacct_json:
        acct, version = parse_sacct_json(_read_input(args.sacct_json, "--sacct-json"),
                                         "stdin" if args.sacct_json == "-" else args.sacct_json)
        where = f"{args.sacct_json} (data_parser {version})"
    elif args.sacct:
        acct = parse_sacct_text(_read_input(args.sacct, "--sacct"), "stdin" if args.sacct == "-" else args.sacct,
                                tz=tz)
        where = args.sacct
    elif args.shadow_record:
        acct, where = _shadow_accounting(args)
    else:
        if not args.token_file:
            raise OptionError("--token-file", "--slurmrestd needs --token-file FILE (a JWT from `scontrol token`)")
        token = _read_input(args.token_file, "--token-file").strip().removeprefix("SLURM_JWT=")
        now = time.time()
        since, until = _when(args.since, "--since", now), _when(args.until, "--until", now)
        acct, version = fetch_slurmdb_jobs(args.slurmrestd, token, since=since, until=until, user=args.rest_user,
                                           version=args.rest_version)
        where = f"{args.slurmrestd} (/slurmdb/{version})"
    progress = None
    if not args.quiet and args.prometheus:
        from tqdm import tqdm

        progress = lambda jobs: tqdm(jobs, desc="power", unit="job", file=sys.stderr)  # noqa: E731
    imported = import_accounting(acct, power=args.power, prometheus=_prometheus(args), step_s=args.step,
                                 hash_salt=args.salt if args.hash_users else None, as_run=args.as_run,
                                 progress=progress)
    n = write_job_table(imported.jobs, args.out, imported.record)
    skipped = ", ".join(f"{v} {k}" for k, v in sorted(imported.skipped.items()))
    power = ", ".join(f"{v} {k}" for k, v in sorted(imported.sources.items()))
    print(f"wrote {n} jobs from {where} to {args.out}; power: {power or 'none'}"
          + (f"; skipped: {skipped}" if skipped else ""))
    for note in imported.notes:
        print(f"note: {note}", file=sys.stderr)
    return 0


def _shadow_accounting(args: argparse.Namespace):
    """The jobs of the shadow record in ``--shadow-record`` (a state directory or its state.db) between
    ``--since`` and ``--until``, and the words naming where they came from."""
    from wattsched.daemon.shadow import read_record, record_accounting
    from wattsched.daemon.store import Store

    path = Path(args.shadow_record)
    if path.is_dir():
        path = path / "state.db"
    if not path.is_file():
        raise OptionError("--shadow-record", f"{path}: no state store (the state_dir of a daemon that ran with "
                          "--shadow or shadow_record: true, or its state.db)")
    now = time.time()
    since, until = _when(args.since, "--since", now), _when(args.until, "--until", now)
    store = Store(path, read_only=True)
    try:
        record = read_record(store.db, path)
    finally:
        store.close()
    return record_accounting(record, since, until), f"{path} (shadow record)"


def add_traces_import(tsub) -> None:
    from wattsched.daemon.slurm.sacct import SACCT_FORMAT

    t = tsub.add_parser(
        "import", help="a site's Slurm accounting (sacct, slurmrestd) with measured power, as a job table",
        description="Read Slurm accounting (sacct --json of Slurm 22.05 to 25.11, sacct -P text, slurmdbd "
        "through slurmrestd, or the jobs a shadow-mode daemon recorded) and write a job table that `simulate "
        "--trace` reads: submit, run and requested "
        "time, nodes, partition, user, state, and per-node power from Prometheus (the job's nodes over its run) "
        "or Slurm's energy accounting, with the recorded start, end, node list, energy and power source.",
        epilog=f"sacct -P needs its header line: sacct -a -X -P --format={SACCT_FORMAT} -S now-30days > jobs.txt. "
        "Example: sacct -a -X --json -S now-30days > jobs.json; wattsched traces import --sacct-json jobs.json "
        "--prometheus http://prom:9090 --power-query ipmi -o month.csv",
    )
    g = t.add_argument_group("accounting (one of)")
    g.add_argument("--sacct-json", metavar="FILE", help="output of `sacct -a -X --json` ('-': standard input)")
    g.add_argument("--sacct", metavar="FILE", help="output of `sacct -a -X -P --format=...` with its header line")
    g.add_argument("--slurmrestd", metavar="URL", help="slurmrestd base URL, e.g. http://head:6820 (/slurmdb/vX/jobs)")
    g.add_argument("--shadow-record", metavar="DIR",
                   help="the state directory (or its state.db) of a daemon that recorded with --shadow or "
                   "shadow_record: true: the jobs as it saw Slurm run them, for a cluster without slurmdbd")
    g.add_argument("--token-file", metavar="FILE", help="with --slurmrestd: file holding a JWT (scontrol token)")
    g.add_argument("--rest-user", default="root", metavar="NAME",
                   help="with --slurmrestd: the token's user (default root)")
    g.add_argument("--rest-version", metavar="vX", help="with --slurmrestd: API version, e.g. v0.0.38 "
                   "(default: the newest it serves)")
    g.add_argument("--since", default="30d", metavar="WHEN",
                   help="with --slurmrestd or --shadow-record: jobs from (30d, 12h, an ISO date; default 30d)")
    g.add_argument("--until", default="now", metavar="WHEN",
                   help="with --slurmrestd or --shadow-record: jobs until (default now)")
    g.add_argument("--tz", metavar="ZONE", help="time zone of sacct -P times (default this host's)")
    _add_prometheus_options(t)
    t.add_argument("--power", choices=("auto", "prometheus", "slurm-energy", "none"), default="auto",
                   help="where job power comes from: auto (Prometheus where it has the job, else Slurm's "
                   "ConsumedEnergyRaw, else none; the default), or only one source")
    t.add_argument("--as-run", action="store_true",
                   help="submit each job at its recorded start, so that a replay starts it when Slurm did: checks "
                   "the power and the platform against the recorded energy (see docs/simulator.md)")
    t.add_argument("--hash-users", action="store_true", help="replace user and group names by salted hashes")
    t.add_argument("--salt", metavar="TEXT", help="with --hash-users: the salt (keep it secret)")
    t.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    t.add_argument("-o", "--out", required=True, metavar="FILE", help="job table to write (.csv, .csv.gz, .parquet)")
    t.set_defaults(func=cmd_traces_import)


def cmd_platform_fit(args: argparse.Namespace) -> int:
    from wattsched.daemon.platformfit import fit_platform, platform_yaml
    from wattsched.daemon.traceimport import read_recorded

    recorded = read_recorded(args.trace)
    if not recorded:
        raise TraceError(args.trace, None, "no jobs; import a window with jobs in it")
    prom = _prometheus(args)
    if prom is None:
        raise OptionError("--prometheus", "required: node power comes from Prometheus (--prometheus URL)")
    settle_s = _settle_s(args)
    start = min(j.start for j in recorded)
    end = max(j.end for j in recorded)
    series = prom.node_series(start, end, args.step)
    nodes = None
    if args.nodes_json:
        from wattsched.daemon.slurm.parse import parse_nodes_json

        nodes, _ = parse_nodes_json(_read_input(args.nodes_json, "--nodes-json"), args.nodes_json)
    platform, fits = fit_platform(series, recorded, name=args.name, node_info=nodes,
                                  source=f"{args.prometheus} ({prom.query})", settle_s=settle_s)
    text = platform_yaml(platform, fits, source=f"{args.trace} and {prom.query} at {args.prometheus}")
    Path(args.out).write_text(text, encoding="utf-8")
    for f in fits:
        print(f"{f.name}: {len(f.nodes)} nodes, {f.cores} cores, idle {f.idle_w:.1f} W, busy {f.busy_w:.1f} W "
              f"(min {f.busy_min_w:.1f} W)")
    print(f"wrote {args.out}")
    return 0


def _settle_s(args: argparse.Namespace) -> float:
    """The rate window of ``--power-query`` in seconds (0 for a query without one: a gauge reads no window)."""
    from wattsched.telemetry.prometheus import duration_s, reads_through_rate

    if not reads_through_rate(args.power_query):
        return 0.0
    try:
        return duration_s(args.rate_window)
    except ValueError as exc:
        raise OptionError("--rate-window", str(exc)) from None


def add_platform_commands(sub) -> None:
    p = sub.add_parser("platform", help="platform files from a site's telemetry")
    psub = p.add_subparsers(dest="platform_command", metavar="SUBCOMMAND", required=True)
    t = psub.add_parser(
        "fit", help="derive a platform file (node groups, idle and busy power) from Prometheus and an imported trace",
        description="Read every node's power from Prometheus over the window of a trace that `traces import` "
        "wrote, split the samples into idle and busy by the recorded jobs' nodes and times, and write a platform "
        "file that `simulate --platform FILE` reads (groups by node size from --nodes-json).",
        epilog="Example: wattsched platform fit --trace month.csv --prometheus http://prom:9090 --power-query ipmi "
        "--nodes-json nodes.json -o site.yaml",
    )
    t.add_argument("--trace", required=True, metavar="FILE", help="a job table written by `traces import`")
    t.add_argument("--nodes-json", metavar="FILE",
                   help="sinfo --json (22.05) or scontrol show nodes --json: group nodes by CPUs, GPUs and memory")
    t.add_argument("--name", default="fitted", help="platform name (default fitted)")
    _add_prometheus_options(t)
    t.add_argument("-o", "--out", required=True, metavar="FILE", help="platform file to write (YAML)")
    t.set_defaults(func=cmd_platform_fit)
