"""The IPMI actuator: credentials files, password hygiene, and DCMI power limits through the real ipmitool.

The ipmitool tests run Debian's ipmitool against :mod:`wattsched.daemon.testbmc`
(pyghmi's RMCP+ BMC plus DCMI) in a subprocess on 127.0.0.1; they are skipped
when ipmitool is not installed.
"""

from __future__ import annotations

import logging
import os
import pickle
import shutil
import socket
import subprocess
import time

import pytest

from wattsched.daemon import ipmi as ipmi_mod
from wattsched.daemon.ipmi import (
    BmcEndpoint,
    InvalidPowerLimit,
    IpmiActuator,
    IpmiCredentials,
    IpmiError,
    PowerLimit,
    Secret,
    check_watts,
    parse_power_limit,
    parse_power_reading,
    redact,
)
from wattsched.daemon.testbmc import (
    CC_BAD_LENGTH,
    CC_INVALID_COMMAND,
    CC_INVALID_FIELD,
    CC_LIMIT_OUT_OF_RANGE,
    CC_NO_ACTIVE_LIMIT,
    CMD_ACTIVATE,
    CMD_CAPABILITIES,
    CMD_GET_LIMIT,
    CMD_POWER_READING,
    CMD_SET_LIMIT,
    DcmiState,
    start_test_bmc,
)
from wattsched.errors import ConfigError, WattschedError

IPMITOOL = shutil.which("ipmitool")
needs_ipmitool = pytest.mark.skipif(
    IPMITOOL is None,
    reason="ipmitool is not installed (apt-get install ipmitool): these tests run the real client against the test BMC",
)

PASSWORD = "Pw-7f3Kq#unique=x"  # distinctive, so any leak is found by a plain substring search
WRONG_PASSWORD = "Wrong-9zR4#other"


def write_file(path, text: str, mode: int = 0o600):
    path.write_text(text)
    os.chmod(path, mode)
    return path


def kv_credentials(tmp_path, port: int = 623, password: str = PASSWORD, name: str = "ipmi.cred"):
    text = (f"# BMCs\nusername=admin\npassword={password}\ncipher_suite=3\n"
            f"node1.host=127.0.0.1\nnode1.port={port}\n")
    return IpmiCredentials.load(write_file(tmp_path / name, text))


class FakeRun:
    """Stands in for subprocess.run: records argv and environment, answers from a list."""

    def __init__(self, *answers):
        self.answers = list(answers)
        self.calls: list[tuple[list[str], dict]] = []

    def __call__(self, cmd, **kwargs):
        self.calls.append((list(cmd), kwargs))
        answer = self.answers.pop(0) if self.answers else (0, "", "")
        if isinstance(answer, BaseException):
            raise answer
        rc, out, err = answer
        return subprocess.CompletedProcess(cmd, rc, out, err)


def never_run(*args, **kwargs):
    raise AssertionError("ipmitool must not run")


def assert_no_password(*texts, password: str = PASSWORD):
    for text in texts:
        assert password not in str(text)


# ipmitool 1.8.19 output captured against the test BMC (the timestamp line has no line break: an ipmitool quirk)
READING_OUT = """
    Instantaneous power reading:                   250 Watts
    Minimum during sampling period:                250 Watts
    Maximum during sampling period:                300 Watts
    Average power reading over sample period:      275 Watts
    IPMI timestamp:                           11/22/26 03:18:29 UTC    Sampling period:     00000000 Seconds.
    Power reading state is:                   activated

"""
LIMIT_ACTIVE_OUT = """
    Current Limit State: Power Limit Active
    Exception actions:   Hard Power Off & Log Event to SEL
    Power Limit:         250 Watts
    Correction time:     6000 milliseconds
    Sampling period:     5 seconds

"""
LIMIT_INACTIVE_OUT = LIMIT_ACTIVE_OUT.replace("Power Limit Active", "No Active Power Limit")


# --------------------------------------------------------------------------- credentials file


def test_key_value_file_gives_defaults_and_per_node_overrides(tmp_path):
    path = write_file(tmp_path / "ipmi.cred", (
        "# comment\nusername=admin\npassword=" + PASSWORD + "\n\n"
        "n1.host=10.1.0.1\n"
        "n2.host=bmc-n2.example\nn2.port=6230\nn2.username=root\nn2.password='a#b=c'\nn2.cipher_suite=17\n"
    ))
    creds = IpmiCredentials.load(path)
    assert creds.nodes == ["n1", "n2"]
    n1, n2 = creds.endpoint("n1"), creds.endpoint("n2")
    assert (n1.host, n1.port, n1.username, n1.cipher_suite, n1.interface) == ("10.1.0.1", 623, "admin", 3, "lanplus")
    assert n1.password.reveal() == PASSWORD
    assert (n2.host, n2.port, n2.username, n2.cipher_suite) == ("bmc-n2.example", 6230, "root", 17)
    assert n2.password.reveal() == "a#b=c"


def test_yaml_file_gives_the_same_structure(tmp_path):
    path = write_file(tmp_path / "ipmi.yaml", (
        f'username: admin\npassword: "{PASSWORD}"\nport: 6230\n'
        "nodes:\n  n1: {host: 10.1.0.1}\n  n2: {host: 10.1.0.2, port: 623, password: other}\n"
    ))
    creds = IpmiCredentials.load(path)
    assert creds.endpoint("n1") == BmcEndpoint("n1", "10.1.0.1", "admin", Secret(PASSWORD), 6230)
    assert creds.endpoint("n2").port == 623
    assert creds.endpoint("n2").password.reveal() == "other"


def test_yaml_is_recognised_without_the_suffix(tmp_path):
    path = write_file(tmp_path / "ipmi.cred", f"username: admin\npassword: '{PASSWORD}'\nnodes: {{n1: {{host: h}}}}\n")
    assert IpmiCredentials.load(path).endpoint("n1").host == "h"


def test_mode_0644_is_refused_naming_the_file_and_the_mode(tmp_path):
    path = write_file(tmp_path / "ipmi.cred", f"username=admin\npassword={PASSWORD}\nn1.host=h\n", mode=0o644)
    with pytest.raises(ConfigError, match=r"ipmi\.cred: mode 0644 is not allowed .* must be 0600 or 0400") as info:
        IpmiCredentials.load(path)
    assert str(path) in str(info.value)
    assert "chmod 600" in str(info.value)
    assert_no_password(info.value)


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o660, 0o700, 0o606, 0o200, 0o4600])
def test_any_mode_but_0600_and_0400_is_refused(tmp_path, mode):
    path = write_file(tmp_path / "ipmi.cred", f"username=admin\npassword={PASSWORD}\nn1.host=h\n", mode=mode)
    with pytest.raises(ConfigError, match=f"mode {mode:04o} is not allowed"):
        IpmiCredentials.load(path)


def test_mode_0400_is_accepted(tmp_path):
    path = write_file(tmp_path / "ipmi.cred", f"username=admin\npassword={PASSWORD}\nn1.host=h\n", mode=0o400)
    assert IpmiCredentials.load(path).nodes == ["n1"]


def test_a_file_of_another_user_is_refused(tmp_path, monkeypatch):
    path = write_file(tmp_path / "ipmi.cred", f"username=admin\npassword={PASSWORD}\nn1.host=h\n")
    me = os.stat(path).st_uid
    monkeypatch.setattr(ipmi_mod.os, "geteuid", lambda: me + 1)
    with pytest.raises(ConfigError, match=rf"ipmi\.cred: owned by uid {me}, not by the user running wattsched"):
        IpmiCredentials.load(path)


def test_a_directory_or_fifo_is_refused_without_hanging(tmp_path):
    with pytest.raises(ConfigError, match=r"not a regular file \(a directory\)"):
        IpmiCredentials.load(tmp_path)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo, 0o600)
    with pytest.raises(ConfigError, match=r"not a regular file \(a FIFO\)"):
        IpmiCredentials.load(fifo)


def test_a_missing_file_is_named(tmp_path):
    with pytest.raises(ConfigError, match=r"nope\.cred: no such file"):
        IpmiCredentials.load(tmp_path / "nope.cred")


def test_every_content_problem_is_reported_at_once_by_key(tmp_path):
    path = write_file(tmp_path / "ipmi.cred", (
        f"password={PASSWORD}\ncolour=blue\n"
        "n1.host=h1\nn1.port=99999\nn1.interface=lan\n"
        "n2.port=623\n"
    ))
    with pytest.raises(ConfigError) as info:
        IpmiCredentials.load(path)
    text = str(info.value)
    assert f"{path}:2: unknown key (valid keys: username, password, port, cipher_suite, interface, " in text
    assert f"{path}: n1.port: expected an integer from 1 to 65535, got '99999'" in text
    assert f"{path}: n1.interface: only lanplus" in text
    assert f"{path}: n1.username: required key is missing" in text
    assert f"{path}: n2.host: required key is missing" in text
    assert_no_password(text)


@pytest.mark.parametrize(("line", "message"), [
    ("Pw-no-equals-sign", "2: expected key=value"),
    (PASSWORD, "2: unknown key"),  # the part before '=' of a password on its own line is not quoted
    ("n1.colour=blue", "2: unknown per-node key"),
])
def test_a_malformed_line_is_named_by_number_not_quoted(tmp_path, line, message):
    path = write_file(tmp_path / "ipmi.cred", f"username=admin\n{line}\npassword=x\nn1.host=h\n")
    with pytest.raises(ConfigError, match=rf"ipmi\.cred:{message}") as info:
        IpmiCredentials.load(path)
    assert_no_password(info.value, password=line.partition("=")[0])
    assert_no_password(info.value, password="Pw-")


def test_unknown_yaml_keys_are_reported_by_line_not_quoted(tmp_path):
    path = write_file(tmp_path / "ipmi.yaml", (
        "username: admin\nPw-frag: x\npassword: pw\nnodes:\n  n1: {host: h, Pw-frag2: 1}\n"
    ))
    with pytest.raises(ConfigError) as info:
        IpmiCredentials.load(path)
    text = str(info.value)
    assert f"{path}:2: unknown key (valid keys: username, password, port, cipher_suite, interface, nodes)" in text
    assert f"{path}:5: unknown key (valid keys: host, username, password, port, cipher_suite, interface)" in text
    assert_no_password(text, password="Pw-frag")
    with pytest.raises(ConfigError, match=r"<memory>: nodes\.n1: unknown key"):
        IpmiCredentials.from_mapping({"username": "u", "password": "p", "nodes": {"n1": {"host": "h", "hots": 1}}})


def test_an_unquoted_numeric_yaml_password_is_refused_without_quoting_it(tmp_path):
    path = write_file(tmp_path / "ipmi.yaml", "username: admin\npassword: 7654321\nnodes: {n1: {host: h}}\n")
    with pytest.raises(ConfigError, match=r"ipmi\.yaml: password: must be a string: quote it") as info:
        IpmiCredentials.load(path)
    assert_no_password(info.value, password="7654321")


def test_a_yaml_syntax_error_gives_the_position_not_the_line(tmp_path):
    path = write_file(tmp_path / "ipmi.yaml", f'username: admin\npassword: "{PASSWORD}\nnodes: {{n1: {{host: h}}}}\n')
    with pytest.raises(ConfigError, match=r"ipmi\.yaml:\d+: invalid YAML \(column \d+\)") as info:
        IpmiCredentials.load(path)
    assert_no_password(info.value)


def test_an_unknown_node_is_a_config_error(tmp_path):
    creds = kv_credentials(tmp_path)
    with pytest.raises(ConfigError, match=r"ipmi\.cred: no BMC for node 'n9'"):
        creds.endpoint("n9")


# --------------------------------------------------------------------------- passwords never leak


def test_secret_hides_its_value_everywhere_but_reveal():
    s = Secret(PASSWORD)
    assert_no_password(repr(s), str(s), f"{s}", f"{s:>30}", f"{s} {s!r}", "%s" % (s,))  # noqa: UP031
    assert s.reveal() == PASSWORD
    with pytest.raises(TypeError):
        pickle.dumps(s)


def test_reprs_of_credentials_endpoints_and_actuator_hold_no_password(tmp_path):
    creds = kv_credentials(tmp_path)
    act = IpmiActuator(creds, run=never_run)
    e = creds.endpoint("node1")
    assert_no_password(repr(creds), str(creds), repr(e), str(e), repr(act), str(act), repr(creds.endpoints))
    assert "node1" in repr(creds)


def test_the_password_goes_in_the_environment_never_on_the_command_line(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("IPMITOOL_PASSWORD", "inherited")  # ipmitool prefers it to IPMI_PASSWORD: must be dropped
    run = FakeRun((0, "    Power Limit:         250 Watts\n", ""), (0, "\n    Power limit successfully activated\n",
                                                                   ""))
    act = IpmiActuator(kv_credentials(tmp_path, port=6230), ipmitool="/usr/bin/ipmitool", run=run)
    caplog.set_level(logging.DEBUG, logger="wattsched.daemon.ipmi")
    assert act.set_limit("node1", 250) == 250
    (set_cmd, _), (act_cmd, _) = run.calls
    base = ["/usr/bin/ipmitool", "-I", "lanplus", "-H", "127.0.0.1", "-p", "6230", "-U", "admin", "-E", "-C", "3"]
    assert set_cmd == [*base, "dcmi", "power", "set_limit", "limit", "250"]
    assert act_cmd == [*base, "dcmi", "power", "activate"]
    for cmd, kw in run.calls:
        assert_no_password(*cmd)
        assert kw["env"]["IPMI_PASSWORD"] == PASSWORD
        assert "IPMITOOL_PASSWORD" not in kw["env"]
        assert kw["timeout"] == 10
    assert_no_password(caplog.text)
    assert "set_limit limit 250" in caplog.text


def test_a_password_echoed_by_ipmitool_is_redacted_from_the_error(tmp_path):
    run = FakeRun((1, f"out {PASSWORD}", f"Error: bad password {PASSWORD}\n"))
    act = IpmiActuator(kv_credentials(tmp_path), run=run)
    with pytest.raises(IpmiError, match=r"node node1: ipmitool exited with 1; command: ipmitool .* dcmi power "
                                        r"deactivate; stderr: Error: bad password \*+") as info:
        act.remove_limit("node1")
    exc = info.value
    assert (exc.node, exc.returncode) == ("node1", 1)
    assert exc.command[-3:] == ["dcmi", "power", "deactivate"]
    assert_no_password(exc, repr(exc), exc.args, exc.command, exc.stdout, exc.stderr)


def test_redact_also_blanks_a_dash_p_argument():
    cmd = ipmi_mod._redact_command(["ipmitool", "-P", "x", "-U", "admin"], [])
    assert cmd == ["ipmitool", "-P", "********", "-U", "admin"]
    assert redact("a pw b pw", [Secret("pw")]) == "a ******** b ********"


# --------------------------------------------------------------------------- watts, failures and parsing (no ipmitool)


@pytest.mark.parametrize("watts", [0, -5, 0.5, float("nan"), float("inf"), -float("inf"), 65536, 1e9, "250", None,
                                   True])
def test_invalid_watts_are_refused_without_running_ipmitool(tmp_path, watts):
    act = IpmiActuator(kv_credentials(tmp_path), run=never_run)
    with pytest.raises(InvalidPowerLimit, match=r"node node1: power limit .* (not a|must be positive|above 65535)"):
        act.set_limit("node1", watts)


def test_invalid_power_limit_is_an_ipmi_error_and_a_value_error():
    with pytest.raises(IpmiError) as info:
        check_watts(-1, "n1")
    assert isinstance(info.value, ValueError) and isinstance(info.value, WattschedError)
    assert info.value.command is None


def test_watts_are_rounded_down_and_the_field_maximum_is_accepted():
    assert check_watts(249.9) == 249
    assert check_watts(65535) == 65535
    assert check_watts(1) == 1


def test_a_timeout_is_an_ipmi_error_naming_the_bmc(tmp_path):
    run = FakeRun(subprocess.TimeoutExpired(["ipmitool"], 3, output=b"", stderr=f"pw {PASSWORD}".encode()))
    act = IpmiActuator(kv_credentials(tmp_path, port=6230), timeout_s=3, run=run)
    with pytest.raises(IpmiError, match=r"node node1: ipmitool timed out after 3 s \(is the BMC 127\.0\.0\.1:6230 "
                                        r"reachable\?\)") as info:
        act.reading("node1")
    assert info.value.returncode is None
    assert_no_password(info.value, info.value.stderr)


def test_a_missing_ipmitool_is_an_ipmi_error(tmp_path):
    act = IpmiActuator(kv_credentials(tmp_path), ipmitool=str(tmp_path / "no-ipmitool"))
    with pytest.raises(IpmiError, match=r"cannot run .*no-ipmitool: No such file or directory"):
        act.reading("node1")


def test_unparseable_output_is_an_ipmi_error(tmp_path):
    act = IpmiActuator(kv_credentials(tmp_path), run=FakeRun((0, "Something else entirely\n", "")))
    with pytest.raises(IpmiError, match=r"unexpected ipmitool output: no 'Instantaneous power reading"):
        act.reading("node1")
    act = IpmiActuator(kv_credentials(tmp_path), run=FakeRun((0, "Power Limit: 250 Watts\n", "")))
    with pytest.raises(IpmiError, match=r"unexpected ipmitool output: no 'Current Limit State"):
        act.get_limit("node1")


def test_a_bmc_that_keeps_another_limit_is_an_error_and_nothing_is_activated(tmp_path):
    run = FakeRun((0, LIMIT_INACTIVE_OUT.replace("250", "200"), ""))
    act = IpmiActuator(kv_credentials(tmp_path), run=run)
    with pytest.raises(IpmiError, match="the BMC kept a power limit of 200 W after set_limit 250"):
        act.set_limit("node1", 250)
    assert len(run.calls) == 1


def test_parse_captured_reading_and_limits():
    r = parse_power_reading(READING_OUT)
    assert (r.watts, r.min_w, r.max_w, r.avg_w, r.active) == (250, 250, 300, 275, True)
    assert parse_power_limit(LIMIT_ACTIVE_OUT) == PowerLimit(250, True, "Hard Power Off & Log Event to SEL", 6000, 5)
    assert parse_power_limit(LIMIT_INACTIVE_OUT).active is False


# --------------------------------------------------------------------------- the test BMC's DCMI encoding


def set_limit_request(limit: int, action: int = 0, correction_ms: int = 0, sample_s: int = 0) -> bytes:
    return (bytes([0xDC, 0, 0, 0, action]) + limit.to_bytes(2, "little") + correction_ms.to_bytes(4, "little")
            + bytes(2) + sample_s.to_bytes(2, "little"))


def test_dcmi_state_limits_the_reported_power_only_while_active():
    s = DcmiState(power_w=300, clock=lambda: 1000.0)
    code, body = s.handle(CMD_GET_LIMIT, bytes([0xDC, 0, 0]))
    assert code == CC_NO_ACTIVE_LIMIT and body[0] == 0xDC and len(body) == 14
    assert s.handle(CMD_SET_LIMIT, set_limit_request(250, 0x01, 6000, 5)) == (0, b"\xdc")
    assert s.reported_power_w() == 300
    assert s.handle(CMD_ACTIVATE, bytes([0xDC, 1, 0, 0])) == (0, b"\xdc")
    code, body = s.handle(CMD_GET_LIMIT, bytes([0xDC, 0, 0]))
    assert code == 0
    assert body == bytes([0xDC, 0, 0, 0x01, 250, 0]) + (6000).to_bytes(4, "little") + bytes(2) + bytes([5, 0])
    code, body = s.handle(CMD_POWER_READING, bytes([0xDC, 1, 0, 0]))
    assert code == 0 and len(body) == 18
    assert int.from_bytes(body[1:3], "little") == 250
    assert int.from_bytes(body[9:13], "little") == 1000 and body[17] & 0x40
    assert s.handle(CMD_ACTIVATE, bytes([0xDC, 0, 0, 0])) == (0, b"\xdc")
    assert s.reported_power_w() == 300


def test_dcmi_state_refuses_bad_requests_with_ipmi_completion_codes():
    s = DcmiState(power_w=300, max_limit_w=200)
    assert s.handle(0x7F, bytes([0xDC]))[0] == CC_INVALID_COMMAND
    assert s.handle(CMD_SET_LIMIT, bytes([0xDC, 0, 0]))[0] == CC_BAD_LENGTH
    assert s.handle(CMD_SET_LIMIT, set_limit_request(250))[0] == CC_LIMIT_OUT_OF_RANGE
    assert s.handle(CMD_SET_LIMIT, set_limit_request(150, action=0x42))[0] == CC_INVALID_FIELD
    assert s.handle(CMD_ACTIVATE, bytes([0xDC, 7, 0, 0]))[0] == CC_INVALID_FIELD
    assert s.handle(CMD_GET_LIMIT, bytes([0xAB, 0, 0]))[0] == CC_INVALID_FIELD
    assert s.limit_w == 0 and not s.active


def test_dcmi_capabilities_announce_dcmi_1_5_power_management():
    code, body = DcmiState().handle(CMD_CAPABILITIES, bytes([0xDC, 0x01]))
    assert code == 0
    assert body[:4] == bytes([0xDC, 0x01, 0x05, 0x02]) and body[5] & 0x01


# --------------------------------------------------------------------------- the real ipmitool against the test BMC


@pytest.fixture(scope="module")
def bmc(tmp_path_factory):
    if IPMITOOL is None:
        pytest.skip("ipmitool is not installed (apt-get install ipmitool)")
    pw = write_file(tmp_path_factory.mktemp("bmc") / "pw", PASSWORD + "\n")
    with start_test_bmc(pw, power_w=300) as proc:
        yield proc


@pytest.fixture
def actuator(bmc, tmp_path):
    return IpmiActuator(kv_credentials(tmp_path, port=bmc.port), ipmitool=IPMITOOL)


def ipmitool(bmc, *args, password=PASSWORD):
    cmd = [IPMITOOL, "-I", "lanplus", "-H", "127.0.0.1", "-p", str(bmc.port), "-U", "admin", "-P", password, "-C",
           "3", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=30, check=False)


@needs_ipmitool
def test_plain_ipmitool_dcmi_commands_work_against_the_test_bmc(bmc):
    steps = [
        (["dcmi", "power", "deactivate"], "Power limit successfully deactivated"),
        (["dcmi", "power", "reading"], "Instantaneous power reading:                   300 Watts"),
        (["dcmi", "power", "set_limit", "limit", "250"], "Power Limit:         250 Watts"),
        (["dcmi", "power", "get_limit"], "Current Limit State: No Active Power Limit"),
        (["dcmi", "power", "activate"], "Power limit successfully activated"),
        (["dcmi", "power", "get_limit"], "Current Limit State: Power Limit Active"),
        (["dcmi", "power", "reading"], "Instantaneous power reading:                   250 Watts"),
        (["dcmi", "power", "deactivate"], "Power limit successfully deactivated"),
        (["dcmi", "power", "reading"], "Instantaneous power reading:                   300 Watts"),
        (["dcmi", "discover"], "Power management available"),
    ]
    for args, expected in steps:
        proc = ipmitool(bmc, *args)
        assert proc.returncode == 0, (args, proc.stderr)
        assert expected in proc.stdout, (args, proc.stdout)


@needs_ipmitool
def test_set_limit_activates_it_and_the_reading_stays_under_it(actuator):
    assert actuator.set_limit("node1", 250) == 250
    limit = actuator.get_limit("node1")
    assert (limit.limit_w, limit.active) == (250, True)
    reading = actuator.reading("node1")
    assert reading.watts <= 250
    assert reading.watts == 250  # the node draws 300 W uncapped


@needs_ipmitool
def test_remove_limit_deactivates_it(actuator):
    actuator.set_limit("node1", 240.7)
    assert actuator.get_limit("node1") == PowerLimit(240, True, "No Action", 0, 0)
    actuator.remove_limit("node1")
    limit = actuator.get_limit("node1")
    assert (limit.limit_w, limit.active) == (240, False)
    assert actuator.reading("node1").watts == 300


@needs_ipmitool
def test_a_wrong_password_is_an_ipmi_error_that_shows_neither_password(bmc, tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    act = IpmiActuator(kv_credentials(tmp_path, port=bmc.port, password=WRONG_PASSWORD), ipmitool=IPMITOOL)
    with pytest.raises(IpmiError, match=r"node node1: ipmitool exited with 1; .*stderr: .*Unable to establish IPMI v2"
                       ) as info:
        act.set_limit("node1", 250)
    exc = info.value
    for pw in (PASSWORD, WRONG_PASSWORD):
        assert_no_password(exc, repr(exc), exc.args, exc.command, exc.stdout, exc.stderr, caplog.text, password=pw)
    assert "-E" in exc.command


@needs_ipmitool
def test_a_limit_the_bmc_refuses_is_an_ipmi_error_with_its_reason(tmp_path):
    pw = write_file(tmp_path / "pw", PASSWORD + "\n")
    with start_test_bmc(pw, extra_args=["--max-limit-w", "200"]) as small:
        act = IpmiActuator(kv_credentials(tmp_path, port=small.port), ipmitool=IPMITOOL)
        with pytest.raises(IpmiError, match=r"stderr: DCMI request failed because: Power/Thermal limit out of range"):
            act.set_limit("node1", 250)
        assert act.get_limit("node1").active is False


@needs_ipmitool
def test_an_unreachable_bmc_is_an_ipmi_error_within_the_timeout(tmp_path):
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    act = IpmiActuator(kv_credentials(tmp_path, port=port), ipmitool=IPMITOOL, timeout_s=1)
    start = time.monotonic()
    with pytest.raises(IpmiError, match=rf"timed out after 1 s \(is the BMC 127\.0\.0\.1:{port} reachable\?\)"):
        act.reading("node1")
    assert time.monotonic() - start < 3
