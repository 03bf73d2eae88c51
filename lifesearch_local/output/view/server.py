"""The viewer's HTTP server: GET only, pages with a strict Content-Security-Policy, files confined to the roots.

Routes: `/` the sources; `/s/N/` a source's leaderboard; `/s/N/decisions?…` the table (filters,
search, order and page as parameters); `/s/N/disagreements` the labelled mistakes, most confident
first; `/s/N/d/I` one decision; `/diff?a=N:JUDGE&b=M:JUDGE` two judges side by side;
`/s/N/files/NAME` a file of that run directory, as text (an HTML file sandboxed).
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import re
import stat
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

import numpy as np

from lifesearch_local.errors import LifesearchError
from lifesearch_local.output.report.markup import e
from lifesearch_local.output.view import pages
from lifesearch_local.output.view.decision import decision_page
from lifesearch_local.output.view.prompt import GroupOf, PromptRenderer
from lifesearch_local.output.view.query import Query, QueryError, diff, page_of, select
from lifesearch_local.output.view.sources import Source

log = logging.getLogger(__name__)

CSP = ("default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; base-uri 'none'; "
       "frame-ancestors 'none'")
FILE_CSP = "sandbox; default-src 'none'; style-src 'unsafe-inline'; img-src data:"
"""A served HTML file (report.html: inline CSS and SVG) runs no script and loads nothing."""
LOOPBACK = {"127.0.0.1", "localhost", "::1"}
MAX_FILE = 64 << 20
DIFFS_KEPT = 4
TEXT_SUFFIXES = {".json", ".jsonl", ".yaml", ".yml", ".txt", ".md", ".log", ".csv", ".tsv"}


class Forbidden(LifesearchError):
    """A file request outside what the viewer serves."""


def confined(root: Path, rel: str) -> Path:
    """The plain file `rel` (a URL path, decoded) names under `root`. Forbidden when it is absolute,
    holds `..`, a backslash or a NUL, resolves (through any link) outside `root`, or is not a plain file."""
    if not rel or "\x00" in rel or "\\" in rel or rel.startswith("/"):
        raise Forbidden(f"{rel!r}: not a relative path")
    parts = rel.split("/")
    if any(p in ("..", ".", "") for p in parts):
        raise Forbidden(f"{rel!r}: '..', '.' and empty path segments are refused")
    base = root.resolve()
    try:
        target = (base / Path(*parts)).resolve(strict=True)
    except (FileNotFoundError, NotADirectoryError, RuntimeError):
        raise Forbidden(f"{rel!r}: no such file") from None
    if not target.is_relative_to(base):
        raise Forbidden(f"{rel!r}: leads outside {root}")
    if not stat.S_ISREG(target.stat().st_mode):
        raise Forbidden(f"{rel!r}: not a plain file")
    return target


@dataclass
class Viewer:
    """What the server shows: the sources, the judge's prompt renderer (None: prompts not shown)."""

    sources: Sequence[Source]
    render: PromptRenderer | None = None
    group_of: GroupOf | None = None
    """The judge's choice group of a report (to re-run its fitting; None: not re-run)."""
    choices: tuple[str, ...] = ()
    """The judge's two choices, as its choice mode scores them."""
    allowed_hosts: set[str] = field(default_factory=lambda: set(LOOPBACK))
    """Host names a request may name (a page another site loads through DNS rebinding names its own)."""
    _diffs: dict = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def route(self, path: str, params: dict[str, list[str]]) -> tuple[int, str, bytes, dict[str, str]]:
        """(status, content type, body, extra headers) of a GET of `path` (as sent: still percent-encoded)."""
        if path == "/":
            return _html(pages.home(self.sources))
        if path == "/static/view.css":
            return 200, "text/css; charset=utf-8", pages.CSS.encode(), {}
        if path in ("/static/icon.svg", "/favicon.ico"):
            return 200, "image/svg+xml", pages.ICON.encode(), {}
        if path == "/diff":
            return _html(self.diff(params))
        m = re.fullmatch(r"/s/(\d+)(/.*)?", path)
        if not m or int(m.group(1)) >= len(self.sources):
            raise LookupError(path)
        n, rest, src = int(m.group(1)), m.group(2) or "/", self.sources[int(m.group(1))]
        if rest == "/":
            return _html(pages.source_page(n, src))
        if rest == "/decisions":
            return _html(self.decisions(n, src, Query.parse(params)))
        if rest == "/disagreements":
            q = Query.parse({"agreement": ["disagree"], "sort": ["confidence"], **params})
            return _html(self.decisions(n, src, q, "Disagreements with the labels, most confident first"))
        d = re.fullmatch(r"/d/(\d+)", rest)
        if d and int(d.group(1)) < len(src.index):
            return _html(decision_page(n, src, int(d.group(1)), Query.parse(params), self.sources, self.render,
                                       self.group_of, self.choices))
        if rest.startswith("/files/") and src.root is not None:
            return self.file(src.root, unquote(rest[len("/files/"):]))
        raise LookupError(path)

    def decisions(self, n: int, src: Source, q: Query, title: str = "Decisions") -> str:
        pg = page_of(select(src.index, q), q.page, q.per_page)
        reasons = {i: src.index.record(i).reason for i in pg.rows}
        return pages.decisions_page(n, src, q, pg, reasons, title)

    def diff(self, params: dict[str, list[str]]) -> str:
        sides = []
        for name in ("a", "b"):
            value = (params.get(name) or [""])[-1]
            m = re.fullmatch(r"(\d+):(.+)", value)
            if not m or int(m.group(1)) >= len(self.sources) or m.group(2) not in self.sources[int(m.group(1))].index.judges.codes:
                raise QueryError(f"{name}={value!r}: SOURCE:JUDGE, a source number and one of its judges")
            sides.append((int(m.group(1)), m.group(2)))
        only = (params.get("only") or ["differ"])[-1]
        if only not in ("differ", "all"):
            raise QueryError(f"only={only!r}: differ or all")
        page = Query.parse({"page": params.get("page", ["1"])}).page
        rows, matched = self._diff(sides[0], sides[1], only == "differ")
        pg = page_of(np.arange(len(rows)), page, 100)
        return pages.diff_page(self.sources, sides[0], sides[1], rows, matched, pg, only == "differ")

    def _diff(self, a: tuple[int, str], b: tuple[int, str], only_differ: bool) -> tuple[list, int]:
        """`query.diff`, kept for the last few pairs asked (paging through one diff recomputes nothing)."""
        key = (a, b, only_differ)
        with self._lock:
            if key not in self._diffs:
                self._diffs[key] = diff(self.sources[a[0]].index, a[1], self.sources[b[0]].index, b[1],
                                        only_differ=only_differ)
                while len(self._diffs) > DIFFS_KEPT:
                    self._diffs.pop(next(iter(self._diffs)))
            return self._diffs[key]

    def file(self, root: Path, rel: str) -> tuple[int, str, bytes, dict[str, str]]:
        target = confined(root, rel)
        fd = os.open(target, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        with os.fdopen(fd, "rb") as f:
            body = f.read(MAX_FILE + 1)
        if len(body) > MAX_FILE:
            raise Forbidden(f"{rel!r}: larger than {MAX_FILE >> 20} MiB")
        if target.suffix == ".html":
            return 200, "text/html; charset=utf-8", body, {"Content-Security-Policy": FILE_CSP}
        if target.suffix in TEXT_SUFFIXES:
            return 200, "text/plain; charset=utf-8", body, {}
        return 200, "application/octet-stream", body, {"Content-Disposition": "attachment"}


def _html(page: str) -> tuple[int, str, bytes, dict[str, str]]:
    return 200, "text/html; charset=utf-8", page.encode("utf-8"), {}


def _error_page(status: int, message: str) -> bytes:
    return pages.layout(f"{status} {HTTPStatus(status).phrase}", f'<p class="warn">{e(message)}</p>').encode("utf-8")


def handler_for(viewer: Viewer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "lifesearch-view"
        sys_version = ""

        def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
            host = (self.headers.get("Host") or "").rsplit(":", 1)[0].strip("[]").lower()
            if viewer.allowed_hosts and host not in viewer.allowed_hosts:
                return self._send(403, "text/html; charset=utf-8", _error_page(403, f"host {host!r} is not served"))
            url = urlsplit(self.path)
            try:
                status, ctype, body, extra = viewer.route(url.path, parse_qs(url.query, keep_blank_values=True))
            except LookupError:
                status, ctype, body, extra = 404, "text/html; charset=utf-8", _error_page(404, "no such page"), {}
            except Forbidden as exc:
                status, ctype, body, extra = 403, "text/html; charset=utf-8", _error_page(403, str(exc)), {}
            except QueryError as exc:
                status, ctype, body, extra = 400, "text/html; charset=utf-8", _error_page(400, str(exc)), {}
            except LifesearchError as exc:  # a record that cannot be read: said on the page, the server stays up
                log.warning("view: %s", exc)
                status, ctype, body, extra = 500, "text/html; charset=utf-8", _error_page(500, str(exc)), {}
            except Exception as exc:  # noqa: BLE001 - one page failing must not take the viewer down
                log.exception("view: %s failed", url.path)
                msg = f"{type(exc).__name__}: {exc}"[:500]
                status, ctype, body, extra = 500, "text/html; charset=utf-8", _error_page(500, msg), {}
            self._send(status, ctype, body, extra)

        def _refuse(self) -> None:
            self._send(405, "text/html; charset=utf-8", _error_page(405, "read-only: GET only"), {"Allow": "GET"})

        do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = _refuse  # noqa: N815

        def _send(self, status: int, ctype: str, body: bytes, extra: dict[str, str] | None = None) -> None:
            headers = {"Content-Type": ctype, "Content-Length": str(len(body)), "Content-Security-Policy": CSP,
                       "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer", "Cache-Control": "no-store",
                       "X-Frame-Options": "DENY", **(extra or {})}
            self.send_response(status)
            for k, v in headers.items():
                self.send_header(k, v)
            self.end_headers()
            if self.command != "HEAD":
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (the stdlib's signature)
            log.debug("view: %s " + format, self.address_string(), *args)

    return Handler


class ViewServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def make_server(viewer: Viewer, host: str = "127.0.0.1", port: int = 0) -> ViewServer:
    """The server, bound (port 0: a free one, read back from `server_address`); LifesearchError
    naming the address when it cannot bind."""
    try:
        return ViewServer((host, port), handler_for(viewer))
    except OSError as exc:
        why = "in use: pick another with --port (0: any free port)" if exc.errno == errno.EADDRINUSE else exc.strerror
        raise LifesearchError(f"cannot listen on {host}:{port}: {why}") from None


def serve_in_thread(server: ViewServer) -> threading.Thread:
    """Serve until `server.shutdown()`, in a thread (the caller's thread stays free for signals)."""
    t = threading.Thread(target=server.serve_forever, name="lifesearch-view", daemon=True)
    t.start()
    return t

