"""report.html in a real headless Chromium (Debian's ``chromium``): it loads without a console message, the
interactive timeline draws, and a screenshot keeps the layout (verdict header on top, the charts below it).

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
