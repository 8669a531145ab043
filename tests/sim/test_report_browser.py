"""report.html in a real headless Chromium (Debian's ``chromium``): it loads without a console message, the
interactive timeline draws, a screenshot keeps the layout (verdict header on top, the charts below it), and,
driven over the DevTools protocol, the timeline zooms from the whole run to a minute and shows values on hover.

The page of a real ``wattsched simulate`` run of the bundled KTH SP2 excerpt under a 60 % cap with a baseline.
Screenshots are checked by size and by where colours appear, never pixel for pixel (fonts differ by machine).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from importlib.resources import as_file, files

import numpy as np
import pytest

from wattsched.cli import main

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(CHROMIUM is None, reason="no chromium (scripts/install-system-deps installs Debian's)"),
]
WIDTH, HEIGHT = 1280, 1600
POWER_BLUE = (0x1F, 0x77, 0xB4)  # the timeline's power series
VERDICT_RED, VERDICT_GREEN = (0xC6, 0x28, 0x28), (0x2E, 0x7D, 0x32)  # the verdict badges


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = tmp_path_factory.mktemp("browser") / "run"
    with as_file(files("wattsched") / "data" / "traces" / "KTH-SP2-1996-2.1-cln-first5000.swf.gz") as trace:
        assert main(["simulate", "--trace", str(trace), "--procs", "100", "--policy", "easy-pc", "--predictor",
                     "history", "--cap", "60%", "--baseline", "easy", "--out", str(out), "-q"]) == 0
    return out / "report.html"


def chromium(page, tmp_path, *args: str) -> subprocess.CompletedProcess:
    """Chromium headless on ``page``, console messages logged to stderr; given time for the page's scripts."""
    return subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
         f"--user-data-dir={tmp_path / 'profile'}", "--enable-logging=stderr", "--v=0",
         f"--window-size={WIDTH},{HEIGHT}", "--virtual-time-budget=10000", *args, page.as_uri()],
        capture_output=True, text=True, timeout=120, check=True)


def test_the_page_loads_without_console_messages_and_the_timeline_draws(report, tmp_path):
    done = chromium(report, tmp_path, "--dump-dom")
    console = [line for line in done.stderr.splitlines() if ":CONSOLE" in line]
    assert console == []  # the page logs nothing; an error (uncaught or console.error) would be here
    dom = done.stdout
    assert re.search(r'<div id="timeline" data-rendered="\d+">', dom), "the chart code did not finish"
    for chart in ("tl-power", "tl-nodes"):
        assert re.search(rf'<div id="{chart}"><div class="uplot[^"]*">.*?<canvas ', dom, re.S), chart
    assert re.search(r'<p id="tl-error" class="warn"></p>', dom)  # no error shown on the page either
    assert "Platform power against the cap" in dom and "pending jobs" in dom


def test_a_screenshot_keeps_the_verdict_on_top_and_the_charts_drawn(report, tmp_path):
    from PIL import Image

    shot = tmp_path / "report.png"
    chromium(report, tmp_path, f"--screenshot={shot}")
    image = np.asarray(Image.open(shot).convert("RGB")).astype(int)
    assert image.shape == (HEIGHT, WIDTH, 3)

    def rows_with(colour, wide=3, tolerance=30) -> tuple[np.ndarray, int]:
        """Rows with at least ``wide`` pixels of ``colour``, and how many pixels have it."""
        close = (np.abs(image - np.array(colour)) <= tolerance).all(axis=2)
        return np.flatnonzero(close.sum(axis=1) >= wide), int(close.sum())

    badge_rows, _ = rows_with(VERDICT_RED, wide=60)  # the badges are solid blocks; the charts' red is thin
    green_rows, _ = rows_with(VERDICT_GREEN, wide=60)
    badges = np.union1d(badge_rows, green_rows)
    assert badges.size and badges.max() < 400, "the verdict header is not at the top of the page"
    power_rows, power_pixels = rows_with(POWER_BLUE)
    charted = power_rows[(power_rows > badges.max())]
    assert power_pixels > 2000 and charted.size > 100, "the timeline's canvas is blank"
    assert charted.min() < 1000, "the timeline is not right under the verdict"


class DevTools:
    """A page of a headless Chromium driven over the DevTools protocol (aiohttp's websocket client)."""

    def __init__(self, ws):
        self.ws = ws
        self.events: list[dict] = []
        self._id = 0

    async def call(self, method: str, **params):
        self._id += 1
        await self.ws.send_json({"id": self._id, "method": method, "params": params})
        while True:
            message = await self.ws.receive_json(timeout=60)
            if message.get("id") == self._id:
                assert "error" not in message, message
                return message.get("result", {})
            self.events.append(message)

    async def js(self, expression: str):
        result = await self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        assert "exceptionDetails" not in result, result
        return result["result"].get("value")

    async def mouse(self, kind: str, x: float, y: float, **extra):
        await self.call("Input.dispatchMouseEvent", type=kind, x=x, y=y, **extra)


async def drive(page, tmp_path, script):
    """Start Chromium with a DevTools port, open ``page`` and run ``script(devtools)``."""
    import asyncio

    aiohttp = pytest.importorskip("aiohttp")
    proc = subprocess.Popen(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--remote-debugging-port=0",
         f"--user-data-dir={tmp_path / 'devtools-profile'}", f"--window-size={WIDTH},{HEIGHT}", "about:blank"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        port = None
        for line in proc.stderr:  # "DevTools listening on ws://127.0.0.1:PORT/devtools/browser/..."
            found = re.search(r"DevTools listening on ws://127\.0\.0\.1:(\d+)/", line)
            if found:
                port = int(found.group(1))
                break
        assert port, "chromium did not open its DevTools port"
        async with aiohttp.ClientSession() as session:
            async with session.get(f"http://127.0.0.1:{port}/json/list") as answer:
                target = next(t for t in await answer.json() if t["type"] == "page")
            async with session.ws_connect(target["webSocketDebuggerUrl"], max_msg_size=0) as ws:
                tools = DevTools(ws)
                for domain in ("Runtime.enable", "Log.enable", "Page.enable"):
                    await tools.call(domain)
                await tools.call("Page.navigate", url=page.as_uri())
                for _ in range(200):
                    if await tools.js("document.getElementById('timeline')?.dataset.rendered || ''"):
                        break
                    await asyncio.sleep(0.1)
                return await script(tools)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_the_timeline_zooms_from_the_whole_run_to_a_minute_and_shows_values_on_hover(report, tmp_path):
    import asyncio

    async def script(tools: DevTools):
        ranges = "window.wattschedTimeline.map(u => [u.scales.x.min, u.scales.x.max])"
        (lo, hi), _ = await tools.js(ranges)
        assert hi - lo > 30 * 86400  # the whole run first: two months of the excerpt
        box = await tools.js("(r => [r.left, r.top, r.width, r.height])("
                             "document.querySelector('#tl-power .u-over').getBoundingClientRect())")
        x, y = box[0] + box[2] / 2, box[1] + box[3] / 2
        await tools.mouse("mouseMoved", x, y)
        for _ in range(60):  # scroll in at the cursor until a minute or so is left across the chart
            await tools.mouse("mouseWheel", x, y, deltaX=0, deltaY=-100)
        whole = hi - lo
        (lo, hi), (lo2, hi2) = await tools.js(ranges)
        assert 30 <= hi - lo <= 120, (lo, hi)
        assert (lo2, hi2) == (lo, hi)  # the busy-nodes chart zoomed with it
        await tools.mouse("mouseMoved", x + 5, y)
        values = await tools.js(
            "[...document.querySelectorAll('#tl-power .u-legend .u-value')].map(e => e.textContent)")
        assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", values[0]), values  # the time at the cursor
        assert re.fullmatch(r"[\d.,]+ kW", values[1]), values  # the power there
        drawn = await tools.js("""(() => {
            const c = document.querySelector('#tl-power canvas');
            const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
            let n = 0;
            // the power line (blue), or where power is above the cap the red line drawn over it
            for (let i = 0; i < d.length; i += 4)
              if (d[i + 3] && ((d[i] < 80 && d[i + 2] > 150) || (d[i] > 150 && d[i + 1] < 80 && d[i + 2] < 80))) n++;
            return n;
        })()""")
        assert drawn > 100  # the power line is still drawn a minute wide
        await tools.mouse("mousePressed", x, y, button="left", clickCount=2)
        await tools.mouse("mouseReleased", x, y, button="left", clickCount=2)
        (lo, hi), _ = await tools.js(ranges)
        assert hi - lo == pytest.approx(whole)  # a double click shows the whole run again
        problems = [e for e in tools.events if e.get("method") in ("Runtime.exceptionThrown",
                                                                  "Runtime.consoleAPICalled", "Log.entryAdded")]
        return problems

    assert asyncio.run(drive(report, tmp_path, script)) == []
