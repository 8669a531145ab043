"""Telemetry readers and the Grafana dashboard against a real Prometheus (Debian's 2.42) on loopback.

One Prometheus per module scrapes, every second:
- ``fake``: an exporter in this process whose series carry their own ``instance`` label
  (``honor_labels``), so that one target stands for several nodes;
- ``node``: the real ``prometheus-node-exporter`` reading RAPL from a sysfs tree in tmp that a
  thread advances at 150 W;
- ``stale``: another in-process exporter, stopped by the staleness test.
Replies Prometheus cannot be made to give (503, ``status: error`` with 200) come from a canned
HTTP server; the agent scraper reads in-process exporters with an injected clock.
"""

import contextlib
import json
import os
import re
import shutil
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from wattsched.daemon.metrics import DaemonMetrics
from wattsched.errors import ConfigError, TelemetryError
from wattsched.telemetry.dashboard import iter_panels, panel_queries
from wattsched.telemetry.prometheus import PRESETS, PowerReading, PrometheusSource
from wattsched.telemetry.scrape import AgentScraper

DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "wattsched.json"
PROMETHEUS = shutil.which("prometheus")
NODE_EXPORTER = shutil.which("prometheus-node-exporter")
STRIP_PORT = r"^(?P<node>[^:]+):\d+$"
WINDOW = "3s"  # rate window of the live queries: 3 scrapes at 1 s


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(check, timeout_s: float, what: str, every_s: float = 0.25):
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        try:
            last = check()
            if last:
                return last
        except (OSError, TelemetryError) as exc:
            last = exc
        time.sleep(every_s)
    pytest.fail(f"timed out after {timeout_s} s waiting for {what} (last: {last!r})")


class PowerCollector:
    """Energy counters growing at ``rate_w`` since ``t0`` (exact rates), and power gauges."""

    def __init__(self, counters=None, gauges=None, counter_name="node_rapl_package_joules"):
        self.t0 = time.time()
        self.counters = dict(counters or {})  # instance -> watts
        self.gauges = dict(gauges or {})  # (metric, instance) -> watts
        self.counter_name = counter_name

    def collect(self):
        now = time.time()
        c = CounterMetricFamily(self.counter_name, "energy", labels=["instance", "index"])
        for instance, watts in self.counters.items():
            c.add_metric([instance, "0"], 1000.0 + watts * (now - self.t0))
        yield c
        names = sorted({m for m, _ in self.gauges})
        for name in names:
            g = GaugeMetricFamily(name, "power", labels=["instance"])
            for (m, instance), watts in self.gauges.items():
                if m == name:
                    g.add_metric([instance], watts)
            yield g


def serve(collector):
    """An exporter of ``collector`` on a free loopback port (stopped quickly: short poll interval)."""
    registry = CollectorRegistry()
    registry.register(collector)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            body = generate_latest(registry)
            self.send_response(200)
            self.send_header("Content-Type", CONTENT_TYPE_LATEST)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return server, server.server_address[1]


class SysfsRapl:
    """A sysfs tree with one RAPL package zone whose energy_uj grows at ``watts``."""

    def __init__(self, root: Path, watts: float):
        self.zone = root / "class" / "powercap" / "intel-rapl:0"
        self.zone.mkdir(parents=True)
        (self.zone / "name").write_text("package-0\n")
        (self.zone / "max_energy_range_uj").write_text("262143328850\n")
        self.watts, self.t0 = watts, time.time()
        self._stop = threading.Event()
        self.advance()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def advance(self):
        uj = int(5e6 + self.watts * 1e6 * (time.time() - self.t0))
        tmp = self.zone / "energy_uj.tmp"
        tmp.write_text(f"{uj}\n")
        os.replace(tmp, self.zone / "energy_uj")

    def _run(self):
        while not self._stop.wait(0.01):
            self.advance()

    def stop(self):
        self._stop.set()
        self.thread.join()


def stack_file(stack, path):
    """A file open for writing, closed with the rest of ``stack``."""
    f = path.open("w")
    stack.append(f.close)
    return f


class Lab:
    """What the tests need of the module's Prometheus and exporters."""

    url: str
    node_instance: str | None
    fake: PowerCollector
    stale_server: object


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    if PROMETHEUS is None:
        pytest.skip("prometheus not installed (apt-get install prometheus)")
    tmp = tmp_path_factory.mktemp("prom")
    stack = []
    fake = PowerCollector(
        counters={"node1:9100": 200.0, "node2:9100": 300.0},
        gauges={("ipmi_dcmi_power_consumption_watts", "node1:9290"): 250.0,
                ("ipmi_dcmi_power_consumption_watts", "node2:9290"): 350.0,
                ("test_power_watts", "node5:9100"): 100.0,
                ("test_power_watts", "node6:9100"): 200.0},
    )
    fake_server, fake_port = serve(fake)
    stack.append(lambda: (fake_server.shutdown(), fake_server.server_close()))
    stale_server, stale_port = serve(PowerCollector(counters={"node9:9100": 100.0}))
    stack.append(lambda: (stale_server.shutdown(), stale_server.server_close()))
    lab = Lab()
    lab.fake = fake
    lab.stale_server = stale_server
    jobs = [
        {"job_name": "fake", "honor_labels": True, "static_configs": [{"targets": [f"127.0.0.1:{fake_port}"]}]},
        {"job_name": "stale", "honor_labels": True, "static_configs": [{"targets": [f"127.0.0.1:{stale_port}"]}]},
    ]
    lab.node_instance = None
    try:
        if NODE_EXPORTER is not None:
            sysfs = SysfsRapl(tmp / "sys", 150.0)
            stack.append(sysfs.stop)
            ne_port = free_port()
            ne = subprocess.Popen(
                [NODE_EXPORTER, f"--path.sysfs={tmp / 'sys'}", "--collector.disable-defaults", "--collector.rapl",
                 f"--web.listen-address=127.0.0.1:{ne_port}"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )
            stack.append(lambda: (ne.terminate(), ne.wait(10)))
            lab.node_instance = f"127.0.0.1:{ne_port}"
            jobs.append({"job_name": "node", "static_configs": [{"targets": [lab.node_instance]}]})
        config = {"global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
                  "scrape_configs": jobs}
        (tmp / "prometheus.yml").write_text(json.dumps(config))  # JSON is YAML
        port = free_port()
        log = stack_file(stack, tmp / "prometheus.log")
        prom = subprocess.Popen(
            [PROMETHEUS, f"--config.file={tmp / 'prometheus.yml'}", f"--storage.tsdb.path={tmp / 'data'}",
             f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"],
            stdout=log, stderr=log,
        )
        stack.append(lambda: (prom.terminate(), prom.wait(10)))
        lab.url = f"http://127.0.0.1:{port}"

        def ready():
            if prom.poll() is not None:
                pytest.fail(f"prometheus exited: {(tmp / 'prometheus.log').read_text()[-2000:]}")
            with urllib.request.urlopen(lab.url + "/-/ready", timeout=1) as r:
                return r.status == 200

        wait_for(ready, 20, "Prometheus to be ready")
        # Wait until the rate windows are full, so that rates are exact.
        warm = PrometheusSource(lab.url, "rapl", node_map=STRIP_PORT, rate_window=WINDOW)
        expected = {"node1": 200.0, "node2": 300.0, "node9": 100.0}
        if lab.node_instance:
            expected["127.0.0.1"] = 150.0

        def warmed():
            r = warm.read(expected)
            return not r.missing and all(w == pytest.approx(expected[n], rel=0.02) for n, w in r.watts.items())

        wait_for(warmed, 25, f"rates of {sorted(expected)}")
        yield lab
    finally:
        for undo in reversed(stack):
            with contextlib.suppress(Exception):
                undo()


# --------------------------------------------------------------------------- PrometheusSource, live


def test_reads_node_power_through_the_api(lab):
    src = PrometheusSource(lab.url, "rapl", node_map=STRIP_PORT, rate_window=WINDOW)
    r = src.read(["node1", "node2"])
    assert r.watts == {"node1": pytest.approx(200.0, rel=0.03), "node2": pytest.approx(300.0, rel=0.03)}
    assert r.missing == set()
    assert not r.stale
    assert 0 <= r.age_s < 5
    assert r.sample_time == pytest.approx(time.time(), abs=5)
    assert r.total_w == pytest.approx(500.0, rel=0.03)


def test_ipmi_preset_and_explicit_node_map(lab):
    src = PrometheusSource(lab.url, "ipmi", node_map={"node1:9290": "cn01", "node2:9290": "cn02"})
    r = src.read(["cn01", "cn02"])
    assert r.watts == {"cn01": 250.0, "cn02": 350.0}
    assert not r.stale


def test_without_node_map_the_label_value_is_the_node(lab):
    r = PrometheusSource(lab.url, "ipmi").read()
    assert r.watts == {"node1:9290": 250.0, "node2:9290": 350.0}


def test_missing_nodes_are_reported_never_zero(lab):
    src = PrometheusSource(lab.url, "ipmi", node_map=STRIP_PORT)
    r = src.read(["node1", "node2", "node3", "node4"])
    assert r.watts == {"node1": 250.0, "node2": 350.0}
    assert r.missing == {"node3", "node4"}
    assert "node3" not in r.watts
    none = src.read(["node3"])
    assert none.watts == {} and none.missing == {"node3"}
    assert none.sample_time is None and none.stale


def test_real_node_exporter_rapl(lab):
    if lab.node_instance is None:
        pytest.skip("prometheus-node-exporter not installed")
    src = PrometheusSource(lab.url, "rapl", node_map={lab.node_instance: "cn07"}, rate_window=WINDOW)
    r = src.read(["cn07"])
    assert r.watts == {"cn07": pytest.approx(150.0, rel=0.03)}
    assert r.unmatched >= {"node1:9100", "node2:9100"}


def test_bad_query_names_the_query_and_the_url(lab):
    query = "sum by (instance) (rate(node_rapl_package_joules_total[1m])"
    src = PrometheusSource(lab.url, query)
    with pytest.raises(TelemetryError, match=r"HTTP 400: bad_data: .*parse error") as info:
        src.read()
    assert query in str(info.value) and lab.url in str(info.value)


def test_execution_error_is_a_telemetry_error(lab):
    two = 'label_replace(vector(1), "a", "1", "", "") or label_replace(vector(2), "a", "2", "", "")'
    query = f"({two}) + on() ({two})"  # many-to-many matching: fails at execution, not at parsing
    with pytest.raises(TelemetryError, match=r"HTTP 422: execution: .*many-to-many") as info:
        PrometheusSource(lab.url, query).read()
    assert "on()" in str(info.value)


def test_unreachable_server():
    url = f"http://127.0.0.1:{free_port()}"  # closed port
    src = PrometheusSource(url, "ipmi", timeout_s=2)
    with pytest.raises(TelemetryError, match=r"cannot reach Prometheus at http://127\.0\.0\.1:\d+ \(query "
                                             r"'ipmi_dcmi_power_consumption_watts'\)"):
        src.read(["node1"])
    with pytest.raises(TelemetryError, match="cannot reach"):
        src.job_power(["node1"], time.time() - 60, time.time())
    with pytest.raises(TelemetryError, match=r"unknown url type.*check the URL"):
        PrometheusSource("prometheus:9090", "ipmi").read()


def test_job_power_over_a_range(lab):
    ipmi = PrometheusSource(lab.url, "ipmi", node_map=STRIP_PORT)
    end = time.time() - 1
    jp = ipmi.job_power(["node1", "node2"], end - 4, end, step_s=1)
    assert jp == (300.0, 300.0, 0.0)  # per node: the mean of 250 W and 350 W at every step
    assert (jp.mean_w, jp.max_w, jp.std_w) == (300.0, 300.0, 0.0)
    assert ipmi.job_power(["node1", "node3"], end - 4, end, step_s=1) is None  # node3 never had data
    assert ipmi.job_power([], end - 4, end) is None

    # A job whose power changes: node5 100 W then 300 W, node6 200 W throughout.
    src = PrometheusSource(lab.url, "test_power_watts", node_map=STRIP_PORT)
    start = time.time()
    time.sleep(1.5)
    lab.fake.gauges[("test_power_watts", "node5:9100")] = 300.0
    time.sleep(2.2)
    jp = src.job_power(["node5", "node6"], start, time.time(), step_s=1)
    assert jp.max_w == 250.0  # (300 + 200) / 2
    assert 150.0 < jp.mean_w < 250.0
    assert 0.0 < jp.std_w <= 50.0


def test_staleness_after_the_exporter_stops(lab):
    query = 'sum by (instance) (rate(node_rapl_package_joules_total{job="stale"}[{range}]))'
    src = PrometheusSource(lab.url, query, node_map=STRIP_PORT, max_age_s=2, rate_window=WINDOW)
    fresh = src.read(["node9"])
    assert fresh.watts == {"node9": pytest.approx(100.0, rel=0.03)}
    assert not fresh.stale
    lab.stale_server.shutdown()
    lab.stale_server.server_close()
    stale = wait_for(lambda: (r := src.read(["node9"])).stale and r, 20, "the reading to go stale")
    assert stale.age_s > 2
    assert stale.watts == {} and stale.missing == {"node9"}  # no value rather than an old or zero one
    time.sleep(1.5)
    later = src.read(["node9"])
    assert later.stale and later.age_s > stale.age_s  # the age keeps growing
    assert later.sample_time == stale.sample_time


# --------------------------------------------------------------------------- PrometheusSource, canned replies


class Canned(BaseHTTPRequestHandler):
    """Answers each POST with the next of ``replies`` (the last one repeats)."""

    replies: list = []
    requests: list = []

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0))).decode()
        type(self).requests.append((self.path, self.headers.get("Content-Type"), dict(urllib.parse.parse_qsl(body))))
        replies = type(self).replies
        code, payload = replies.pop(0) if len(replies) > 1 else replies[0]
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args):
        pass


@pytest.fixture
def canned():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Canned)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    Canned.requests = []

    def set_replies(*replies):
        Canned.replies = [(code, p if isinstance(p, bytes) else json.dumps(p).encode()) for code, p in replies]
        return f"http://127.0.0.1:{server.server_address[1]}/prom/"

    yield set_replies
    server.shutdown()
    server.server_close()


def vector(*series):
    return {"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": labels, "value": value} for labels, value in series]}}


def matrix(*series):
    return {"status": "success", "data": {"resultType": "matrix", "result": [
        {"metric": labels, "values": values} for labels, values in series]}}


def test_request_is_a_form_encoded_post_to_the_api(canned):
    url = canned((200, vector(({"instance": "n"}, [1000.0, "5"]))))
    PrometheusSource(url, "rapl", timeout_s=3, clock=lambda: 1000.0).read(["n"])
    assert len(Canned.requests) == 1
    path, ctype, form = Canned.requests[0]
    assert path == "/prom/api/v1/query"
    assert ctype == "application/x-www-form-urlencoded"
    assert form == {"query": "sum by (instance) (rate(node_rapl_package_joules_total[1m]))", "time": "1000.000",
                    "timeout": "3s"}


def test_values_are_strings_and_missing_nodes_are_missing(canned):
    url = canned((200, vector(
        ({"instance": "a:1"}, [1000, "110.5"]),
        ({"instance": "b:1"}, [1000, "NaN"]),  # not a number: missing
        ({"instance": "c:1"}, [800, "300"]),  # a server stamping an old time: older than max_age_s, missing
        ({"instance": "d:1", "gpu": "0"}, [1000, "50"]),  # two series of one node are summed
        ({"instance": "d:1", "gpu": "1"}, [1000, "70"]),
        ({"instance": "nonsense"}, [1000, "1"]),  # does not match node_map
        ({"job": "x"}, [1000, "1"]),  # no node label
    )))
    src = PrometheusSource(url, "rapl", node_map=STRIP_PORT, max_age_s=60, clock=lambda: 1005.0)
    r = src.read(["a", "b", "c", "d", "e"])
    assert r == PowerReading(
        watts={"a": 110.5, "d": 120.0}, sample_time=1000.0, age_s=5.0, missing={"b", "c", "e"},
        max_age_s=60, read_at=1005.0, unmatched={"nonsense", ""},
    )
    assert not r.stale
    all_nodes = src.read()
    assert set(all_nodes.watts) == {"a", "d"} and all_nodes.missing == {"c"}
    assert len(Canned.requests) == 2  # fresh data: no second query


def test_age_of_vanished_data_from_a_subquery(canned):
    url = canned(
        (200, vector()),  # nothing current
        (200, matrix(({"instance": "a:1"}, [[690, "100"], [700, "100"]]), ({"instance": "b:1"}, [[650, "1"]]))),
    )
    src = PrometheusSource(url, "ipmi", node_map=STRIP_PORT, max_age_s=120, clock=lambda: 1000.0)
    r = src.read(["a", "b"])
    assert r.stale and r.sample_time == 700.0 and r.age_s == 300.0
    assert r.watts == {} and r.missing == {"a", "b"}  # old values are not reported
    assert Canned.requests[1][2]["query"] == "(ipmi_dcmi_power_consumption_watts)[360s:15s]"
    canned((200, vector()), (200, matrix()))
    none = src.read(["a"])
    assert none.sample_time is None and none.age_s == float("inf") and none.stale


@pytest.mark.parametrize(
    "code, payload, match",
    [
        (503, {"status": "error", "errorType": "timeout", "error": "query timed out in expression evaluation"},
         r"HTTP 503: timeout: query timed out.*raise timeout_s"),
        (422, {"status": "error", "errorType": "execution", "error": "boom"}, r"HTTP 422: execution: boom"),
        (400, {"status": "error", "errorType": "bad_data", "error": "parse error"}, r"HTTP 400: bad_data"),
        (200, {"status": "error", "errorType": "internal", "error": "disk on fire"}, r"failed: internal: disk on fire"),
        (200, b"<html>login</html>", r"not JSON"),
        (404, b"404 page not found", r"HTTP 404.*Prometheus base URL"),
        (200, {"status": "success", "data": {"resultType": "scalar", "result": [1, "2"]}}, "instant vector.*scalar"),
    ],
)
def test_error_replies_are_telemetry_errors(canned, code, payload, match):
    url = canned((code, payload))
    with pytest.raises(TelemetryError, match=match) as info:
        PrometheusSource(url, "ipmi").read()
    assert "ipmi_dcmi_power_consumption_watts" in str(info.value) and url.rstrip("/") in str(info.value)


def test_job_power_request_and_point_cap(canned):
    url = canned((200, matrix(
        ({"instance": "a:1"}, [[0, "100"], [15, "300"], [30, "200"]]),
        ({"instance": "b:1"}, [[0, "100"], [15, "100"]]),  # no point at 30: that step is skipped
        ({"instance": "z:1"}, [[0, "999"], [15, "999"], [30, "999"]]),  # not the job's
    )))
    src = PrometheusSource(url, "rapl", node_map=STRIP_PORT)
    jp = src.job_power(["a", "b"], 0, 30, step_s=15)
    assert jp == (150.0, 200.0, 50.0)  # steps: 100, 200
    form = Canned.requests[-1][2]
    assert Canned.requests[-1][0] == "/prom/api/v1/query_range"
    assert (form["start"], form["end"], form["step"]) == ("0.000", "30.000", "15")
    src.job_power(["a"], 0, 86400 * 30, step_s=15)  # 30 days at 15 s would be 172800 points
    assert Canned.requests[-1][2]["step"] == "236"


def test_presets_and_node_map_validation():
    assert PRESETS["rapl"].replace("{range}", "1m") == "sum by (instance) (rate(node_rapl_package_joules_total[1m]))"
    assert PRESETS["ipmi"] == "ipmi_dcmi_power_consumption_watts"
    assert PRESETS["dcgm"] == "sum by (instance) (DCGM_FI_DEV_POWER_USAGE)"
    assert PrometheusSource("http://p:9090", "agent", rate_window="2m").query == (
        "sum by (instance) (rate(wattsched_agent_rapl_energy_joules_total[2m]))")
    assert PrometheusSource("http://p:9090", 'x{job="a"}').query == 'x{job="a"}'
    with pytest.raises(ConfigError, match="needs a named group 'node'"):
        PrometheusSource("http://p:9090", "rapl", node_map=r"^([^:]+):\d+$")
    with pytest.raises(ConfigError, match="invalid regex"):
        PrometheusSource("http://p:9090", "rapl", node_map="(?P<node>")


# --------------------------------------------------------------------------- AgentScraper


class AgentCollector:
    def __init__(self, zones):
        self.zones = dict(zones)  # zone -> joules

    def collect(self):
        c = CounterMetricFamily("wattsched_agent_rapl_energy_joules", "RAPL energy", labels=["zone"])
        for zone, joules in self.zones.items():
            c.add_metric([zone], joules)
        yield c


@pytest.fixture
def agents():
    made = []

    def make(zones):
        collector = AgentCollector(zones)
        server, port = serve(collector)
        made.append(server)
        return collector, server, f"http://127.0.0.1:{port}/metrics"

    yield make
    for server in made:
        server.shutdown()
        server.server_close()


def test_agent_scraper_power_from_two_readings(agents):
    a, _, url_a = agents({"package-0": 1000.0, "package-1": 2000.0})
    b, _, url_b = agents({"package-0": 50.0})
    clock = [100.0]
    scraper = AgentScraper({"cn01": url_a, "cn02": url_b}, clock=lambda: clock[0])
    first = scraper.read()
    assert first.watts == {} and first.missing == {"cn01", "cn02"} and first.stale
    assert first.errors["cn01"].startswith("first reading")
    clock[0] = 110.0
    a.zones = {"package-0": 1500.0, "package-1": 2700.0}
    b.zones = {"package-0": 1050.0}
    r = scraper.read(["cn01", "cn02", "cn03"])
    assert r.watts == {"cn01": 120.0, "cn02": 100.0}
    assert r.missing == {"cn03"} and r.errors["cn03"] == "no agent target configured"
    assert r.sample_time == 110.0 and r.age_s == 0.0 and not r.stale


def test_agent_scraper_counter_reset_and_wrap(agents):
    a, _, url = agents({"package-0": 5000.0})
    clock = [0.0]
    scraper = AgentScraper({"cn01": url}, clock=lambda: clock[0])
    scraper.read()
    clock[0], a.zones = 10.0, {"package-0": 30.0}  # agent restarted: no power for this interval
    r = scraper.read()
    assert r.watts == {} and r.missing == {"cn01"} and "reset" in r.errors["cn01"]
    clock[0], a.zones = 20.0, {"package-0": 1030.0}  # then the new baseline works
    assert scraper.read().watts == {"cn01": 100.0}
    wrapping = AgentScraper({"cn01": url}, wrap_j=2000.0, clock=lambda: clock[0])
    wrapping.read()
    clock[0], a.zones = 30.0, {"package-0": 30.0}  # 1030 -> 2000 -> 30: 1000 J in 10 s
    assert wrapping.read().watts == {"cn01": 100.0}


def test_agent_scraper_unreachable_agents(agents):
    _, server, url = agents({"package-0": 1.0})
    dead = f"http://127.0.0.1:{free_port()}/metrics"
    scraper = AgentScraper({"cn01": url, "cn02": dead}, timeout_s=2)
    r = scraper.read()
    assert "cn02" in r.missing and dead in r.errors["cn02"]
    server.shutdown()
    server.server_close()
    with pytest.raises(TelemetryError, match=r"no wattsched agent could be scraped.*127\.0\.0\.1"):
        scraper.read()


# --------------------------------------------------------------------------- the Grafana dashboard

TELEMETRY_METRICS = {
    "wattsched_platform_power_watts", "wattsched_forecast_power_watts", "wattsched_telemetry_age_seconds",
    "wattsched_telemetry_stale", "wattsched_node_power_watts", "wattsched_node_cap_watts",
    "wattsched_node_freq_hertz",
}


def daemon_metric_names() -> set[str]:
    """Every wattsched_* name the daemon and the node agent export."""
    import tempfile

    from wattsched.agent.server import SysfsCollector
    from wattsched.agent.sysfs import Sysfs
    from wattsched.testing.fake_sysfs import make_fake_node

    names = set(TELEMETRY_METRICS)
    with tempfile.TemporaryDirectory() as root:
        make_fake_node(root)
        agent = CollectorRegistry()
        agent.register(SysfsCollector(Sysfs(root)))
        families = list(agent.collect())
    for family in [*DaemonMetrics(CollectorRegistry()).registry.collect(), *families]:
        suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "info": ("_info",)}
        names.add(family.name)
        names.update(family.name + s for s in suffixes.get(family.type, ()))
    return names


def test_dashboard_structure():
    dash = json.loads(DASHBOARD.read_text())
    assert 36 <= dash["schemaVersion"] <= 39
    assert [i["name"] for i in dash["__inputs"]] == ["DS_PROMETHEUS"]
    assert any(v["name"] == "DS_PROMETHEUS" and v["type"] == "datasource" for v in dash["templating"]["list"])
    panels = list(iter_panels(dash))
    assert len(panels) >= 12
    for panel in panels:
        exprs = [t.get("expr", "").strip() for t in panel.get("targets", [])]
        assert any(exprs), f"panel {panel['title']!r} has no query"
        assert panel["datasource"]["uid"] == "${DS_PROMETHEUS}"
        assert all(t["datasource"]["uid"] == "${DS_PROMETHEUS}" for t in panel["targets"])
    assert len({p["id"] for p in panels}) == len(panels)
    titles = [p["title"] for p in panels]
    assert "RAPL package and DRAM power per node" in titles  # inside the collapsed row


def test_dashboard_queries_use_the_daemon_metrics():
    queries = panel_queries(DASHBOARD)
    exprs = "\n".join(e for _, e in queries)
    for needed in ["wattsched_platform_power_watts", "wattsched_power_cap_watts", "wattsched_forecast_power_watts",
                   "wattsched_node_power_watts", "wattsched_node_cap_watts", "wattsched_node_freq_hertz",
                   "wattsched_jobs", "wattsched_held_jobs", "rate(wattsched_decisions_total[1m])",
                   "wattsched_cycle_duration_seconds_bucket", "wattsched_telemetry_age_seconds",
                   "rate(node_rapl_package_joules_total"]:
        assert needed in exprs, needed
    unknown = set(re.findall(r"\bwattsched_\w+", exprs)) - daemon_metric_names()
    assert not unknown, f"the dashboard uses metrics the daemon does not export: {sorted(unknown)}"
    assert "$" not in exprs and "[[" not in exprs  # every variable substituted


def test_panel_queries_substitutes_variables(tmp_path):
    dash = {
        "templating": {"list": [{"name": "node", "type": "query"}, {"name": "DS", "type": "datasource"},
                                {"name": "window", "type": "interval", "query": "5m,10m"}]},
        "panels": [
            {"type": "timeseries", "title": "a", "targets": [
                {"expr": 'rate(x{node=~"$node"}[$__rate_interval])'}, {"expr": ""}, {"expr": "rate(w[$window])"},
                {"expr": 'y{node=~"${node:regex}"}[$__interval]'}]},
            {"type": "row", "title": "r", "collapsed": True, "panels": [
                {"type": "stat", "title": "b", "targets": [{"expr": 'z{n=~"[[node]]"}'}]}]},
        ],
    }
    path = tmp_path / "d.json"
    path.write_text(json.dumps(dash))
    assert panel_queries(path) == [
        ("a", 'rate(x{node=~".*"}[1m])'), ("a", "rate(w[5m])"), ("a", 'y{node=~".*"}[15s]'), ("b", 'z{n=~".*"}'),
    ]


def test_every_dashboard_query_runs_on_prometheus(lab):
    failures = []
    for title, expr in panel_queries(DASHBOARD):
        body = urllib.parse.urlencode({"query": expr}).encode()
        try:
            with urllib.request.urlopen(lab.url + "/api/v1/query", data=body, timeout=5) as r:
                reply = json.loads(r.read())
        except urllib.error.HTTPError as exc:
            reply = json.loads(exc.read())
        if reply.get("status") != "success":
            failures.append(f"{title}: {expr}: {reply.get('errorType')}: {reply.get('error')}")
    assert not failures, "\n".join(failures)
    # a query that does not parse is caught the same way
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(lab.url + "/api/v1/query", data=b"query=rate(x[1m]", timeout=5)
    assert info.value.code == 400 and json.loads(info.value.read())["errorType"] == "bad_data"


def test_oversized_replies_are_refused_naming_the_url_and_limit(canned, agents):
    """A reply past the bound is refused, not read into the daemon's memory."""
    url = canned((200, json.dumps(vector(({"instance": "a:1"}, [1000, "1"])) | {"pad": "x" * 5000}).encode()))
    with pytest.raises(TelemetryError, match=r"the reply from http://127\.0\.0\.1:\d+/prom/api/v1/query is larger "
                       r"than 4096 bytes and was refused"):
        PrometheusSource(url, "ipmi", max_reply_bytes=4096).read()
    assert PrometheusSource(url, "ipmi", node_map=STRIP_PORT, clock=lambda: 1000.0).read().watts == {"a": 1.0}
    _, _, metrics = agents({f"package-{i}": 1.0 for i in range(200)})
    with pytest.raises(TelemetryError, match=rf"\({metrics}: the answer is larger than 4096 bytes and was refused "
                       r"\(an agent's /metrics is a few KiB\)\)"):
        AgentScraper({"cn01": metrics}, max_reply_bytes=4096).read()
