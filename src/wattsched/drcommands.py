"""Commands for demand response: ``wattsched models fit`` and ``wattsched dr-events generate``."""

from __future__ import annotations

import argparse
import json
import math
import sys

from wattsched.errors import ConfigError


def cmd_models_fit(args: argparse.Namespace) -> int:
    """Fit Eqs. 1-2 per application and print the coefficients and the fit errors."""
    if args.model == "pass":
        return _fit_pass(args)
    if args.power_model is not None:
        raise ConfigError("--power-model: only for --model pass (the ahmed2017 models fit power from power_w)")
    from wattsched.appmodels import fit_models, packaged_fits, read_measurements

    fits = packaged_fits() if args.file == "packaged" else fit_models(read_measurements(args.file), args.file)
    if args.json:
        print(json.dumps({app: {**f.spec(), "power_error": f.power_error, "time_error": f.time_error,
                                "points": f.points} for app, f in fits.items()}, indent=2))
        return 0
    print(f"{'app':<12} {'points':>6} {'power err':>9} {'time err':>9}  p(f) = a + b f + c f^2 + d f^3 (W); "
          "t(f) = alpha + beta f + gamma f^2 (s)")
    for app, f in fits.items():
        m = f.model
        print(f"{app:<12} {f.points:>6} {100 * f.power_error:>8.2f}% {100 * f.time_error:>8.2f}%  "
              f"p: {m.a:.4g} {m.b:+.4g} f {m.c:+.4g} f^2 {m.d:+.4g} f^3;  t: {m.alpha:.5g} {m.beta:+.5g} f "
              f"{m.gamma:+.5g} f^2  [{m.f_min_ghz:g}, {m.f_max_ghz:g}] GHz")
    if args.platform_snippet:
        import yaml

        print("\n# response_classes of a platform file:")
        print(yaml.safe_dump({"response_classes": {app: f.spec() for app, f in fits.items()}},
                             default_flow_style=None, sort_keys=False), end="")
    return 0


def _fit_pass(args: argparse.Namespace) -> int:
    """Fit PASS (Sarood et al. 2014) per application and print the parameters and the fit errors."""
    from wattsched.scalingmodels import fit_pass, read_pass_measurements

    if args.file == "packaged":
        raise ConfigError("packaged: there are no packaged PASS measurements (the packaged Table IV models are "
                          "parameters, not points); give a CSV of app,nodes,cpu_power_w,time_s[,freq_ghz] rows")
    if args.platform_snippet:
        raise ConfigError("--platform-snippet: PASS models are not platform response classes; use --json")
    fits = fit_pass(read_pass_measurements(args.file), args.file, args.power_model)
    if args.json:
        print(json.dumps({app: f.spec() for app, f in fits.items()}, indent=2))
        return 0
    print(f"{'app':<12} {'points':>6} {'time err':>8}  p = a f^3 + b f + c (W, f in GHz); p_l, p_h (W); beta; "
          "Downey's A, sigma, T1 (s)")
    for app, f in fits.items():
        downey = (f"A {f.A:.4g}  sigma {f.sigma:.4g}  T1 {f.T1:.6g}" if f.T1 is not None else
                  "A, sigma, T1 not fitted (fewer than 3 node counts); T_h by nodes: "
                  + ", ".join(f"{n:g}: {t:.6g}" for n, t in f.t_h_by_nodes.items()))
        print(f"{app:<12} {f.points:>6} {100 * f.time_error:>7.2f}%  a {f.a:.4g}  b {f.b:.4g}  c {f.c:.4g}  "
              f"p_l {f.p_l:g}  p_h {f.p_h:.4g}  beta {f.beta:.4f}  {downey}")
    return 0


def _power_model(text: str) -> tuple[float, float, float]:
    try:
        values = tuple(float(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"give three numbers A,B,C, got {text!r}") from None
    if len(values) != 3 or not all(math.isfinite(v) for v in values) or values[0] <= 0 or min(values) < 0:
        raise argparse.ArgumentTypeError(f"give three numbers A,B,C with A > 0 and B, C >= 0, got {text!r}")
    return values


def cmd_dr_events_generate(args: argparse.Namespace) -> int:
    """Write random demand-response events covering a share of a trace's span (or of --span seconds)."""
    from wattsched.sim.drevents import generate_events

    if args.span is None and args.trace is None:
        raise ConfigError("--span: give the time span with --span S or a trace with --trace FILE")
    span = args.span
    if span is None:
        from wattsched.workload.open import open_trace

        wl = open_trace(args.trace)
        first = last = None
        for job in wl.jobs:  # streamed: a trace of any size in bounded memory
            first = job.submit_s if first is None else min(first, job.submit_s)
            last = job.submit_s if last is None else max(last, job.submit_s)
        if first is None:
            raise ConfigError(f"{args.trace}: no jobs")
        span = last - first
    events = generate_events(span, args.ratio, events=args.events, notice_s=args.notice, cap=args.cap,
                             seed=args.seed, max_events=args.max_events)
    import yaml  # here: every command imports this module, few print YAML

    text = yaml.safe_dump({"demand_response": events}, sort_keys=False, default_flow_style=None)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text)
        print(f"wrote {len(events)} events to {args.out}", file=sys.stderr)
    else:
        print(text, end="")
    return 0


def _ratio(text: str) -> float:
    try:
        v = float(text.rstrip("%")) / (100 if text.endswith("%") else 1)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 < v <= 1:
        raise argparse.ArgumentTypeError(f"must be in (0, 1] (or 1%..100%), got {text}")
    return v


def add_commands(sub) -> None:
    from wattsched.cliargs import positive_int
    from wattsched.sim.drevents import MAX_EVENTS

    p = sub.add_parser("models", help="application power/time models (Ahmed et al. 2017; PASS, Sarood et al. 2014)")
    msub = p.add_subparsers(dest="models_command", metavar="SUBCOMMAND", required=True)
    t = msub.add_parser(
        "fit", help="fit application models per application from measurements",
        description="--model ahmed2017 (default): fit p(f) = a + b f + c f^2 + d f^3 and t(f) = alpha + beta f + "
        "gamma f^2 (f in GHz) per application from a CSV with columns app,freq_ghz,power_w,time_s; FILE "
        "'packaged' fits the packaged measurements of QE, Gadget, Seissol and WaLBerla. --model pass: fit the "
        "power-aware strong scaling model (Sarood et al. 2014) from a CSV with columns "
        "app,nodes,cpu_power_w,time_s and optionally freq_ghz. Each fit reports its mean relative error.",
        epilog="Examples: wattsched models fit measurements.csv --platform-snippet; "
        "wattsched models fit --model pass --power-model 1.65,7.74,13.5 scaling.csv")
    t.add_argument("file", metavar="FILE", help="CSV of measurements, or 'packaged'")
    t.add_argument("--model", choices=("ahmed2017", "pass"), default="ahmed2017",
                   help="which model to fit (default ahmed2017)")
    t.add_argument("--power-model", type=_power_model, metavar="A,B,C",
                   help="pass: the CPU power model p = A f^3 + B f + C, when the CSV has no freq_ghz column")
    t.add_argument("--json", action="store_true", help="print the fits as JSON")
    t.add_argument("--platform-snippet", action="store_true",
                   help="also print the fits as the response_classes block of a platform file")
    t.set_defaults(func=cmd_models_fit)

    p = sub.add_parser("dr-events", help="demand-response event files for replay")
    dsub = p.add_subparsers(dest="dr_events_command", metavar="SUBCOMMAND", required=True)
    t = dsub.add_parser(
        "generate", help="random events covering a share of a run (seeded)",
        description="Write demand-response events that cover a given share of a time span at random, "
        "non-overlapping times (seeded), for `wattsched simulate --dr-events FILE`.",
        epilog="Example: wattsched dr-events generate --trace SDSC-Par-1996-3.1-cln.swf --ratio 25%% --cap 80%% "
        "--notice 3600 -o events.yaml")
    t.add_argument("--trace", metavar="FILE", help="take the span from this trace's submissions")
    t.add_argument("--span", type=float, metavar="S", help="time span in seconds instead of a trace")
    t.add_argument("--ratio", type=_ratio, default=0.25, metavar="R", help="share of the span under events "
                   "(0.25 or 25%%; default 25%%)")
    t.add_argument("--events", type=int, default=1, metavar="N", help="number of events (default 1; at most "
                   "--max-events)")
    t.add_argument("--max-events", type=positive_int, default=MAX_EVENTS, metavar="N",
                   help=f"refuse more than N events (default {MAX_EVENTS:,})")
    t.add_argument("--notice", type=float, default=0.0, metavar="S", help="notice before each event, seconds")
    t.add_argument("--cap", default="80%", metavar="W|PCT", help="target cap of each event (default 80%%)")
    t.add_argument("--seed", type=int, default=0, help="seed (default 0)")
    t.add_argument("-o", "--out", metavar="FILE", help="write here instead of standard output")
    t.set_defaults(func=cmd_dr_events_generate)
