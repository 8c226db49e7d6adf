"""The dashboard's page rendered by a real headless Chromium (``--dump-dom``), for the tests that look
at what a person sees: ``serve_page`` serves the page and a given ``/api/summary`` answer (a real run's,
or one built by a test) on a free local port; ``dump_dom`` is the DOM after the page's script ran;
``live_figures`` reads the header's figures out of it."""

from __future__ import annotations

import json
import re
import subprocess
import threading
from contextlib import contextmanager
from html.parser import HTMLParser
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Iterator
from urllib.parse import parse_qs, urlparse

from deploy.browser import CHROMIUM
from sinks.dashboard.page import PAGE

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--virtual-time-budget=5000", "--dump-dom"]
NO_CHROMIUM = f"{CHROMIUM} is absent: the page is not checked in a browser here (make test installs it as root)"


@contextmanager
def serve_page(summary: dict, requests: list[dict] | None = None) -> Iterator[str]:
    """The page at ``/`` and ``summary`` at ``/api/summary``; yields the page's URL. The query of each
    summary request is appended to ``requests``."""
    body = json.dumps(summary).encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            url = urlparse(self.path)
            if url.path == "/":
                self._send(PAGE.encode(), "text/html; charset=utf-8")
            elif url.path == "/api/summary":
                if requests is not None:
                    requests.append({k: v[0] for k, v in parse_qs(url.query).items()})
                self._send(body, "application/json")
            else:
                self.send_error(404)

        def _send(self, data: bytes, content_type: str) -> None:
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *_args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, name="dashboard-page", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def dump_dom(url: str, profile_dir: Path, timeout: float = 120) -> str:
    """The page's DOM after ~5 s of (virtual) time in headless Chromium."""
    result = subprocess.run([str(CHROMIUM), *CHROMIUM_FLAGS, f"--user-data-dir={profile_dir}", url],
                            capture_output=True, text=True, timeout=timeout)
    if result.returncode != 0 or "<html" not in result.stdout:
        raise RuntimeError(f"chromium failed (exit {result.returncode}): {result.stderr[-1000:]}")
    return result.stdout


class _Figures(HTMLParser):
    """Text of the elements with an id, and of the cells of each ``#detectors`` row by class."""

    def __init__(self):
        super().__init__()
        self.by_id: dict[str, str] = {}
        self.detectors: dict[str, dict[str, str]] = {}
        self.case_rows = 0
        self._open: list[tuple[str, str | None, str | None]] = []   # (tag, id, detector cell class)
        self._table: str | None = None
        self._row: str | None = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "table":
            self._table = a.get("id")
        if tag == "tr" and self._table == "detectors" and a.get("data-detector"):
            self._row = a["data-detector"]
            self.detectors[self._row] = {}
        if tag == "tr" and self._table == "cases" and a.get("data-case-id"):
            self.case_rows += 1
        classes = (a.get("class") or "").split()
        cell = classes[-1] if tag == "td" and self._row and classes else None
        self._open.append((tag, a.get("id"), cell))
        if a.get("id"):
            self.by_id[a["id"]] = ""
        if cell:
            self.detectors[self._row][cell] = ""

    def handle_endtag(self, tag):
        while self._open:
            open_tag, _, _ = self._open.pop()
            if open_tag == tag:
                break
        if tag == "tr":
            self._row = None
        if tag == "table":
            self._table = None

    def handle_data(self, data):
        for _, element_id, cell in self._open:
            if element_id:
                self.by_id[element_id] += data
            if cell and self._row:
                self.detectors[self._row][cell] += data


def live_figures(dom: str) -> dict:
    """``{"kpi": {id: text}, "detectors": {name: {"alerts", "p50", "p99", "samples": text}},
    "case_rows": n, "cases_range": text}`` of a dumped page."""
    parser = _Figures()
    parser.feed(dom)
    kpi = {k: v.strip() for k, v in parser.by_id.items() if k.startswith("kpi-")}
    detectors = {name: {k: v.strip() for k, v in cells.items()} for name, cells in parser.detectors.items()}
    return {"kpi": kpi, "detectors": detectors, "case_rows": parser.case_rows,
            "cases_range": parser.by_id.get("cases-range", "").strip(),
            "status": parser.by_id.get("status", "").strip()}


def seconds(text: str) -> float | None:
    """A latency as the page writes it ("850 ms", "2.41 s", "—" for none) in seconds."""
    if text in ("\u2014", "-", ""):
        return None
    match = re.fullmatch(r"(-?[\d.]+) (ms|s)", text)
    if not match:
        raise ValueError(f"not a latency: {text!r}")
    return float(match.group(1)) / (1000 if match.group(2) == "ms" else 1)
