"""A test BMC that speaks DCMI power management over RMCP+ (``ipmitool -I lanplus -C 3``), on loopback.

OpenIPMI's ``ipmi_sim`` answers every DCMI command with 0xC1 (REFERENCE-slurm-power.md
§5.3), so the daemon's :mod:`wattsched.daemon.ipmi` actuator is tested against this
instead: a :class:`pyghmi.ipmi.bmc.Bmc` (pyghmi does the RMCP+ session, cipher
suite 3 only) whose ``handle_raw_request`` (see :func:`make_dcmi_bmc`) adds the DCMI group
extension (NetFn 0x2C, group extension id 0xDC as the first data byte of every
request and response):

====  ==========================  ===================================================
cmd   command                     ``ipmitool dcmi ...``
====  ==========================  ===================================================
0x01  Get DCMI Capabilities Info  ``discover``
0x02  Get Power Reading           ``power reading``
0x03  Get Power Limit             ``power get_limit`` (and the first half of ``set_limit``)
0x04  Set Power Limit             ``power set_limit <action|limit|correction|sample> <v>``
0x05  Activate/Deactivate limit   ``power activate`` / ``power deactivate``
====  ==========================  ===================================================

The byte layouts follow ipmitool's ``lib/ipmi_dcmi.c`` and the packed structs
``power_reading``, ``power_limit`` and ``capabilities`` of
``include/ipmitool/ipmi_dcmi.h`` (all multi-byte fields little-endian).
:class:`DcmiState` holds the node's state and encodes the answers; it does no I/O,
so it is tested without a network.

The node draws ``power_w``; while a limit is active it reports
``min(power_w, limit_w)``, as a capped node would.

Run it on its own::

    python -m wattsched.testing.fake_bmc --port 9623 --user admin --password-file pw.txt --power-w 300
    ipmitool -I lanplus -H 127.0.0.1 -p 9623 -U admin -f pw.txt -C 3 dcmi power reading

``--port 0`` picks a free port; the first line printed is
``listening on 127.0.0.1:PORT``. :func:`start_test_bmc` runs one in a subprocess
for tests.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import os
import struct
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path

__all__ = [
    "DCMI_GROUP", "NETFN_DCMI", "DcmiState", "TestBmcProcess", "main", "make_dcmi_bmc", "serve", "start_test_bmc",
]

NETFN_DCMI = 0x2C
"""NetFn of the group extensions (IPMI 2.0 table 5-1); DCMI is group 0xDC in it."""

DCMI_GROUP = 0xDC
"""DCMI's group extension identification: the first byte of every DCMI request and response."""

CMD_CAPABILITIES = 0x01
CMD_POWER_READING = 0x02
CMD_GET_LIMIT = 0x03
CMD_SET_LIMIT = 0x04
CMD_ACTIVATE = 0x05

CC_OK = 0x00
CC_NO_ACTIVE_LIMIT = 0x80
"""Get Power Limit's "No Active Set Power Limit": the data still follows (ipmitool treats it as success)."""
CC_PARAM_NOT_SUPPORTED = 0x80
CC_LIMIT_OUT_OF_RANGE = 0x84
CC_INVALID_COMMAND = 0xC1
CC_BAD_LENGTH = 0xC7
CC_INVALID_FIELD = 0xCC

# Exception actions of Set Power Limit: no action, hard power off + SEL, OEM 02h-10h, SEL only.
_ACTIONS = frozenset(range(0x00, 0x12))

_STATS_WINDOW = 64  # readings kept for the min/max/average of Get Power Reading


class DcmiState:
    """One node's DCMI power state and the encoding of the five commands.

    Parameters
    ----------
    power_w
        What the node draws uncapped, in watts.
    min_limit_w, max_limit_w
        Limits outside this range are refused with 0x84 (Power Limit out of range),
        as real BMCs do for limits below their idle floor.
    clock
        Returns the time in seconds since the epoch (the IPMI timestamp of a reading).

    Examples
    --------
    >>> s = DcmiState(power_w=300, clock=lambda: 1_700_000_000.0)
    >>> s.handle(CMD_SET_LIMIT, bytes([0xDC, 0, 0, 0, 0, 250, 0, 0, 0, 0, 0, 0, 0, 1, 0]))
    (0, b'\\xdc')
    >>> s.handle(CMD_ACTIVATE, bytes([0xDC, 1, 0, 0]))
    (0, b'\\xdc')
    >>> s.reported_power_w()
    250
    """

    def __init__(
        self,
        power_w: int = 300,
        *,
        min_limit_w: int = 0,
        max_limit_w: int = 0xFFFF,
        clock: Callable[[], float] = time.time,
    ):
        self.power_w = int(power_w)
        self.min_limit_w = min_limit_w
        self.max_limit_w = max_limit_w
        self.clock = clock
        self.limit_w = 0
        self.active = False
        self.exception_action = 0
        self.correction_ms = 0
        self.sample_s = 0
        self._samples: collections.deque[tuple[float, int]] = collections.deque(maxlen=_STATS_WINDOW)
        self.lock = threading.Lock()

    def __repr__(self) -> str:
        return (f"DcmiState(power_w={self.power_w}, limit_w={self.limit_w}, active={self.active}, "
                f"exception_action={self.exception_action:#04x})")

    def reported_power_w(self) -> int:
        """What the node draws now: ``power_w``, held under the limit while one is active."""
        return min(self.power_w, self.limit_w) if self.active else self.power_w

    # ------------------------------------------------------------------ dispatch

    def handle(self, command: int, data: bytes) -> tuple[int, bytes]:
        """Answer one DCMI request: ``(completion code, response data after the code)``."""
        data = bytes(data)
        handler = {
            CMD_CAPABILITIES: self._capabilities,
            CMD_POWER_READING: self._power_reading,
            CMD_GET_LIMIT: self._get_limit,
            CMD_SET_LIMIT: self._set_limit,
            CMD_ACTIVATE: self._activate,
        }.get(command)
        if handler is None:
            return CC_INVALID_COMMAND, b""
        if not data:
            return CC_BAD_LENGTH, b""
        if data[0] != DCMI_GROUP:
            return CC_INVALID_FIELD, b""
        with self.lock:
            return handler(data)

    # ------------------------------------------------------------------ commands

    def _capabilities(self, data: bytes) -> tuple[int, bytes]:
        # Response: group id, conformance (uint16 LE: 0x0501 = DCMI 1.5), parameter revision 02h, then
        # the parameter's bytes, read by ipmitool as data_byte1..4 of struct capabilities.
        if len(data) != 2:
            return CC_BAD_LENGTH, b""
        head = bytes([DCMI_GROUP]) + struct.pack("<H", 0x0501) + bytes([0x02])
        params = {
            # supported capabilities: byte 2 bit 0 power management, byte 3 bit 3 primary LAN OOB channel
            0x01: bytes([0x00, 0x01, 0x08]),
            # mandatory attributes: no SEL (0 entries, no rollover), identification: GUID, no temperature sensors
            0x02: bytes([0x00, 0x00, 0x01, 0x00]),
            # optional attributes: power management controller at slave address 40h (the BMC), channel 0, rev 0
            0x03: bytes([0x40, 0x00]),
            # manageability access: primary LAN channel 1; no secondary LAN, no serial
            0x04: bytes([0x01, 0xFF, 0xFF]),
        }
        body = params.get(data[1])
        if body is None:
            return CC_PARAM_NOT_SUPPORTED, bytes([DCMI_GROUP])
        return CC_OK, head + body

    def _power_reading(self, data: bytes) -> tuple[int, bytes]:
        # Request: group id, mode (01h system power statistics), mode attributes, reserved.
        # Response (struct power_reading): group id, current, minimum, maximum, average (uint16 W each),
        # IPMI timestamp (uint32 s), reporting period (uint32 ms), state (bit 6: power measurement active).
        if len(data) != 4:
            return CC_BAD_LENGTH, b""
        if data[1] != 0x01:
            return CC_INVALID_FIELD, b""
        now = self.clock()
        current = self.reported_power_w()
        self._samples.append((now, current))
        values = [v for _, v in self._samples]
        period_ms = round((now - self._samples[0][0]) * 1000)
        avg = round(sum(values) / len(values))
        body = struct.pack(
            "<BHHHHIIB", DCMI_GROUP, current, min(values), max(values), avg, int(now) & 0xFFFFFFFF,
            min(period_ms, 0xFFFFFFFF), 0x40,
        )
        return CC_OK, body

    def _limit_body(self) -> bytes:
        # struct power_limit: group id, 2 reserved, exception action, limit (uint16 W),
        # correction time (uint32 ms), 2 reserved, statistics sampling period (uint16 s).
        return struct.pack(
            "<BHBHIHH", DCMI_GROUP, 0, self.exception_action, self.limit_w, self.correction_ms, 0, self.sample_s
        )

    def _get_limit(self, data: bytes) -> tuple[int, bytes]:
        if len(data) != 3:
            return CC_BAD_LENGTH, b""
        return (CC_OK if self.active else CC_NO_ACTIVE_LIMIT), self._limit_body()

    def _set_limit(self, data: bytes) -> tuple[int, bytes]:
        # Request: group id, 3 reserved, exception action, limit (uint16 W), correction time (uint32 ms),
        # 2 reserved, statistics sampling period (uint16 s): 15 bytes.
        if len(data) != 15:
            return CC_BAD_LENGTH, b""
        _, _r1, _r2, _r3, action, limit, correction, _r4, sample = struct.unpack("<BBBBBHIHH", data)
        if action not in _ACTIONS:
            return CC_INVALID_FIELD, b""
        if not self.min_limit_w <= limit <= self.max_limit_w:
            return CC_LIMIT_OUT_OF_RANGE, b""
        self.exception_action = action
        self.limit_w = limit
        self.correction_ms = correction
        self.sample_s = sample
        return CC_OK, bytes([DCMI_GROUP])

    def _activate(self, data: bytes) -> tuple[int, bytes]:
        # Request: group id, 00h deactivate / 01h activate, 2 reserved.
        if len(data) != 4:
            return CC_BAD_LENGTH, b""
        if data[1] not in (0, 1):
            return CC_INVALID_FIELD, b""
        self.active = data[1] == 1
        return CC_OK, bytes([DCMI_GROUP])


def _pyghmi_bmc_class():
    # Imported here so that `import wattsched.testing.fake_bmc` (and DcmiState) works without pyghmi.
    from pyghmi.ipmi.bmc import Bmc

    class _DcmiBmc(Bmc):
        """pyghmi's RMCP+ BMC with the DCMI group extension added (see the module docstring)."""

        def __init__(self, authdata, state: DcmiState, port: int = 623, address: str = "127.0.0.1"):
            super().__init__(authdata, port=port, address=address)
            # pyghmi routes packets by the port in self.port; with port 0 that is the one bound.
            self.port = self.serversocket.getsockname()[1]
            self.state = state
            self.powerstate = "on"

        def __repr__(self) -> str:  # authdata holds the password: never show it
            return f"DcmiBmc(port={self.port}, state={self.state!r})"

        def get_power_state(self):
            return self.powerstate

        def power_on(self):
            self.powerstate = "on"

        def power_off(self):
            self.powerstate = "off"

        def get_system_guid(self):
            return self.uuid

        def handle_raw_request(self, request, session):
            if request["netfn"] == NETFN_DCMI and request["data"][:1] == bytes([DCMI_GROUP]):
                try:
                    code, body = self.state.handle(request["command"], request["data"])
                except Exception:  # a bug here must not kill the BMC: answer "unspecified error"
                    traceback.print_exc()
                    code, body = 0xFF, b""
                return session.send_ipmi_response(data=list(body), code=code)
            return super().handle_raw_request(request, session)

    _DcmiBmc.__name__ = _DcmiBmc.__qualname__ = "DcmiBmc"
    return _DcmiBmc


def make_dcmi_bmc(authdata, state: DcmiState, port: int = 623, address: str = "127.0.0.1"):
    """A BMC (a ``pyghmi.ipmi.bmc.Bmc`` subclass) serving ``state`` on UDP ``address:port`` (0: any free port).

    ``authdata`` maps user names to passwords. Call :func:`serve` to answer requests.
    """
    return _pyghmi_bmc_class()(authdata, state, port=port, address=address)


def serve(stop: threading.Event | None = None, poll_s: float = 0.5) -> None:
    """Answer requests for every BMC created in this process until ``stop`` is set (forever if ``None``)."""
    from pyghmi.ipmi.private.session import Session

    while stop is None or not stop.is_set():
        Session.wait_for_rsp(timeout=poll_s)


# ---------------------------------------------------------------------- subprocess helper


class TestBmcProcess:
    """A test BMC running in a subprocess: ``host``, ``port``, ``user``; :meth:`stop` ends it."""

    __test__ = False  # not a pytest test class

    def __init__(self, proc: subprocess.Popen, host: str, port: int, user: str):
        self.proc = proc
        self.host = host
        self.port = port
        self.user = user
        self.stderr_tail: collections.deque[str] = collections.deque(maxlen=200)
        # drain the child's output so that a chatty BMC never blocks on a full pipe
        self._drains = [threading.Thread(target=_drain, args=(stream, sink), daemon=True)
                        for stream, sink in ((proc.stdout, None), (proc.stderr, self.stderr_tail))]
        for t in self._drains:
            t.start()

    def __repr__(self) -> str:
        return f"TestBmcProcess(pid={self.proc.pid}, host={self.host!r}, port={self.port}, user={self.user!r})"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for t in self._drains:
            t.join(timeout=2)  # the pipes reach end of file once the child is gone
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()

    def __enter__(self) -> TestBmcProcess:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def start_test_bmc(
    password_file: str | os.PathLike,
    *,
    user: str = "admin",
    power_w: int = 300,
    port: int = 0,
    host: str = "127.0.0.1",
    extra_args: Sequence[str] = (),
    timeout_s: float = 15.0,
) -> TestBmcProcess:
    """Start ``python -m wattsched.testing.fake_bmc`` and wait until it listens.

    The password is read by the child from ``password_file``; it is never on a command line.
    """
    cmd = [sys.executable, "-m", "wattsched.testing.fake_bmc", "--host", host, "--port", str(port), "--user", user,
           "--password-file", str(password_file), "--power-w", str(power_w), *extra_args]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    ready: list[str] = []
    reader = threading.Thread(target=lambda: ready.append(proc.stdout.readline()), daemon=True)
    reader.start()
    reader.join(timeout_s)
    line = ready[0] if ready else ""
    if not line.startswith("listening on "):
        proc.kill()
        _, err = proc.communicate()
        raise RuntimeError(f"the test BMC did not start: {line.strip() or 'no output'}; {err.strip()}")
    bound_port = int(line.rsplit(":", 1)[1])
    return TestBmcProcess(proc, host, bound_port, user)


def _drain(stream, sink) -> None:
    with contextlib.suppress(ValueError, OSError):
        for line in stream:
            if sink is not None:
                sink.append(line)


# ---------------------------------------------------------------------- command line


def _read_password(path: str) -> str:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise SystemExit(f"fake_bmc: cannot read the password file {path}: {exc.strerror}") from None
    password = text.splitlines()[0] if text else ""
    if not password:
        raise SystemExit(f"fake_bmc: the password file {path} is empty")
    return password


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m wattsched.testing.fake_bmc",
        description="A test BMC on loopback answering ipmitool's DCMI power commands over lanplus (-C 3).",
    )
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=9623, help="UDP port; 0 picks a free one (default 9623)")
    p.add_argument("--user", default="admin", help="the one user name accepted (default admin)")
    p.add_argument("--password-file", required=True, help="file whose first line is the user's password")
    p.add_argument("--power-w", type=int, default=300, help="what the node draws uncapped (default 300)")
    p.add_argument("--min-limit-w", type=int, default=0, help="smallest limit accepted (default 0)")
    p.add_argument("--max-limit-w", type=int, default=0xFFFF, help="largest limit accepted (default 65535)")
    args = p.parse_args(argv)

    password = _read_password(args.password_file)
    state = DcmiState(args.power_w, min_limit_w=args.min_limit_w, max_limit_w=args.max_limit_w)
    bmc = make_dcmi_bmc({args.user: password}, state, port=args.port, address=args.host)
    print(f"listening on {args.host}:{bmc.port}", flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        serve()
    return 0


if __name__ == "__main__":
    sys.exit(main())
