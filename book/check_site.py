#!/usr/bin/env python3
"""Open every page of the built HTML book in headless Chromium and report
JavaScript errors, images or other resources that fail to load, and internal
links or anchors that lead nowhere.

    python3 book/check_site.py build/book [--screenshots]

Chromium is driven over its DevTools protocol through --remote-debugging-pipe
(file descriptors 3 and 4, messages are JSON ending in a NUL byte), so no port
is opened and nothing beyond the standard library is needed. With
--screenshots, screenshots/front.png, screenshots/chapter.png and
screenshots/chapter-phone.png are saved into the site directory.
"""

from __future__ import annotations

import argparse
import base64
import fcntl
import json
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlsplit

CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-dev-shm-usage", "--hide-scrollbars", "--mute-audio",
    "--remote-debugging-pipe",
]
DESKTOP = {"width": 1280, "height": 900, "deviceScaleFactor": 1, "mobile": False}
PHONE = {"width": 390, "height": 844, "deviceScaleFactor": 2, "mobile": True}

# Collected in the page once it has loaded.
INSPECT_JS = r"""
(() => {
  const broken = Array.from(document.images)
    .filter(img => !img.complete || img.naturalWidth === 0)
    .map(img => img.getAttribute("src"));
  const links = Array.from(document.querySelectorAll("a[href]"))
    .map(a => [a.getAttribute("href"), a.href]);
  const ids = Array.from(document.querySelectorAll("[id], a[name]"))
    .map(e => e.id || e.getAttribute("name"));
  return JSON.stringify({broken, links, ids, title: document.title});
})()
"""

SEARCH_JS = r"""
new Promise(resolve => {
  const box = document.getElementById("search-box");
  if (!box) { resolve(-1); return; }
  box.focus();
  box.value = %s;
  box.dispatchEvent(new Event("input", {bubbles: true}));
  setTimeout(() => resolve(document.querySelectorAll("#search-results a").length), 400);
})
"""


class ChromiumError(Exception):
    pass


def find_chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    raise ChromiumError("Chromium is not installed (Debian package: chromium)")


class Browser:
    """A headless Chromium and a DevTools protocol connection to it."""

    def __init__(self):
        self.profile = tempfile.mkdtemp(prefix="book-chromium-")
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()
        # The child's ends go out of the way of fds 3 and 4 before the shell
        # moves them there (pytest, for one, keeps files open on low fds).
        to_chrome_r, from_chrome_w = (self._high(to_chrome_r), self._high(from_chrome_w))
        cmd = [find_chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={self.profile}", "about:blank"]
        # Chromium reads commands from fd 3 and writes to fd 4.
        shell = 'exec "$@" 3<&%d 4>&%d' % (to_chrome_r, from_chrome_w)
        self.proc = subprocess.Popen(["bash", "-c", shell, "bash", *cmd],
                                     pass_fds=(to_chrome_r, from_chrome_w),
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE)
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._next_id = 0
        self._replies: dict[int, queue.Queue] = {}
        self._lock = threading.Lock()
        self.events: queue.Queue = queue.Queue()
        self._stderr: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()
        self.call("Browser.getVersion", timeout=30)

    @staticmethod
    def _high(fd: int) -> int:
        new = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 64)
        os.close(fd)
        return new

    def _read(self) -> None:
        buf = b""
        while True:
            try:
                chunk = os.read(self._from_chrome, 1 << 16)
            except OSError:
                chunk = b""
            if not chunk:
                self.events.put(None)
                for q in list(self._replies.values()):
                    q.put({"error": {"message": "Chromium went away"}})
                return
            buf += chunk
            while b"\0" in buf:
                raw, buf = buf.split(b"\0", 1)
                msg = json.loads(raw)
                if "id" in msg:
                    with self._lock:
                        q = self._replies.pop(msg["id"], None)
                    if q:
                        q.put(msg)
                else:
                    self.events.put(msg)

    def _read_stderr(self) -> None:
        for line in self.proc.stderr:
            self._stderr.append(line.decode(errors="replace"))

    def call(self, method: str, params: dict | None = None, session: str | None = None,
             timeout: float = 20) -> dict:
        with self._lock:
            self._next_id += 1
            ident = self._next_id
            q: queue.Queue = queue.Queue()
            self._replies[ident] = q
        msg = {"id": ident, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        try:
            os.write(self._to_chrome, json.dumps(msg).encode() + b"\0")
        except BrokenPipeError:
            raise ChromiumError(f"{method}: Chromium is not running" + self.last_words()) from None
        try:
            reply = q.get(timeout=timeout)
        except queue.Empty:
            raise ChromiumError(f"no answer to {method} within {timeout}s") from None
        if "error" in reply:
            raise ChromiumError(f"{method}: {reply['error'].get('message')}" + self.last_words())
        return reply.get("result", {})

    def last_words(self) -> str:
        time.sleep(0.2)
        tail = "".join(self._stderr[-8:]).strip()
        return f"\nChromium said:\n{tail}" if tail else ""

    def close(self) -> None:
        try:
            self.call("Browser.close", timeout=5)
        except ChromiumError:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._to_chrome)
        shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


@dataclass
class PageReport:
    url: str
    errors: list[str] = field(default_factory=list)      # JS errors, failed loads, broken images
    links: list[tuple[str, str]] = field(default_factory=list)   # (as written, resolved)
    ids: set[str] = field(default_factory=set)
    title: str = ""
    search_hits: int | None = None


def visit(browser: Browser, url: str, metrics: dict = DESKTOP, screenshot: Path | None = None,
          search: str | None = None, timeout: float = 30) -> PageReport:
    report = PageReport(url)
    target = browser.call("Target.createTarget", {"url": "about:blank"})["targetId"]
    session = browser.call("Target.attachToTarget",
                           {"targetId": target, "flatten": True})["sessionId"]
    requests: dict[str, str] = {}

    def drain(until_load: bool, deadline: float) -> bool:
        loaded = False
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or (loaded and until_load):
                return loaded
            try:
                ev = browser.events.get(timeout=min(left, 0.5) if not until_load else left)
            except queue.Empty:
                if not until_load:
                    return loaded
                continue
            if ev is None:
                raise ChromiumError("Chromium exited: " + "".join(browser._stderr[-5:]))
            if ev.get("sessionId") != session:
                continue
            method, p = ev["method"], ev.get("params", {})
            if method == "Page.loadEventFired":
                loaded = True
            elif method == "Runtime.exceptionThrown":
                d = p["exceptionDetails"]
                text = d.get("exception", {}).get("description") or d.get("text", "")
                report.errors.append(f"JavaScript error: {text.splitlines()[0] if text else d}"
                                     f" ({d.get('url', '')}:{d.get('lineNumber', 0) + 1})")
            elif method == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                args = " ".join(str(a.get("value", a.get("description", ""))) for a in p["args"])
                report.errors.append(f"console.{p['type']}: {args}")
            elif method == "Log.entryAdded" and p["entry"]["level"] == "error":
                e = p["entry"]
                report.errors.append(f"browser error: {e['text']} {e.get('url', '')}".strip())
            elif method == "Network.requestWillBeSent":
                requests[p["requestId"]] = p["request"]["url"]
            elif method == "Network.loadingFailed" and not p.get("canceled"):
                report.errors.append(f"failed to load {requests.get(p['requestId'], '?')}: "
                                     f"{p.get('errorText', '')}")

    try:
        for domain in ("Page", "Runtime", "Log", "Network"):
            browser.call(f"{domain}.enable", session=session)
        browser.call("Emulation.setDeviceMetricsOverride", metrics, session=session)
        nav = browser.call("Page.navigate", {"url": url}, session=session)
        if nav.get("errorText"):
            report.errors.append(f"cannot open page: {nav['errorText']}")
            return report
        if not drain(True, time.monotonic() + timeout):
            report.errors.append(f"page did not finish loading within {timeout}s")
        drain(False, time.monotonic() + 0.3)     # late errors and failed loads
        res = browser.call("Runtime.evaluate", {"expression": INSPECT_JS, "returnByValue": True},
                           session=session)
        info = json.loads(res["result"]["value"])
        report.title = info["title"]
        report.ids = set(info["ids"])
        report.links = [tuple(x) for x in info["links"]]
        for src in info["broken"]:
            report.errors.append(f"broken image: {src}")
        if screenshot is not None:
            layout = browser.call("Page.getLayoutMetrics", session=session)
            size = layout.get("cssContentSize") or layout["contentSize"]
            height = min(int(size["height"]), 6000)
            shot = browser.call("Page.captureScreenshot", {
                "format": "png", "captureBeyondViewport": True,
                "clip": {"x": 0, "y": 0, "width": metrics["width"], "height": height, "scale": 1},
            }, session=session, timeout=60)
            screenshot.parent.mkdir(parents=True, exist_ok=True)
            screenshot.write_bytes(base64.b64decode(shot["data"]))
        if search is not None:
            res = browser.call("Runtime.evaluate",
                               {"expression": SEARCH_JS % json.dumps(search),
                                "awaitPromise": True, "returnByValue": True}, session=session)
            report.search_hits = res["result"].get("value")
            drain(False, time.monotonic() + 0.3)
    finally:
        browser.call("Target.closeTarget", {"targetId": target})
    return report


@dataclass
class SiteReport:
    pages: dict[str, PageReport]
    problems: list[str]
    external_links: int = 0


def check_links(site: Path, pages: dict[str, PageReport]) -> tuple[list[str], int]:
    problems, external = [], 0
    root = site.resolve()
    for name, report in sorted(pages.items()):
        for written, resolved in report.links:
            parts = urlsplit(resolved)
            if parts.scheme in ("http", "https", "mailto"):
                external += 1
                continue
            if parts.scheme != "file":
                problems.append(f"{name}: link to {written}: unexpected scheme {parts.scheme}")
                continue
            target = Path(unquote(parts.path))
            try:
                rel = target.resolve().relative_to(root).as_posix()
            except ValueError:
                problems.append(f"{name}: link {written} leaves the book's directory")
                continue
            if not target.exists():
                problems.append(f"{name}: broken link {written} ({rel} does not exist)")
                continue
            frag = unquote(parts.fragment)
            if frag and rel in pages and frag not in pages[rel].ids:
                problems.append(f"{name}: broken anchor {written} (no id '{frag}' in {rel})")
            elif frag and rel.endswith(".html") and rel not in pages:
                problems.append(f"{name}: link {written} to a page that was not checked")
    return problems, external


def check_site(site: Path, pages: list[str] | None = None, screenshots: bool = False,
               search: str | None = "lru") -> SiteReport:
    """Visit the pages (default: every *.html at the top of site) and check them."""
    site = Path(site).resolve()
    if pages is None:
        pages = sorted(p.name for p in site.glob("*.html"))
    if not pages:
        return SiteReport({}, [f"{site}: no HTML pages"])
    front = "index.html" if "index.html" in pages else pages[0]
    chapters = [p for p in pages if p[:2].isdigit()]
    chapter = next((p for p in chapters if not p.startswith("00-")), chapters[0] if chapters else None)
    reports: dict[str, PageReport] = {}
    problems: list[str] = []
    with Browser() as browser:
        for name in pages:
            shot = None
            if screenshots and name == front:
                shot = site / "screenshots/front.png"
            elif screenshots and name == chapter:
                shot = site / "screenshots/chapter.png"
            rep = visit(browser, (site / name).as_uri(), screenshot=shot,
                        search=search if name == front else None)
            reports[name] = rep
            problems += [f"{name}: {e}" for e in rep.errors]
            if name == front and search is not None and not rep.search_hits:
                problems.append(f"{name}: searching for '{search}' found nothing "
                                f"(result: {rep.search_hits})")
        if screenshots and chapter:
            rep = visit(browser, (site / chapter).as_uri(), metrics=PHONE,
                        screenshot=site / "screenshots/chapter-phone.png")
            problems += [f"{chapter} (phone): {e}" for e in rep.errors]
    link_problems, external = check_links(site, reports)
    return SiteReport(reports, problems + link_problems, external)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("site", nargs="?", default="build/book")
    ap.add_argument("--screenshots", action="store_true")
    ap.add_argument("--search", default="lru", help="word to search for on the front page ('' to skip)")
    args = ap.parse_args(argv)
    try:
        report = check_site(Path(args.site), screenshots=args.screenshots,
                            search=args.search or None)
    except ChromiumError as exc:
        print(f"check_site: {exc}", file=sys.stderr)
        return 2
    for p in report.problems:
        print(p)
    print(f"check_site: {len(report.pages)} pages, {len(report.problems)} problems, "
          f"{report.external_links} external links not followed")
    return 1 if report.problems else 0


if __name__ == "__main__":
    sys.exit(main())
