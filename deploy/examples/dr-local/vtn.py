#!/usr/bin/env python3
"""A loopback OpenADR 2.0b VTN for trying wattsched's demand response on a laptop (openleadr's OpenADRServer).

It registers any VEN, subscribes to its TELEMETRY_USAGE report of measured platform
power, and ``--send-after`` seconds after the VEN registered (time for the simulated
cluster to fill) sends it one event: a LOAD_DISPATCH setpoint (a platform power limit
in W) starting ``--start-in`` seconds later and lasting ``--duration`` seconds. It prints one line per thing that happens (registration,
the event sent, the VEN's opt answer, each power report) and runs until stopped.

    python deploy/examples/dr-local/vtn.py              # then, in another terminal:
    wattsched daemon -c deploy/examples/dr-local/wattsched.yaml

For trials only: plain HTTP on loopback, no certificates, no signatures (the
daemon's config says ``allow_unsigned_events: true``). openleadr comes with
``pip install 'wattsched[openadr]'``.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import logging
import signal
import sys


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--port", type=int, default=8090, help="port on 127.0.0.1 (default 8090)")
    p.add_argument("--limit-w", type=float, default=1400.0,
                   help="the event's platform power limit in W, sent as a LOAD_DISPATCH setpoint (default 1400)")
    p.add_argument("--send-after", type=float, default=10.0,
                   help="seconds from the VEN's registration to sending the event (default 10)")
    p.add_argument("--start-in", type=float, default=15.0,
                   help="seconds from sending the event to its start: the notice (default 15)")
    p.add_argument("--duration", type=float, default=300.0, help="the event's length in seconds (default 300)")
    p.add_argument("--poll", type=float, default=2.0, help="how often the VEN is asked to poll, in s (default 2)")
    args = p.parse_args(argv)
    try:
        from openleadr import OpenADRServer
    except ImportError:
        print("vtn.py needs openleadr: pip install 'wattsched[openadr]'", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("openleadr").setLevel(logging.WARNING)  # it logs every message it answers at INFO

    def say(text: str) -> None:
        print(f"{dt.datetime.now():%H:%M:%S} vtn: {text}", flush=True)

    server = OpenADRServer(vtn_id="dr-local-vtn", http_host="127.0.0.1", http_port=args.port,
                           requested_poll_freq=dt.timedelta(seconds=args.poll), show_fingerprint=False,
                           verify_message_signatures=False)
    vens: dict[str, str] = {}

    def on_register(info: dict):
        ven_id = f"ven-{len(vens) + 1}"
        vens[ven_id] = info["ven_name"]
        say(f"registered VEN {info['ven_name']!r} as {ven_id}; the event follows in {args.send_after:g} s")
        asyncio.get_running_loop().call_later(args.send_after, send_event, ven_id, f"dr-local-{len(vens)}")
        return ven_id, f"reg-{ven_id}"

    def send_event(ven_id: str, event_id: str) -> None:
        start = dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=args.start_in)
        server.add_event(ven_id=ven_id, signal_name="LOAD_DISPATCH", signal_type="setpoint",
                         intervals=[{"dtstart": start, "duration": dt.timedelta(seconds=args.duration),
                                     "signal_payload": args.limit_w}],
                         callback=on_opt, event_id=event_id)
        say(f"event {event_id} for {ven_id}: LOAD_DISPATCH setpoint {args.limit_w:g} W from "
            f"{start.astimezone():%H:%M:%S} for {args.duration:g} s (delivered at the VEN's next poll)")

    def on_opt(ven_id: str, event_id: str, opt_type: str) -> None:
        say(f"{ven_id} answered {opt_type} to {event_id}")

    def on_register_report(ven_id, resource_id, measurement, unit, scale, min_sampling_interval,
                           max_sampling_interval):
        say(f"subscribing to {ven_id}'s {measurement} report of {resource_id}")
        return on_report, min_sampling_interval

    def on_report(data) -> None:
        for when, value in data:
            say(f"report: measured platform power {value:,.0f} W at {when.astimezone():%H:%M:%S}")

    server.add_handler("on_create_party_registration", on_register)
    server.add_handler("on_register_report", on_register_report)

    async def run() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await server.run()
        say(f"listening on http://127.0.0.1:{args.port}/OpenADR2/Simple/2.0b")
        await stop.wait()
        await server.stop()
        say("stopped")

    asyncio.run(run())
    return 0


if __name__ == "__main__":
    sys.exit(main())
