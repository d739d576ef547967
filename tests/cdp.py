"""A tiny Chrome DevTools Protocol client over ``--remote-debugging-pipe`` (standard library only).

Chromium reads NUL-terminated JSON commands from fd 3 and writes replies and events to fd 4, so no
websocket and no port is needed: robust on a small CI box, and nothing listens on the network.
Used by the browser tests to load a report, record every request, console message, exception and
dialog, query the DOM, and take screenshots.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any


def find_chromium() -> str | None:
    """Path of a Chromium/Chrome executable, or None."""
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


class CDPError(RuntimeError):
    """A DevTools command failed or timed out."""


class Browser:
    """One headless Chromium driven over the DevTools pipe."""

    def __init__(self, executable: str, timeout_s: float = 60.0):
        self.timeout_s = timeout_s
        self._profile = tempfile.mkdtemp(prefix="na-chromium-")
        to_chrome_r, to_chrome_w = os.pipe()
        from_chrome_r, from_chrome_w = os.pipe()
        # Move the child's ends above fd 3/4 first, so the dup2 calls below cannot clobber each other.
        child_in = os.dup(to_chrome_r) if to_chrome_r > 4 else _dup_high(to_chrome_r)
        child_out = os.dup(from_chrome_w) if from_chrome_w > 4 else _dup_high(from_chrome_w)
        os.close(to_chrome_r)
        os.close(from_chrome_w)

        def wire_fds() -> None:  # runs in the child before exec
            os.dup2(child_in, 3)
            os.dup2(child_out, 4)

        args = [
            executable, "--headless", "--remote-debugging-pipe", "--disable-gpu", "--no-first-run",
            "--no-default-browser-check", "--disable-extensions", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--disable-default-apps", "--mute-audio",
            "--disable-dev-shm-usage", "--hide-scrollbars", f"--user-data-dir={self._profile}",
        ]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            args.append("--no-sandbox")  # Chromium refuses to start as root with its sandbox (CI containers)
        args.append("about:blank")
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, pass_fds=(child_in, child_out, 3, 4),
                                     preexec_fn=wire_fds)
        os.close(child_in)
        os.close(child_out)
        self._out = os.fdopen(to_chrome_w, "wb", buffering=0)
        self._in = os.fdopen(from_chrome_r, "rb", buffering=0)
        self._next_id = 0
        self._lock = threading.Lock()
        self._cond = threading.Condition()
        self._replies: dict[int, dict[str, Any]] = {}
        self.events: list[dict[str, Any]] = []
        self._reader = threading.Thread(target=self._read_loop, daemon=True)
        self._reader.start()
        self.send("Browser.getVersion")

    def _read_loop(self) -> None:
        buf = b""
        while True:
            try:
                chunk = self._in.read(65536)
            except OSError:
                chunk = b""
            if not chunk:
                with self._cond:
                    self._replies[-1] = {"error": {"message": "browser closed the pipe"}}
                    self._cond.notify_all()
                return
            buf += chunk
            while b"\0" in buf:
                raw, buf = buf.split(b"\0", 1)
                msg = json.loads(raw)
                with self._cond:
                    if "id" in msg:
                        self._replies[msg["id"]] = msg
                    else:
                        self.events.append(msg)
                        self._on_event(msg)
                    self._cond.notify_all()

    def _on_event(self, msg: dict[str, Any]) -> None:
        # Answer dialogs and paused requests from the reader thread so a page can never hang the test.
        if msg.get("method") == "Page.javascriptDialogOpening":
            self._post("Page.handleJavaScriptDialog", {"accept": False}, msg.get("sessionId"))
        elif msg.get("method") == "Fetch.requestPaused":
            params = msg["params"]
            if params["request"]["url"] == getattr(self, "allowed_url", None):
                self._post("Fetch.continueRequest", {"requestId": params["requestId"]}, msg.get("sessionId"))
            else:
                self._post("Fetch.failRequest", {"requestId": params["requestId"], "errorReason": "BlockedByClient"},
                           msg.get("sessionId"))

    def _post(self, method: str, params: dict | None, session_id: str | None) -> int:
        with self._lock:
            self._next_id += 1
            msg_id = self._next_id
            msg: dict[str, Any] = {"id": msg_id, "method": method, "params": params or {}}
            if session_id:
                msg["sessionId"] = session_id
            self._out.write(json.dumps(msg).encode() + b"\0")
        return msg_id

    def send(self, method: str, params: dict | None = None, session_id: str | None = None) -> dict[str, Any]:
        """Send a command and wait for its result."""
        msg_id = self._post(method, params, session_id)
        deadline = time.monotonic() + self.timeout_s
        with self._cond:
            while msg_id not in self._replies:
                if -1 in self._replies:
                    raise CDPError(f"{method}: {self._replies[-1]['error']['message']}")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise CDPError(f"{method}: no reply in {self.timeout_s:.0f} s")
                self._cond.wait(left)
            reply = self._replies.pop(msg_id)
        if "error" in reply:
            raise CDPError(f"{method}: {reply['error'].get('message')}")
        return reply.get("result", {})

    def wait_event(self, method: str, session_id: str, since: int = 0) -> dict[str, Any]:
        """The first event ``method`` of ``session_id`` at index ``since`` or later (waits for it)."""
        deadline = time.monotonic() + self.timeout_s
        with self._cond:
            while True:
                for ev in self.events[since:]:
                    if ev.get("method") == method and ev.get("sessionId") == session_id:
                        return ev
                left = deadline - time.monotonic()
                if left <= 0:
                    raise CDPError(f"no {method} event in {self.timeout_s:.0f} s")
                self._cond.wait(left)

    def close(self) -> None:
        """Close the browser and remove its profile."""
        try:
            self._post("Browser.close", None, None)
            self.proc.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired, ValueError):
            self.proc.kill()
            self.proc.wait(timeout=10)
        for f in (self._out, self._in):
            try:
                f.close()
            except OSError:
                pass
        shutil.rmtree(self._profile, ignore_errors=True)


def _dup_high(fd: int) -> int:
    import fcntl

    return fcntl.fcntl(fd, fcntl.F_DUPFD, 10)


class PageLoad:
    """What happened while one page loaded: requests, console messages, exceptions, dialogs; plus DOM access."""

    def __init__(self, browser: Browser, session_id: str, url: str, first_event: int):
        self.browser, self.session_id, self.url, self.first_event = browser, session_id, url, first_event

    def _events(self, method: str) -> list[dict[str, Any]]:
        return [e["params"] for e in self.browser.events[self.first_event:]
                if e.get("method") == method and e.get("sessionId") == self.session_id]

    @property
    def requests(self) -> list[str]:
        """Every URL the page asked for, except the report itself."""
        urls = [p["request"]["url"] for p in self._events("Network.requestWillBeSent")]
        urls += [p["request"]["url"] for p in self._events("Fetch.requestPaused")]
        return sorted({u for u in urls if u != self.url})

    @property
    def console_errors(self) -> list[str]:
        """Console errors and warnings, uncaught exceptions and log errors (CSP violations land here)."""
        out = [" ".join(str(a.get("value", a.get("description", ""))) for a in p.get("args", []))
               for p in self._events("Runtime.consoleAPICalled") if p.get("type") in ("error", "warning", "assert")]
        out += [p["exceptionDetails"].get("text", "") + " " +
                str(p["exceptionDetails"].get("exception", {}).get("description", ""))
                for p in self._events("Runtime.exceptionThrown")]
        out += [p["entry"].get("text", "") for p in self._events("Log.entryAdded")
                if p["entry"].get("level") in ("error", "warning")]
        return out

    @property
    def dialogs(self) -> list[str]:
        """Messages of every alert/confirm/prompt the page opened."""
        return [p.get("message", "") for p in self._events("Page.javascriptDialogOpening")]

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (run by the test, not by the page)."""
        res = self.browser.send("Runtime.evaluate", {"expression": expression, "returnByValue": True},
                                self.session_id)
        if "exceptionDetails" in res:
            raise CDPError(f"evaluate failed: {res['exceptionDetails']}")
        return res["result"].get("value")

    def screenshot(self, path: Path, width: int = 1280, height: int | None = None) -> Path:
        """Save a PNG of the page at ``width`` CSS pixels (the whole page when ``height`` is None)."""
        full_h = height or int(self.evaluate("Math.ceil(document.documentElement.scrollHeight)"))
        self.browser.send("Emulation.setDeviceMetricsOverride",
                          {"width": width, "height": min(full_h, 16000), "deviceScaleFactor": 1, "mobile": False},
                          self.session_id)
        data = self.browser.send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": height is None},
                                 self.session_id)["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))
        return path

    def print_pdf(self) -> bytes:
        """The page printed to PDF (what a reviewer gets from the print dialog)."""
        data = self.browser.send("Page.printToPDF", {"printBackground": False}, self.session_id)["data"]
        return base64.b64decode(data)


def load(browser: Browser, path: Path, *, javascript: bool = True, width: int = 1280, height: int = 900) -> PageLoad:
    """Open ``path`` in a new tab with every request recorded and every non-report request failed."""
    url = path.resolve().as_uri()
    browser.allowed_url = url
    target = browser.send("Target.createTarget", {"url": "about:blank"})["targetId"]
    session = browser.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
    first = len(browser.events)
    for method in ("Page.enable", "Runtime.enable", "Log.enable", "Network.enable"):
        browser.send(method, None, session)
    browser.send("Fetch.enable", {"patterns": [{"urlPattern": "*"}]}, session)
    browser.send("Emulation.setDeviceMetricsOverride",
                 {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}, session)
    if not javascript:
        browser.send("Emulation.setScriptExecutionDisabled", {"value": True}, session)
    mark = len(browser.events)
    browser.send("Page.navigate", {"url": url}, session)
    browser.wait_event("Page.loadEventFired", session, since=mark)
    time.sleep(0.2)  # let late console messages arrive
    return PageLoad(browser, session, url, first)
