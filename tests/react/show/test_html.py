"""HTML pages (react/show/runpage.py): self-contained, escaped, and checked in a real browser.

The browser test drives Debian's headless ``chromium`` through the DevTools protocol over a pipe
(``--remote-debugging-pipe``: fd 3 carries commands in, fd 4 answers out, each message JSON and a
NUL byte), so no extra Python package is needed. It opens the page from a file, waits for the
load event, asks the page whether every image decoded, collects console errors and exceptions,
and saves a screenshot (``REACT_SCREENSHOT_DIR`` keeps it for a human to look at). Without
Chromium the test is skipped and says why.
"""

import base64
import fcntl
import json
import os
import re
import select
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from react.cli import main

SCENARIOS = Path(__file__).resolve().parents[3] / "experiments" / "scenarios"
STAR = SCENARIOS / "closed_loop_star.toml"
PNG = b"\x89PNG\r\n\x1a\n"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--remote-debugging-pipe"]


@pytest.fixture(scope="module")
def run_page(tmp_path_factory):
    out = tmp_path_factory.mktemp("html")
    assert main(["run", str(STAR), "--compare", "--epochs", "13", "--warmup", "1",
                 "--no-progress", "--html", str(out)]) == 0
    pages = list(out.glob("*.html"))
    assert len(pages) == 1
    return pages[0]


def _images(text):
    return re.findall(r'<img src="([^"]*)"', text)


def test_the_run_page_is_self_contained(run_page):
    text = run_page.read_text()
    images = _images(text)
    # timeline and TEN before/after for the one job
    assert len(images) == 2
    for src in images:
        assert src.startswith("data:image/png;base64,")
        assert base64.b64decode(src.split(",", 1)[1])[:8] == PNG
    assert "<script" not in text and "http://" not in text and "https://" not in text
    for heading in ("Summary", "Decisions, with their reasons", "Collective time per epoch",
                    "The pattern before and after REACT", "Per epoch"):
        assert heading in text
    # the first decision's reason as the controller wrote it (escaped: '->' becomes '-&gt;')
    assert "steady congested" in text and "1-&gt;3" in text
    assert text.count("<tr") >= 13 + 6  # 13 epoch rows, decision rows, summary rows


def test_page_text_is_escaped():
    from react.show.runpage import story_page

    page = story_page("<b>t</b>", ["1. A <script>x</script> step. More & more."], {})
    assert "<script>" not in page and "&lt;script&gt;" in page and "&amp; more" in page


def test_demo_html_tells_the_story_with_its_pictures(tmp_path, capsys):
    assert main(["demo", "--out", str(tmp_path / "pics"), "--epochs", "13",
                 "--html", str(tmp_path / "page")]) == 0
    text = (tmp_path / "page" / "demo.html").read_text()
    headings = re.findall(r"<h2>([^<]*)</h2>", text)
    assert [h.split(".")[0] for h in headings] == [str(k) for k in range(1, 8)]
    assert len(_images(text)) == 2  # the TEN before/after and the timeline


# -- in a real browser -----------------------------------------------------------------------------
class _Browser:
    """Just enough of the DevTools protocol over a pipe, every read bounded by a deadline."""

    def __init__(self, binary: str, profile: str) -> None:
        cmd_r, self._cmd_w = os.pipe()
        self._out_r, out_w = os.pipe()

        def wire() -> None:  # in the child: our pipe ends become its fds 3 and 4
            a = fcntl.fcntl(cmd_r, fcntl.F_DUPFD, 10)
            b = fcntl.fcntl(out_w, fcntl.F_DUPFD, 10)
            os.dup2(a, 3)
            os.dup2(b, 4)

        self.proc = subprocess.Popen([binary, *FLAGS, f"--user-data-dir={profile}"],
                                     preexec_fn=wire, close_fds=False,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(cmd_r)
        os.close(out_w)
        self._buf = b""
        self._next = 0
        self.events: list[dict] = []

    def send(self, method: str, params: dict | None = None, session: str | None = None,
             timeout_s: float = 30.0) -> dict:
        self._next += 1
        msg = {"id": self._next, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._cmd_w, json.dumps(msg).encode() + b"\0")
        while True:
            reply = self._read(timeout_s)
            if reply.get("id") == self._next:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_event(self, method: str, timeout_s: float = 30.0) -> dict:
        for i, ev in enumerate(self.events):
            if ev.get("method") == method:
                return self.events.pop(i)
        while True:
            ev = self._read(timeout_s)
            if ev.get("method") == method:
                return ev
            self.events.append(ev)

    def _read(self, timeout_s: float) -> dict:
        deadline = time.monotonic() + timeout_s
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self._out_r], [], [], max(left, 0))
            if not ready:
                raise TimeoutError(f"no answer from chromium in {timeout_s} s")
            chunk = os.read(self._out_r, 1 << 20)
            if not chunk:
                raise RuntimeError("chromium closed the DevTools pipe")
            self._buf += chunk
        raw, self._buf = self._buf.split(b"\0", 1)
        return json.loads(raw)

    def close(self) -> None:
        try:
            self.send("Browser.close", timeout_s=5)
        except Exception:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
        os.close(self._cmd_w)
        os.close(self._out_r)


def _console_errors(events: list[dict]) -> list[str]:
    errors = []
    for ev in events:
        p = ev.get("params", {})
        if ev.get("method") == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            errors.append(" ".join(str(a.get("value", a.get("description"))) for a in p["args"]))
        elif ev.get("method") == "Runtime.exceptionThrown":
            errors.append(p["exceptionDetails"].get("text", "exception"))
        elif ev.get("method") == "Log.entryAdded" and p["entry"]["level"] == "error":
            errors.append(p["entry"]["text"])
    return errors


def open_in_chromium(page: Path, screenshot: Path) -> dict:
    """Load ``page``; return its images' state and the console errors; save a screenshot."""
    with tempfile.TemporaryDirectory(prefix="react-chromium-") as profile:
        browser = _Browser(CHROMIUM, profile)
        try:
            target = browser.send("Target.createTarget", {"url": "about:blank"})["targetId"]
            session = browser.send("Target.attachToTarget",
                                   {"targetId": target, "flatten": True})["sessionId"]
            for domain in ("Runtime", "Log", "Page"):
                browser.send(f"{domain}.enable", session=session)
            browser.send("Emulation.setDeviceMetricsOverride",
                         {"width": 1280, "height": 900, "deviceScaleFactor": 1,
                          "mobile": False}, session=session)
            browser.send("Page.navigate", {"url": page.resolve().as_uri()}, session=session)
            browser.wait_event("Page.loadEventFired")
            images = browser.send("Runtime.evaluate", {
                "expression": "JSON.stringify(Array.from(document.images).map(i => "
                              "({ok: i.complete && i.naturalWidth > 0, w: i.naturalWidth})))",
                "returnByValue": True}, session=session)["result"]["value"]
            height = browser.send("Runtime.evaluate", {
                "expression": "document.documentElement.scrollHeight", "returnByValue": True},
                session=session)["result"]["value"]
            shot = browser.send("Page.captureScreenshot", {
                "format": "png", "captureBeyondViewport": True,
                "clip": {"x": 0, "y": 0, "width": 1280, "height": min(height, 4000),
                         "scale": 1}}, session=session)
            screenshot.write_bytes(base64.b64decode(shot["data"]))
            time.sleep(0.2)  # late console messages
            browser.send("Runtime.evaluate", {"expression": "1"}, session=session)
            return {"images": json.loads(images), "errors": _console_errors(browser.events),
                    "height": height}
        finally:
            browser.close()


@pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium is not installed "
                    "(Debian: apt-get install chromium); the page is checked without a browser "
                    "by the other tests of this file")
@pytest.mark.parametrize("which", ["run", "demo"])
def test_pages_load_in_chromium_with_every_image_and_no_console_error(which, run_page, tmp_path):
    if which == "run":
        page = run_page
    else:
        assert main(["demo", "--out", str(tmp_path / "pics"), "--epochs", "13",
                     "--html", str(tmp_path)]) == 0
        page = tmp_path / "demo.html"
    keep = os.environ.get("REACT_SCREENSHOT_DIR")
    shot = (Path(keep) if keep else tmp_path) / f"{which}_page.png"
    seen = open_in_chromium(page, shot)
    assert seen["errors"] == []
    assert len(seen["images"]) == 2 and all(i["ok"] and i["w"] > 300 for i in seen["images"])
    assert shot.read_bytes()[:8] == PNG and shot.stat().st_size > 20_000


def test_report_html_writes_a_page_per_stored_pair_and_an_index(tmp_path, capsys):
    spec = tmp_path / "tiny.toml"
    spec.write_text(f'name = "tiny"\nbase = "{STAR}"\nseeds = [0]\nreact = "both"\n'
                    '[grid]\n"background.0.p" = [1, 2]\n"jobs.0.epochs" = [7]\n')
    store = tmp_path / "s.sqlite"
    assert main(["sweep", str(spec), "--store", str(store), "--workers", "1",
                 "--no-progress"]) == 0
    assert main(["report", "--store", str(store), "--html", str(tmp_path / "pages"),
                 "--pages", "1"]) == 0
    assert "wrote 1 page(s)" in capsys.readouterr().out
    index = (tmp_path / "pages" / "index.html").read_text()
    (link,) = re.findall(r'href="([^"]+)"', index)
    page = (tmp_path / "pages" / link).read_text()
    assert "1 more pair(s) not shown" in index
    assert "sweep tiny, point background.0.p=" in page and len(_images(page)) == 2


def test_the_ten_is_painted_from_what_the_job_saw(monkeypatch):
    # A tree whose flows run at the fair share of the busier of their 100 Gb/s links, two
    # background flows into rank 3. With delta1 = 0.5 the job's first decision finds only 7->3
    # (step 4, 33.3 Gb/s against its class's 83.3) steady congested; the defaults would flag
    # the four flows into rank 3. The "before" picture paints what the job saw: 7->3, rank 3.
    from react.control.controller import Controller, ControllerConfig
    from react.control.detect import detect_congestion
    from react.model.critical import schedule
    from react.model.observation import EpochResult, FlowTiming
    from react.patterns import allreduce_double_binary_tree
    from react.run.driver import JobRun
    from react.run.scenario import parse_scenario
    from react.show import runpage

    tree, message = allreduce_double_binary_tree(8), 20e6
    degrees = tree.degrees()
    fcts = [tree.flow_bytes(f, message) * 8 / 100e9
            * max(degrees[(f.step, f.src)][1], degrees[(f.step, f.dst)][0] + 2 * (f.dst == 3))
            for f in tree.flows]
    start, end = schedule(tree, fcts)
    timings = tuple(FlowTiming(f, float(a), float(b), tree.flow_bytes(f, message))
                    for f, a, b in zip(tree.flows, start, end, strict=True))
    batch = [EpochResult(e, float(end.max()), timings, message) for e in range(6)]
    decision = Controller(tree, ControllerConfig(delta1=0.5)).observe(batch)
    run = JobRun("tree", batch, [tree] * 6, [decision])
    scenario = parse_scenario({
        "topology": {"name": "star", "n": 8},
        "jobs": [{"name": "tree", "collective": "allreduce_double_binary_tree", "ranks": 8,
                  "message_bytes": message, "epochs": 6, "react": {"delta1": 0.5}}]})
    painted = []
    monkeypatch.setattr("react.show.draw.draw", lambda pattern, highlight=(), **kw:
                        painted.append((kw.get("title"), list(highlight))))
    runpage.run_page(scenario, {"tree": run})
    slow = next(f for f in tree.flows if (f.src, f.dst, f.step) == (7, 3, 4))
    assert painted[0] == ("before: congested flows in red", [slow, 3])
    assert len(detect_congestion(tree, batch).flows) == 4  # what a re-run with defaults sees
