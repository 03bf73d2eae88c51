"""Headless Chromium driven over the DevTools protocol on a pipe, for the HTML report's browser tests.

NUL-separated JSON on fds 3/4 (`--remote-debugging-pipe`), so no websocket client or other
package is needed; the browser tests skip only when no Chromium binary exists."""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import queue
import shutil
import subprocess
import threading
import time
from pathlib import Path


def find_chromium() -> str | None:
    for name in (os.environ.get("LIFESEARCH_CHROMIUM"), "chromium", "chromium-browser", "google-chrome"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


class Browser:
    """Headless Chromium driven over CDP on a pipe; events are kept for the checks."""

    def __init__(self, binary: str, profile: Path):
        to_chrome_r, self._w = os.pipe()
        self._r, from_chrome_w = os.pipe()
        self._stderr = open(profile.parent / "chromium.log", "wb")  # noqa: SIM115 (closed in close())

        def fds():  # the protocol's fixed descriptors: 3 = commands in, 4 = replies out
            # via copies above 10, in case a pipe end itself is fd 3 or 4
            r, w = fcntl.fcntl(to_chrome_r, fcntl.F_DUPFD, 10), fcntl.fcntl(from_chrome_w, fcntl.F_DUPFD, 10)
            os.dup2(r, 3)
            os.dup2(w, 4)

        flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--no-first-run", "--no-default-browser-check", "--remote-debugging-pipe",
                 f"--user-data-dir={profile}", "about:blank"]  # fmt: skip
        self.proc = subprocess.Popen(
            [binary, *flags], pass_fds=(3, 4), preexec_fn=fds, stdout=subprocess.DEVNULL, stderr=self._stderr
        )
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self.inbox: queue.Queue = queue.Queue()
        self.events: list[dict] = []
        self._id = 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        buf = b""
        while chunk := os.read(self._r, 1 << 20):
            buf += chunk
            *msgs, buf = buf.split(b"\0")
            for m in msgs:
                self.inbox.put(json.loads(m))
        self.inbox.put(None)

    def _next(self, deadline: float) -> dict:
        try:
            msg = self.inbox.get(timeout=max(0.01, deadline - time.monotonic()))
        except queue.Empty:
            raise TimeoutError("no reply from Chromium") from None
        if msg is None:
            raise RuntimeError(f"Chromium exited (rc {self.proc.poll()})")
        return msg

    def call(self, method: str, params: dict | None = None, session: str | None = None, timeout: float = 60) -> dict:
        self._id += 1
        msg = {"id": self._id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._w, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            reply = self._next(deadline)
            if reply.get("id") == self._id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply["result"]
            self.events.append(reply)

    def open(self, url: str, width: int = 1280, height: int = 2000) -> Page:
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        sid = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.call(f"{domain}.enable", session=sid)
        metrics = {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}
        self.call("Emulation.setDeviceMetricsOverride", metrics, session=sid)
        self.call("Page.navigate", {"url": url}, session=sid)
        deadline = time.monotonic() + 60
        while not any(e.get("method") == "Page.loadEventFired" and e.get("sessionId") == sid for e in self.events):
            self.events.append(self._next(deadline))
        return Page(self, sid)

    def close(self) -> None:
        with contextlib.suppress(RuntimeError, TimeoutError, OSError):
            self.call("Browser.close", timeout=10)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        os.close(self._w)
        self._stderr.close()


class Page:
    def __init__(self, browser: Browser, session: str):
        self.browser, self.session = browser, session

    def eval(self, expression: str):
        r = self.browser.call("Runtime.evaluate", {"expression": expression, "returnByValue": True}, session=self.session)
        if "exceptionDetails" in r:
            raise RuntimeError(f"page script failed: {r['exceptionDetails']}")
        return r["result"].get("value")

    def _events(self, *methods: str) -> list[dict]:
        self.eval("0")  # a round trip so events sent before it are in
        return [e for e in self.browser.events if e.get("sessionId") == self.session and e.get("method") in methods]

    def errors(self) -> list[str]:
        out = []
        for ev in self._events("Runtime.consoleAPICalled", "Runtime.exceptionThrown", "Log.entryAdded"):
            p = ev["params"]
            if ev["method"] == "Runtime.exceptionThrown":
                out.append(json.dumps(p["exceptionDetails"])[:300])
            elif ev["method"] == "Runtime.consoleAPICalled" and p["type"] in ("error", "assert"):
                out.append(json.dumps(p["args"])[:300])
            elif ev["method"] == "Log.entryAdded" and p["entry"]["level"] == "error":
                out.append(p["entry"]["text"])
        return out

    def requests(self) -> list[str]:
        return [e["params"]["request"]["url"] for e in self._events("Network.requestWillBeSent")]

    def screenshot(self, path: Path) -> Path:
        data = self.browser.call("Page.captureScreenshot", {"format": "png"}, session=self.session)["data"]
        path.write_bytes(base64.b64decode(data))
        return path


TABLES_JS = """JSON.stringify(Object.fromEntries([...document.querySelectorAll('table[id]')].map(t =>
  [t.id, [...t.tBodies[0].rows].map(r => [...r.cells].map(c => c.textContent.trim()))])))"""


# The page's layout at the window's width: how far the page overflows it, the tables that scroll
# in their own box, chart texts outside their chart, and overlapping scatter labels.
LAYOUT_JS = """JSON.stringify({
  page: document.documentElement.scrollWidth - document.documentElement.clientWidth,
  scrolled: [...document.querySelectorAll('.wide')].filter(d => d.scrollWidth > d.clientWidth + 1)
    .map(d => d.querySelector('table').id),
  outside: [...document.querySelectorAll('svg.chart text')].filter(t => {
      const r = t.getBoundingClientRect(), s = t.ownerSVGElement.getBoundingClientRect();
      return r.left < s.left - 0.5 || r.right > s.right + 0.5 || r.top < s.top - 0.5 || r.bottom > s.bottom + 0.5; })
    .map(t => t.textContent),
  overlaps: (() => { const b = [...document.querySelectorAll('#chart-scatter text.pl')]
      .map(t => [t.textContent, t.getBoundingClientRect()]); const out = [];
    for (let i = 0; i < b.length; i++) for (let j = i + 1; j < b.length; j++) {
      const [p, q] = [b[i][1], b[j][1]];
      if (p.left < q.right && q.left < p.right && p.top < q.bottom && q.top < p.bottom) out.push([b[i][0], b[j][0]]); }
    return out; })()})"""
