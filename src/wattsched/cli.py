"""The ``wattsched`` command line: one console script, argparse subcommands."""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import signal
import sys
from pathlib import Path

from wattsched import __version__, _native
from wattsched.cliargs import Parser, finite_float, int_in, key_value, seed
from wattsched.errors import OptionError, describe

log = logging.getLogger("wattsched")

EPILOG = "Documentation: docs/ in the source tree (simulator.md, config.md, cli.md)."


from wattsched.cliargs import positive_int as _positive_int  # noqa: E402

_param = key_value


def _add_sim_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("workload and machine")
    g.add_argument("--config", metavar="FILE", help="simulation config (YAML, see docs/config.md); options override it")
    g.add_argument("--trace", metavar="FILE", help="SWF trace (.swf, .swf.gz) or job table (.csv, .csv.gz, .parquet)")
    g.add_argument("--platform", metavar="FILE|NAME",
                   help="platform YAML or a packaged name (default, marconi100, eurora, ahmed2017, sarood-testbed, "
                   "intrepid-overprovisioned)")
    g.add_argument("--procs", type=_positive_int, metavar="N",
                   help="homogeneous machine of N processors instead of --platform")
    g.add_argument("--cores-per-node", type=_positive_int, metavar="C", help="processors per node (default 1)")
    g.add_argument("--default-walltime", metavar="runtime|S",
                   help="requested time of jobs that have none: their real runtime (default) or S seconds")
    g.add_argument("--skip-bad-lines", action="store_true", default=None,
                   help="skip and count malformed trace lines instead of stopping at the first")
    g.add_argument("--no-kill-at-walltime", dest="kill_at_walltime", action="store_false", default=None,
                   help="let jobs run past their requested time (default: killed at it, as Slurm does)")
    g = p.add_argument_group("policy and constraints")
    g.add_argument("--policy", metavar="NAME", help="policy name (see `wattsched policies`; default easy)")
    g.add_argument("--param", action="append", type=_param, default=[], metavar="KEY=VALUE",
                   help="policy parameter, repeatable (e.g. --param order=saf)")
    g.add_argument("--predictor", metavar="NAME",
                   help="power predictor the policy sees: naive, history, learned, per-user-tree, oracle")
    g.add_argument("--predictor-param", action="append", type=_param, default=[], metavar="KEY=VALUE",
                   help="predictor parameter, repeatable (e.g. --predictor-param alpha=1)")
    g.add_argument("--baseline", metavar="POLICY",
                   help="also run POLICY uncapped on the same jobs and report the turnaround change")
    g.add_argument("--cap", metavar="W|PCT",
                   help="constant power cap in watts, or a percentage of the maximum dynamic power ('60%%')")
    g.add_argument("--cap-schedule", metavar="FILE", help="piecewise-constant cap schedule (YAML or CSV)")
    g.add_argument("--dr-events", metavar="FILE",
                   help="demand-response events (YAML or CSV, see `wattsched dr-events generate`), added to the "
                   "config's")
    g.add_argument("--seed", type=seed, help="seed of the power augmentation (default 0)")
    g.add_argument("--tick", type=finite_float(), metavar="S", dest="tick_s",
                   help="call the policy every S seconds too")
    g.add_argument("--time-limit", type=finite_float(), metavar="S", dest="time_limit_s",
                   help="stop the simulation at S seconds")
    g.add_argument("--bsld-threshold", type=finite_float(), metavar="S", dest="bsld_threshold_s",
                   help="bounded slowdown threshold in seconds (default 300 for Borghesi's policies, else 10)")
    g.add_argument("--bsld-definition", choices=("standard", "borghesi2018"),
                   help="bounded slowdown of the summary: standard, or Eq. 3 of Borghesi et al. 2018 (slowed run "
                   "time over nominal; default for ls, dec, bf, dvfs, simple, dynshare, dec+rapl)")
    g.add_argument("--response", metavar="mixed|cpi|F|classes",
                   help="how capped jobs slow down (Borghesi 2018 §5.1.1): F drawn per application class (mixed), "
                   "Eq. 4 (cpi), one factor F in [0, 1], or the platform's class models (default; or the policy's "
                   "`--param response=`)")
    g.add_argument("--max-nodes", type=_positive_int, metavar="N",
                   help="sanity limit on the machine size in nodes (default 200000)")
    g.add_argument("--max-ticks", type=_positive_int, metavar="N",
                   help="sanity limit on the number of --tick ticks of a run (default 1000000)")
    g = p.add_argument_group("output")
    g.add_argument("--out", metavar="DIR", help="run directory (default runs/TRACE-POLICY)")
    g.add_argument("--no-report", action="store_true", help="do not write report.html")
    g.add_argument("--json", action="store_true", help="print the summary as JSON instead of a table")
    g.add_argument("-q", "--quiet", action="store_true", help="no progress bar")


def _sim_config(args: argparse.Namespace):
    from wattsched.config import SimConfig, load_config, merge_overrides

    cli = {
        "trace": args.trace,
        "platform": args.platform,
        "procs": args.procs,
        "cores_per_node": args.cores_per_node,
        "policy": args.policy,
        "cap_w": args.cap,
        "cap_schedule": args.cap_schedule,
        "seed": args.seed,
        "out": args.out,
        "kill_at_walltime": args.kill_at_walltime,
        "default_walltime": args.default_walltime,
        "skip_bad_lines": args.skip_bad_lines,
        "tick_s": args.tick_s,
        "time_limit_s": args.time_limit_s,
        "bsld_threshold_s": args.bsld_threshold_s,
        "bsld_definition": getattr(args, "bsld_definition", None),
        "response": getattr(args, "response", None),
        "predictor": args.predictor,
        "baseline": args.baseline,
        "max_nodes": args.max_nodes,
        "max_ticks": args.max_ticks,
    }
    if getattr(args, "naive_cpu_w", None) is not None:
        cli["naive_cpu_w"] = args.naive_cpu_w
    moldable = _moldable_params(args) if hasattr(args, "moldable") else None
    if moldable is not None:
        cli["moldable"] = moldable.model_dump(exclude_none=True)
    if args.predictor_param:
        cli["predictor_params"] = dict(args.predictor_param)
    if args.param:
        cli["params"] = dict(args.param)
    if getattr(args, "clear_params", False):
        cli["params"] = dict(args.param)
    if args.config:
        config = load_config(args.config, SimConfig, cli=cli, env=os.environ)
        if args.param and not getattr(args, "clear_params", False):  # --param adds to the file's params
            config = merge_overrides(config, {"params": {**_file_params(args.config), **dict(args.param)}}, env={})
        return _with_dr_events(config, args)
    if not args.trace:
        raise OptionError("--trace", "required: give a trace with --trace FILE (or a config with --config FILE)")
    return _with_dr_events(merge_overrides(SimConfig(trace=args.trace), cli, env=os.environ), args)


def _with_dr_events(config, args: argparse.Namespace):
    """The config with the events of ``--dr-events FILE`` added to its ``demand_response``."""
    if not getattr(args, "dr_events", None):
        return config
    from wattsched.sim.drevents import load_dr_events

    events = load_dr_events(args.dr_events)
    return config.model_copy(update={"demand_response": [*config.demand_response, *events]})


def _file_params(path: str) -> dict:
    from wattsched.config import read_yaml

    raw, _ = read_yaml(path)
    return dict((raw or {}).get("params") or {})


def cmd_simulate(args: argparse.Namespace) -> int:
    from wattsched.sim.collector import imports_paused
    from wattsched.sim.plotworker import PlotWorker

    # started first, so that its imports (matplotlib, a third of a short run) overlap this process's own
    plotter = PlotWorker.start()
    try:
        with imports_paused():
            from wattsched.sim.metrics import cleaning_text, format_summary_table, readable
            from wattsched.sim.run import run_simulation

            config = _sim_config(args)
        with _sigterm_exits():
            outcome = run_simulation(config, progress=not args.quiet, report=not args.no_report, plotter=plotter)
    finally:
        if plotter is not None:
            plotter.close()
    if args.json:
        print(json.dumps(outcome.summary, indent=2, default=str))
    else:
        info = outcome.result.info
        predictor = info.get("predictor")
        if predictor:
            predictor = "oracle (real values)" if info.get("oracle") else predictor
        params = f" ({readable(info['params'])})" if info.get("params") else ""
        print(f"{info.get('trace', config.trace)} on {info['nodes']} nodes, policy {info['policy']}{params}"
              + (f", predictor {predictor}" if predictor else ""))
        print(f"machine: {info['machine']}")
        print(format_summary_table(outcome.summary, outcome.baseline,
                                   f"{config.baseline} (uncapped)"
                                   if outcome.baseline is not None else "baseline"))
        if outcome.verdicts is not None:
            print(verdict_text(outcome.verdicts, outcome.baseline))
        from wattsched.sim.verdicts import repeats_a_warning

        for note in info.get("notes", []):
            if outcome.verdicts is None or not repeats_a_warning(note):
                print(f"note: {note}")
        cleaning = info.get("cleaning") or {}
        if cleaning.get("dropped") or cleaning.get("skipped_lines"):
            print(f"cleaning: {cleaning_text(cleaning)}")
        if info.get("plans_rejected"):
            print(f"warning: the guard rejected {info['plans_rejected']} plans (see summary.json)")
    if outcome.out_dir is not None:
        where = outcome.out_dir / ("report.html" if not args.no_report else "summary.json")
        print(f"wrote {where}", file=sys.stderr)
    args.outcome = outcome  # held by main(): the process exits next, without tearing down the engine
    return 0


def verdict_text(verdicts: dict, baseline: dict | None = None) -> str:
    """The verdicts of a run as lines for a terminal: one per verdict, the finished-jobs bias, the warnings.

    >>> print(verdict_text({"cap": None, "budgets": [], "dr_events": [], "warnings": [],
    ...     "queue": {"drained": False, "text": "not drained: 2 of 5 jobs never finished"},
    ...     "finished": {"jobs": 3, "of": 5}}))
    Verdict
      queue  NOT DRAINED  2 of 5 jobs never finished
      means over finished jobs: 3 of 5
    """
    from wattsched.sim.verdicts import finished_text, verdict_lines

    lines = verdict_lines(verdicts)
    width = max(len(subject) for subject, _, _ in lines)
    words = [text.partition(": ") for _, _, text in lines]
    word_w = max(len(word) for word, _, _ in words)
    out = ["Verdict"]
    for (subject, _passed, _text), (word, _, rest) in zip(lines, words):
        out.append(f"  {subject:<{width}}  {word.upper():<{word_w}}  {rest}")
    finished = finished_text(verdicts["finished"])
    if baseline is not None:
        base_n = int(baseline.get("n_jobs") or 0)
        base_done = base_n - int(baseline.get("jobs_unfinished") or 0)
        finished += f" (baseline: {base_done:,} of {base_n:,})"
    out.append(f"  {finished}")
    out.extend(f"warning: {w['message']}" for w in verdicts["warnings"])
    return "\n".join(out)


@contextlib.contextmanager
def _sigterm_exits():
    """Turn SIGTERM into ``SystemExit(143)`` so a run cleans up its partial outputs on the way out."""
    def stop(signum, frame):
        raise SystemExit(128 + signum)

    try:
        old = signal.signal(signal.SIGTERM, stop)
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def cmd_demo(args: argparse.Namespace) -> int:
    """Simulate the bundled trace under a cap, with the packaged demo config."""
    from importlib.resources import as_file, files

    demo = files("wattsched") / "data" / "demo.yaml"
    with as_file(demo) as path:
        ns = argparse.Namespace(**{**vars(_SIM_DEFAULTS), "config": str(path), "out": args.out, "quiet": args.quiet,
                                   "policy": args.policy, "cap": args.cap})
        ns.clear_params = bool(args.policy)  # the demo's params belong to its own policy
        return cmd_simulate(ns)


def cmd_report(args: argparse.Namespace) -> int:
    from wattsched.sim.report import write_html_report

    path = write_html_report(Path(args.run_dir))
    print(path)
    return 0


_EXPORT_FILES = {"swf": "schedule.swf", "batsim": "batsim_jobs.csv", "csv-safe": "jobs-safe.csv"}
"""Default file of each export format, in the run directory."""


def _same_file(a: Path, b: Path) -> bool:
    """``a`` and ``b`` name one existing file (through links too)."""
    try:
        return os.path.samefile(a, b)
    except (OSError, ValueError):
        return False


def cmd_export(args: argparse.Namespace) -> int:
    from wattsched.sim.export import write_batsim_jobs, write_jobs_csv_safe, write_swf
    from wattsched.sim.report import MARKER, TABLE_FILES, load_run

    run_dir = Path(args.run_dir)
    run, _ = load_run(run_dir)
    out = Path(args.out) if args.out else run_dir / _EXPORT_FILES[args.format]
    if out.is_dir():
        raise OptionError("--out", f"{out} is a directory; give a file name")
    if any(_same_file(out, run_dir / name) for name in (*TABLE_FILES, "summary.json", MARKER)):
        raise OptionError("--out", f"{out} is a file of the run; the run directory keeps its own tables, give "
                          "another name")
    total = len(run.jobs["id"])
    try:
        if args.format == "csv-safe":
            n, cells = write_jobs_csv_safe(run, out)
            print(f"wrote {n} jobs to {out}; {cells} text cells starting with =, +, -, @, tab or CR prefixed "
                  "with '", file=sys.stderr)
            return 0
        n = (write_swf if args.format == "swf" else write_batsim_jobs)(run, out)
    except OSError as exc:
        raise OptionError("--out", f"cannot write {out}: {exc.strerror}") from None
    left = f"; {total - n} left out (they did not run to their end)" if n < total else ""
    print(f"wrote {n} of {total} jobs to {out}{left}" if left else f"wrote {n} jobs to {out}", file=sys.stderr)
    return 0


def _open_trace(args: argparse.Namespace):
    """The workload of ``args.file``, in whichever format it is (:mod:`wattsched.workload.open`)."""
    from wattsched.workload.open import open_trace

    return open_trace(args.file, cores_per_node=args.cores_per_node, skip_bad_lines=args.skip_bad_lines)


@contextlib.contextmanager
def _reading(path: str):
    """Errors of reading ``path`` whole that name no file (memory exhausted by its size, undecodable text) name it."""
    from wattsched.errors import TraceError

    try:
        yield
    except (MemoryError, UnicodeDecodeError) as exc:
        raise TraceError(str(path), None, describe(exc)) from exc


def cmd_traces_info(args: argparse.Namespace) -> int:
    from wattsched.workload.swf import trace_info

    with _reading(args.file):
        info = trace_info(_open_trace(args))
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    c = info["cleaning"]
    load = info["offered_load"]
    rows = [
        ("trace", info["name"]),
        ("jobs kept", f"{info['jobs']:,} of {c['read']:,} read"),
        ("dropped", ", ".join(f"{k}: {v:,}" for k, v in c["dropped"].items()) or "none"),
        ("adjusted", ", ".join(f"{k}: {v:,}" for k, v in c["adjusted"].items()) or "none"),
        ("malformed lines skipped", f"{c['skipped_lines']:,}"),
        ("users", f"{info['users']:,}"),
        ("submit span", f"{info['span_days']:.1f} days" if info["span_s"] >= 86400
         else f"{info['span_s'] / 3600:.2f} h"),
        ("machine", f"{info['max_procs']} processors" + (f", {info['max_nodes']} nodes" if info["max_nodes"] else "")
         if info["max_procs"] else "not given (job tables carry none; simulate needs --platform or --procs)"),
        ("offered load", (f"{load:.2f}" if load < 1e6 else f"{load:.3g}") if load is not None
         else "unknown (no machine size)"),
        ("zero-runtime jobs", f"{info['zero_runtime_jobs']:,}"),
        ("runtime > requested time", f"{info['runtime_exceeds_walltime']:,}"),
        ("power data", "yes" if info["has_power"] else "no (simulate augments it)"),
    ]
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"{k:<{width}}  {v}")
    for note in info["notes"]:
        print(f"note: {note}")
    return 0


def _add_moldable_options(t: argparse.ArgumentParser) -> None:
    g = t.add_argument_group("moldable jobs (Sarood et al. 2014, PARM; see docs/simulator.md)")
    g.add_argument("--moldable", type=finite_float(), metavar="FRACTION",
                   help="make this share of the jobs (0-1) moldable: node range ceil(θ·nodes)..nodes, and give every "
                   "job a PASS application (column app)")
    g.add_argument("--theta", metavar="LO,HI", help="range of θ with --moldable (default 0.2,0.6)")
    g.add_argument("--malleable", action="store_true", help="with --moldable: the moldable jobs are malleable too")
    g.add_argument("--apps", metavar="A,B,...",
                   help="with --moldable: PASS applications to draw from (default all: amr, jacobi2d, leanmd, "
                   "lulesh, wave2d)")


def _moldable_params(args: argparse.Namespace):
    """The ``--moldable`` options as :class:`~wattsched.workload.moldable.MoldableParams`, or None without them."""
    from pydantic import ValidationError

    from wattsched.workload.moldable import MoldableParams

    if args.moldable is None:
        for option, given in (("--theta", args.theta), ("--malleable", args.malleable), ("--apps", args.apps)):
            if given:
                raise OptionError(option, "needs --moldable FRACTION (e.g. --moldable 1)")
        return None
    if not 0.0 <= args.moldable <= 1.0:
        raise OptionError("--moldable", f"a share of the jobs in [0, 1], got {args.moldable:g}; e.g. --moldable 1")
    spec: dict = {"fraction": args.moldable, "malleable": args.malleable}
    if args.theta is not None:
        parts = args.theta.split(",")
        try:
            spec["theta"] = tuple(float(x) for x in parts)
        except ValueError:
            spec["theta"] = parts
        if len(parts) != 2:
            raise OptionError("--theta", f"give two numbers LO,HI, got {args.theta!r}; e.g. --theta 0.2,0.6")
    if args.apps is not None:
        spec["apps"] = tuple(a.strip() for a in args.apps.split(","))
    try:
        return MoldableParams(**spec)
    except ValidationError as exc:
        err = exc.errors()[0]
        option = {"fraction": "--moldable", "theta": "--theta", "apps": "--apps"}.get(str(err["loc"][0]), "--moldable")
        raise OptionError(option, err["msg"].removeprefix("Value error, ")) from None


def cmd_traces_synth(args: argparse.Namespace) -> int:
    from wattsched.workload.synthetic import DurationDist, NodesDist, UsersDist, generate, preset
    from wattsched.workload.tables import write_job_table

    kw = preset(args.preset) if args.preset else {}
    if args.max_nodes is not None:
        kw["max_nodes"] = args.max_nodes
        kw["nodes_dist"] = kw.get("nodes_dist", NodesDist()).model_copy(update={"max_nodes": args.max_nodes})
    kw.setdefault("max_nodes", 64)
    kw.setdefault("nodes_dist", NodesDist(max_nodes=kw["max_nodes"]))
    if args.median_runtime is not None or "duration_dist" not in kw:
        kw["duration_dist"] = kw.get("duration_dist", DurationDist()).model_copy(
            update={"median_s": args.median_runtime or 900.0})
    if not 0.0 <= args.hot_start <= 1.0:
        raise OptionError("--hot-start", f"a share of the nodes in [0, 1], got {args.hot_start:g}; e.g. 0.7")
    moldable = _moldable_params(args)
    workload = generate(args.jobs, window_s=args.window, arrival=args.arrival, seed=args.seed,
                        users=UsersDist(n_users=args.users), hot_start=args.hot_start, units=args.units,
                        moldable=moldable, **kw)
    n = write_job_table(workload.jobs, args.out)
    hot = f", hot start {args.hot_start:g}" if args.hot_start else ""
    hot += ", job units" if args.units else ""
    hot += f", moldable {moldable.fraction:g}" if moldable else ""
    print(f"wrote {n} jobs ({args.arrival} arrivals over {args.window:g} s{hot}, seed {args.seed}) to {args.out}")
    if "queues" in kw:
        import json

        ewt = json.dumps(kw["queues"].ewt_param()).replace('"', "")
        print(f"queues' expected waits for ls/dec: --param 'queue_ewt_s={ewt}'; machine: --platform eurora")
    return 0


def cmd_traces_augment(args: argparse.Namespace) -> int:
    from wattsched.config.platform import load_platform
    from wattsched.workload.augment import AugmentParams, augment_workload, reference_cores
    from wattsched.workload.tables import write_job_table

    platform = load_platform(args.platform or "default")
    moldable = _moldable_params(args)
    with _reading(args.file):
        workload = augment_workload(_open_trace(args), platform.reference_power, AugmentParams(), args.seed,
                                    cores_per_node=reference_cores(platform))
        if moldable is not None:
            from wattsched.workload.moldable import moldable_workload

            workload = moldable_workload(workload, moldable, args.seed)
    n = write_job_table(workload.jobs, args.out)
    what = "per-node power" + (f", moldable share {moldable.fraction:g} and PASS applications" if moldable else "")
    print(f"wrote {n} jobs with {what} (seed {args.seed}) to {args.out}")
    return 0


def cmd_check_config(args: argparse.Namespace) -> int:
    from wattsched.config import CONFIG_KINDS, detect_config_kind, key_locator, load_config, locate
    from wattsched.sweep.spec import load_sweep

    kind = detect_config_kind(args.file)
    if kind == "sweep":
        from wattsched.sweep.expand import expand

        print(f"{args.file}: valid sweep file ({len(expand(load_sweep(args.file)))} runs)")
        return 0
    if kind == "platform":
        from wattsched.config.platform import load_platform

        platform = load_platform(args.file)
        print(f"{args.file}: valid {kind} config ({len(platform)} nodes)")
        return 0
    config = load_config(args.file, CONFIG_KINDS[kind].model, env=os.environ)
    if kind == "simulation":
        from wattsched.policies import make_policy
        from wattsched.sim.build import build_platform, validate_plugins

        policy = make_policy(config.policy, config.params, source=key_locator(config, "params"),
                             name_source=key_locator(config, "policy")())
        validate_plugins(config)
        if config.platform is not None or config.procs is not None or Path(config.trace).exists():
            from wattsched.sim.build import run_checks

            platform = build_platform(config)
            run_checks(config, platform, policy, cap=config.build_cap_schedule(platform),  # warns as simulate does
                       budgets=config.build_energy_budgets(), dr_events=config.build_dr_events(platform))
        if Path(config.trace).exists():
            print(f"{args.file}: valid {kind} config ({config.policy} on {len(platform)} nodes)")
            return 0
        print(f"{args.file}: valid {kind} config; note: trace {str(config.trace)!r} does not exist here")
        return 0
    if kind == "daemon":
        from wattsched.policies import make_policy
        from wattsched.predictors import make_predictor

        make_policy(config.policy, config.params, source=key_locator(config, "params"),
                    name_source=key_locator(config, "policy")())
        if config.predictor:
            make_predictor(config.predictor, config.predictor_params, source=key_locator(config, "predictor_params"),
                           name_source=key_locator(config, "predictor")())
        if config.slurm.backend == "sim":
            _check_daemon_sim(config, locate)
        if config.demand_response.openadr2 is not None:
            import importlib.util

            if importlib.util.find_spec("openleadr") is None:
                from wattsched.errors import ConfigError

                raise ConfigError(locate(config, ("demand_response", "openadr2"),
                                         "needs openleadr: pip install 'wattsched[openadr]'"))
        mode = "dry-run" if config.dry_run else f"gate {config.gate}"
        print(f"{args.file}: valid {kind} config ({config.policy}, {config.slurm.backend} backend, {mode})")
        return 0
    print(f"{args.file}: valid {kind} config")
    return 0


def _check_daemon_sim(config, locate) -> None:
    """The simulated cluster of a daemon config: its trace exists, its node count fits its platform."""
    from wattsched.config.platform import load_platform
    from wattsched.errors import ConfigError

    sim = config.sim
    if sim.trace != "bundled" and not Path(sim.trace).exists():
        raise ConfigError(locate(config, ("sim", "trace"), f"no such file {sim.trace!r}"))
    platform = load_platform(sim.platform)
    if sim.nodes is not None and sim.nodes > len(platform):
        raise ConfigError(locate(config, ("sim", "nodes"),
                                 f"{sim.nodes} nodes, but platform {sim.platform!r} has only {len(platform)}"))


def cmd_policies(args: argparse.Namespace) -> int:
    from wattsched.policies import UnavailablePolicy, available, policy_class

    for name in available():
        try:
            cls = policy_class(name)
        except UnavailablePolicy as exc:
            print(f"{name:12s} unavailable: {exc}")
            continue
        doc = (cls.__doc__ or "").strip().splitlines()[0] if cls.__doc__ else ""
        print(f"{name:12s} {doc}")
        for field, info in cls.Params.model_fields.items():
            print(f"{'':12s}   {field} = {info.default!r}: {info.description or ''}")
    return 0


def cmd_predict_evaluate(args: argparse.Namespace) -> int:
    """Replay a trace through power predictors (no scheduler) and report their MAE, overall and per user."""
    import time

    from wattsched.config import SimConfig, merge_overrides
    from wattsched.sim.evaluate import format_table, run_evaluation, split_params, write_outputs

    cli = {"trace": args.trace, "platform": args.platform, "procs": args.procs, "cores_per_node": args.cores_per_node,
           "seed": args.seed, "skip_bad_lines": args.skip_bad_lines}
    config = merge_overrides(SimConfig(trace=args.trace), cli, env=os.environ)
    names = args.predictor or ["history"]
    specs = split_params(names, args.param)
    evaluation = run_evaluation(config, specs, progress=not args.quiet, clock=time.perf_counter,
                                max_jobs=args.max_jobs)
    out = Path(args.out) if args.out else Path("runs") / f"{evaluation.info['trace']}-predict"
    write_outputs(evaluation, out)
    if args.json:
        print(json.dumps(evaluation.summary(), indent=2, default=str))
    else:
        info = evaluation.info
        print(f"{info['trace']}: {len(evaluation.users):,} jobs, {len(set(evaluation.users)):,} users"
              f"{', power augmented (seed ' + str(info['seed']) + ')' if info['power_augmented'] else ''}")
        print(format_table(evaluation))
        for label, entry in evaluation.summary()["predictors"].items():
            if entry.get("retrain_seconds_mean") is not None:
                print(f"{label}: {len(entry['retrainings'])} retrainings, {entry['retrain_seconds_mean']:.2f} s "
                      f"each on average (max {entry['retrain_seconds_max']:.2f} s)")
    print(f"wrote {out / 'summary.json'}, {out / 'per_user_mae.csv'}, {out / 'per_user_mae.png'}", file=sys.stderr)
    return 0


def build_parser(*, simulate_only: bool = False) -> argparse.ArgumentParser:
    """The parser of every command; with ``simulate_only``, of ``simulate`` alone (for :func:`main` when the
    command line is a ``simulate`` one: it parses it the same, without making, and importing, the other
    commands' parsers, a fiftieth of a short simulation)."""
    parser = Parser(
        prog="wattsched",
        description="Power-aware job dispatching for Slurm clusters: simulate policies on workload traces.",
        epilog=EPILOG,
    )
    parser.add_argument("--version", action="version", version=f"wattsched {__version__} ({_core_kind()})")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging (-vv for debug)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    _add_simulate_command(sub)
    if not simulate_only:
        _add_other_commands(sub)
    return parser


def _add_simulate_command(sub) -> None:
    p = sub.add_parser(
        "simulate",
        help="replay a workload trace through a policy under power constraints",
        description="Replay a workload trace through a policy, under a power cap or schedule, and write a run "
        "directory (summary.json, jobs.csv, timeline.csv, plots, report.html). Options override --config.",
        epilog="Example: wattsched simulate --trace KTH-SP2-1996-2.1-cln.swf --policy easy --cap 60% --out runs/kth",
    )
    _add_sim_options(p)
    _add_moldable_options(p)
    p.add_argument("--naive-cpu-w", type=finite_float(), metavar="W",
                   help="the naive strategy of an overprovisioned --platform (Sarood et al. 2014): every node at "
                   "CPU level W, as many nodes as the budget feeds (run it with --policy easy)")
    p.set_defaults(func=cmd_simulate, exit_at_once=True)


def _add_other_commands(sub) -> None:
    p = sub.add_parser("demo", help="simulate the bundled trace through a capped window and write a report",
                       description="Simulate the bundled trace excerpt (KTH SP2) with EASY+PC and the history "
                       "predictor through a one-week capped window, against uncapped EASY on the same jobs.")
    p.add_argument("--out", default="runs/demo", metavar="DIR", help="run directory (default runs/demo)")
    p.add_argument("--policy", metavar="NAME", help="policy instead of the demo's")
    p.add_argument("--cap", metavar="W|PCT", help="cap instead of the demo's")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_demo, exit_at_once=True)

    p = sub.add_parser("report", help="write report.html for a run directory",
                       description="Write a one-page, self-contained HTML report (plots embedded) for a run.")
    p.add_argument("run_dir", metavar="RUN_DIR")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("export", help="write a run's simulated schedule as SWF, Batsim/evalys jobs or a "
                       "spreadsheet-safe job table",
                       description="Write the simulated schedule of a run directory for other tools: SWF "
                       "(wait and run time filled in), Batsim's jobs CSV, which evalys reads, or the job table "
                       "with text cells that a spreadsheet would run as formulas quoted (csv-safe).",
                       epilog="Example: wattsched export runs/kth --format swf --out kth-easy.swf")
    p.add_argument("run_dir", metavar="RUN_DIR")
    p.add_argument("--format", choices=tuple(_EXPORT_FILES), required=True,
                   help="swf: Standard Workload Format; batsim: Batsim's _jobs.csv columns (evalys JobSet); "
                   "csv-safe: jobs.csv with text cells starting with =, +, -, @, tab or CR prefixed with ' "
                   "(for spreadsheets)")
    p.add_argument("--out", metavar="FILE", help="file to write (default RUN_DIR/schedule.swf, "
                   "RUN_DIR/batsim_jobs.csv or RUN_DIR/jobs-safe.csv); never a table of the run")
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("traces", help="inspect workload traces")
    tsub = p.add_subparsers(dest="traces_command", metavar="SUBCOMMAND", required=True)
    t = tsub.add_parser("info", help="jobs, span, machine size, missing fields, offered load, cleaning counts",
                        description="Read a trace the way `simulate` would and describe it.")
    t.add_argument("file", metavar="FILE")
    t.add_argument("--cores-per-node", type=_positive_int, default=1, metavar="C",
                   help="processors per node (default 1)")
    t.add_argument("--skip-bad-lines", action="store_true", help="skip malformed lines instead of stopping")
    t.add_argument("--json", action="store_true", help="print JSON")
    t.set_defaults(func=cmd_traces_info)
    t = tsub.add_parser("synth", help="generate a seeded synthetic workload as a job table",
                        description="Generate N jobs over a time window (Borghesi et al. 2018 §5 arrival patterns) "
                        "and write them as a job table that `simulate --trace` reads.")
    t.add_argument("--jobs", type=int_in(1, 10_000_000, "a number of jobs"), default=400, metavar="N",
                   help="number of jobs, at most 10 million (default 400)")
    t.add_argument("--window", type=finite_float(), default=900.0, metavar="S",
                   help="arrival window in seconds (default 900)")
    t.add_argument("--arrival", choices=["uniform", "left-skewed", "burst"], default="uniform",
                   help="arrival pattern (default uniform)")
    t.add_argument("--preset", choices=["borghesi2018"],
                   help="the instances of Borghesi et al. 2018 §5: Eurora's 64 nodes, jobs of 1-8 nodes, queues "
                   "with expected waits, application classes (see docs/simulator.md)")
    t.add_argument("--max-nodes", type=_positive_int, metavar="N",
                   help="machine size and largest job in nodes (default 64)")
    t.add_argument("--median-runtime", type=finite_float(), metavar="S",
                   help="median run time in seconds (lognormal; default 900)")
    t.add_argument("--hot-start", type=finite_float(), default=0.0, metavar="F",
                   help="share of the nodes busy at t=0 with jobs already running (0-1; the paper's HS, e.g. 0.7)")
    t.add_argument("--units", action="store_true",
                   help="make every job a job of units (the paper's §3): each unit asks 1-16 cores, 1-16 GB, and "
                   "for a quarter of the jobs 1-2 GPUs, for an eighth 1-2 MICs (see docs/simulator.md)")
    t.add_argument("--users", type=_positive_int, default=20, metavar="N",
                   help="number of users (Zipf-like; default 20)")
    t.add_argument("--seed", type=seed, default=0, help="seed (default 0)")
    t.add_argument("-o", "--out", required=True, metavar="FILE", help="job table to write (.csv, .csv.gz, .parquet)")
    _add_moldable_options(t)
    t.set_defaults(func=cmd_traces_synth)
    t = tsub.add_parser("augment", help="add seeded per-job power to a trace and write a job table",
                        description="Give every job of a trace without power a per-node mean, max and std power "
                        "and an application class (see docs/simulator.md), and write the result as a job table.")
    t.add_argument("file", metavar="FILE")
    t.add_argument("--platform", metavar="FILE|NAME", help="node power model to draw from (default: default)")
    t.add_argument("--cores-per-node", type=_positive_int, default=1, metavar="C",
                   help="processors per node (default 1)")
    t.add_argument("--skip-bad-lines", action="store_true", help="skip malformed lines instead of stopping")
    t.add_argument("--seed", type=seed, default=0, help="seed (default 0)")
    t.add_argument("--out", required=True, metavar="FILE", help="job table to write (.csv, .csv.gz, .parquet)")
    _add_moldable_options(t)
    t.set_defaults(func=cmd_traces_augment)
    from wattsched.daemon.twincommands import add_platform_commands, add_traces_import

    add_traces_import(tsub)
    from wattsched.sweep.cli import register as register_sweep

    register_sweep(sub, tsub)

    p = sub.add_parser("predict", help="evaluate job power predictors on a trace")
    psub = p.add_subparsers(dest="predict_command", metavar="SUBCOMMAND", required=True)
    t = psub.add_parser(
        "evaluate", help="MAE of mean, max and std power predictions, overall and per user",
        description="Replay a trace's jobs in time order without a scheduler (each job completes at submit + "
        "runtime, completions before submissions at equal times); every predictor estimates each job at its "
        "submission and learns its power at its completion. Traces without power are augmented as simulate "
        "does. Writes summary.json, per_user_mae.csv and per_user_mae.png.",
        epilog="Example: wattsched predict evaluate --trace KTH-SP2-1996-2.1-cln.swf --predictor naive "
        "--predictor history --predictor learned --param learned.model=random_forest --out runs/kth-predict",
    )
    t.add_argument("--trace", required=True, metavar="FILE",
                   help="SWF trace (.swf, .swf.gz) or job table (.csv, .csv.gz, .parquet)")
    t.add_argument("--platform", metavar="FILE|NAME", help="platform YAML or a packaged name")
    t.add_argument("--procs", type=_positive_int, metavar="N",
                   help="homogeneous machine of N processors instead of --platform")
    t.add_argument("--cores-per-node", type=_positive_int, metavar="C", help="processors per node (default 1)")
    t.add_argument("--skip-bad-lines", action="store_true", default=None,
                   help="skip and count malformed trace lines instead of stopping at the first")
    t.add_argument("--predictor", action="append", metavar="NAME",
                   help="predictor to evaluate, repeatable (naive, history, learned, per-user-tree, oracle; "
                   "default history)")
    t.add_argument("--param", action="append", type=_param, default=[], metavar="[NAME.]KEY=VALUE",
                   help="predictor parameter, repeatable: NAME.KEY=VALUE for one predictor, KEY=VALUE for every "
                   "predictor that has KEY (e.g. --param model=random_forest)")
    t.add_argument("--seed", type=seed, help="seed of the power augmentation (default 0)")
    t.add_argument("--max-jobs", type=_positive_int, metavar="N", help="evaluate only the first N jobs")
    t.add_argument("--out", metavar="DIR", help="output directory (default runs/TRACE-predict)")
    t.add_argument("--json", action="store_true", help="print the summary as JSON instead of a table")
    t.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    t.set_defaults(func=cmd_predict_evaluate)

    p = sub.add_parser("check-config", help="validate a config file",
                       description="Validate a YAML config; errors name the file, the key and the line.")
    p.add_argument("file", metavar="FILE")
    p.set_defaults(func=cmd_check_config)

    p = sub.add_parser("policies", help="list policies and their parameters")
    p.set_defaults(func=cmd_policies)

    from wattsched.agent.commands import add_commands as add_agent_commands
    from wattsched.daemon.commands import add_commands
    from wattsched.daemon.shadowreplay import add_shadow_commands
    from wattsched.drcommands import add_commands as add_dr_commands

    add_commands(sub)
    add_shadow_commands(sub)
    add_platform_commands(sub)
    add_agent_commands(sub)
    add_dr_commands(sub)


def _is_simulate(argv: list[str]) -> bool:
    """Whether ``argv`` runs ``simulate``: its first word not an option is ``simulate``, and only ``-v`` options
    (the one top-level option that neither takes a value nor prints and exits) come before it."""
    for word in argv:
        if word == "simulate":
            return True
        if word != "--verbose" and not (len(word) > 1 and word.startswith("-") and set(word[1:]) == {"v"}):
            return False
    return False


_SIM_DEFAULTS = argparse.Namespace()


def _core_kind() -> str:
    """How the simulation core runs, for ``--version``: compiled, or pure Python and why."""
    if _native.compiled_in_use():
        return "compiled simulation core"
    why = sorted({v for v in _native.status().values() if v != "compiled"})
    return "pure-Python simulation core: " + "; ".join(why) if why else "pure-Python simulation core"


BLAS_THREADS = "OPENBLAS_NUM_THREADS"
"""Set to 1 by :func:`main` unless given: numpy's OpenBLAS starts a thread per core at import that spins for a
tenth of a second of CPU, on the core the plot worker (or another run of a sweep) needs, for matrix products
wattsched does not make (its predictors' models are small)."""


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault(BLAS_THREADS, "1")  # before numpy is imported
    words = sys.argv[1:] if argv is None else argv
    parser = build_parser(simulate_only=_is_simulate(words))
    args = parser.parse_args(argv)
    level = logging.WARNING - 10 * min(args.verbose, 2)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    rc = _run_command(args)
    if argv is None and getattr(args, "exit_at_once", False):
        _exit_at_once(rc)
    return rc


def _run_command(args: argparse.Namespace) -> int:
    """Run the command; the one error boundary of every command.

    An error that bad input causes (:func:`wattsched.errors.describe`: wattsched's
    own, a damaged SQLite file, undecodable text, an OS error, a parser's
    ValueError, memory exhausted) ends the command with one
    ``wattsched: error: FILE: what is wrong`` line and exit status 2; its
    traceback only with ``-vv``. Any other exception is a bug and propagates.
    """
    try:
        return args.func(args)
    except KeyboardInterrupt:
        print("wattsched: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # output piped into a command that stopped reading (| head)
        sys.stderr.close()
        return 0
    except Exception as exc:
        message = describe(exc)
        if message is None:
            raise
        if getattr(args, "verbose", 0) >= 2:
            import traceback

            traceback.print_exception(exc, file=sys.stderr)
        print(f"wattsched: error: {message}", file=sys.stderr)
        return 2


def _exit_at_once(rc: int) -> None:
    """End the process now, without the interpreter's finalisation (a twentieth of a short simulation).

    Only for commands that, when they return, have closed every file, joined
    every thread and ended every child process (``simulate``, ``demo``), and
    only when run as the program (``argv`` not given), never inside a caller's
    interpreter.
    """
    import contextlib
    import os

    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # closed, or a reader that went away
            stream.flush()
    os._exit(rc)


def _init_sim_defaults() -> None:
    p = Parser()
    _add_sim_options(p)
    for k, v in vars(p.parse_args([])).items():
        setattr(_SIM_DEFAULTS, k, v)


_init_sim_defaults()
