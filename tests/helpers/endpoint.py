"""A scripted OpenAI-compatible endpoint on 127.0.0.1: well-behaved, slow, dripping, huge, redirecting or hostile."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

CHOICE_ANSWER = {"choices": [{"index": 0, "message": {"role": "assistant", "content": " true"}, "finish_reason": "length",
                              "logprobs": {"content": [{"token": " true", "logprob": -0.1, "top_logprobs": [
                                  {"token": " true", "logprob": -0.1}, {"token": " false", "logprob": -2.4}]}]}}],
                 "usage": {"prompt_tokens": 11, "completion_tokens": 1}}


@dataclass
class Reply:
    """One answer: status, headers, body (bytes, or chunks produced as they are sent), and its pace."""

    status: int = 200
    body: bytes | Callable[[], Iterable[bytes]] = b""
    headers: dict[str, str] = field(default_factory=dict)
    length: bool = True
    """Send Content-Length (only for a bytes body); without it the body ends when the connection closes."""
    stall_s: float = 0.0
    """Seconds before the status line."""
    drip_s: float = 0.0
    """Seconds between single bytes of the body (0: all at once)."""


def json_reply(obj: Any, **kw: Any) -> Reply:
    return Reply(body=json.dumps(obj).encode(), headers={"Content-Type": "application/json"}, **kw)


class Endpoint:
    """POST /v1/chat/completions on loopback; the n-th request (1-based) gets `script(n, body)`.
    `sent` counts the body bytes each request was sent (until the client hung up), `arrivals` holds
    when each request came (time.monotonic())."""

    def __init__(self, script: Callable[[int, dict], Reply]):
        self.script, self.seen, self.sent, self.bodies, self.arrivals = script, 0, [], [], []
        self.arrived = threading.Event()
        lock, outer = threading.Lock(), self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                with lock:
                    outer.seen += 1
                    n = outer.seen
                    outer.bodies.append(body)
                    outer.sent.append(0)
                    outer.arrivals.append(time.monotonic())
                outer.arrived.set()
                reply = outer.script(n, body)
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # the client gave up
                    outer._answer(self, reply, n - 1)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def _answer(self, h: BaseHTTPRequestHandler, reply: Reply, i: int) -> None:
        time.sleep(reply.stall_s)
        h.send_response(reply.status)
        for k, v in reply.headers.items():
            h.send_header(k, v)
        if isinstance(reply.body, bytes) and reply.length:
            h.send_header("Content-Length", str(len(reply.body)))
        h.send_header("Connection", "close")
        h.end_headers()
        h.wfile.flush()
        chunks = [reply.body] if isinstance(reply.body, bytes) else reply.body()
        for chunk in chunks:
            pieces = [chunk[k:k + 1] for k in range(len(chunk))] if reply.drip_s else [chunk]
            for piece in pieces:
                h.wfile.write(piece)
                h.wfile.flush()
                self.sent[i] += len(piece)
                time.sleep(reply.drip_s)

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> Endpoint:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
