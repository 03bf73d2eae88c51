"""A loopback HTTP server for the web tests: routes map a path to a canned or computed reply."""

from __future__ import annotations

import socket
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit


@dataclass
class Request:
    """What a route sees of the request."""

    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes = b""


@dataclass
class Reply:
    """A response; an iterable body is sent chunked (streamed), bytes with a Content-Length."""

    status: int = 200
    body: bytes | Iterable[bytes] = b""
    content_type: str | None = "text/html; charset=utf-8"
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0  # seconds before the status line (a stalled server when long)


Route = Reply | Callable[[Request], Reply]


class LoopbackServer:
    """Threaded HTTP/1.1 server on 127.0.0.1 (or `bind`, e.g. ::1), port 0; `stop()` wakes stalled handlers."""

    def __init__(self, routes: dict[str, Route] | None = None, bind: str = "127.0.0.1"):
        self.routes: dict[str, Route] = dict(routes or {})
        self.hits: Counter[str] = Counter()
        self.requests: list[Request] = []
        self.stopping = threading.Event()
        self.bind = bind
        server_class = type("Server6", (ThreadingHTTPServer,), {"address_family": socket.AF_INET6}) if ":" in bind else ThreadingHTTPServer
        self._httpd = server_class((bind, 0), self._handler_class())
        self._httpd.daemon_threads = True
        self._httpd.block_on_close = False
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def url(self, path: str = "/", host: str | None = None) -> str:
        host = host or self.bind
        return f"http://{f'[{host}]' if ':' in host else host}:{self.port}{path}"

    def start(self) -> LoopbackServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> LoopbackServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def sleep(self, seconds: float) -> None:
        """Sleep that ends early when the server stops (so stalls never outlive a test)."""
        self.stopping.wait(seconds)

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                self._serve()

            def do_POST(self) -> None:
                self._serve()

            def _serve(self) -> None:
                parts = urlsplit(self.path)
                n = int(self.headers.get("Content-Length") or 0)
                req = Request(parts.path, parse_qs(parts.query), {k.lower(): v for k, v in self.headers.items()}, self.rfile.read(n))
                server.hits[parts.path] += 1
                server.requests.append(req)
                route = server.routes.get(parts.path)
                reply = Reply(404, b"<html><body>no such page</body></html>") if route is None else route(req) if callable(route) else route
                if reply.delay:
                    server.sleep(reply.delay)
                try:
                    self._write(reply)
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True

            def _write(self, reply: Reply) -> None:
                self.send_response(reply.status)
                if reply.content_type:
                    self.send_header("Content-Type", reply.content_type)
                for k, v in reply.headers.items():
                    self.send_header(k, v)
                if isinstance(reply.body, bytes):
                    if "Content-Length" not in reply.headers:
                        self.send_header("Content-Length", str(len(reply.body)))
                    self.end_headers()
                    self.wfile.write(reply.body)
                    return
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                for chunk in reply.body:
                    if server.stopping.is_set():
                        break
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                self.wfile.write(b"0\r\n\r\n")

        return Handler


def counter_route(*replies: Reply) -> Callable[[Request], Reply]:
    """A route answering the i-th request with replies[i] (the last one repeats)."""
    calls = {"n": 0}

    def route(req: Request) -> Reply:
        i = min(calls["n"], len(replies) - 1)
        calls["n"] += 1
        return replies[i]

    return route


def slow_body(server: LoopbackServer, first: bytes, stall: float) -> Iterable[bytes]:
    """A body that sends `first`, then stalls."""
    yield first
    server.sleep(stall)
    yield b"late"


def timed(fn: Callable[[], object]) -> tuple[object, float]:
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0
