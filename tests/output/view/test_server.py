"""The server: files confined to the roots, GET only, the headers, and real requests on 127.0.0.1."""

from __future__ import annotations

import http.client
import os
import re

import pytest

from lifesearch_local.errors import LifesearchError
from lifesearch_local.judge.rubric import judge_prompt_span
from lifesearch_local.output.view.server import (
    CSP,
    FILE_CSP,
    Forbidden,
    Viewer,
    confined,
    make_server,
    serve_in_thread,
)
from lifesearch_local.output.view.sources import Inputs, open_sources
from tests.helpers.view import make_view_run


@pytest.fixture
def root(tmp_path):
    r = tmp_path / "root"
    (r / "sub").mkdir(parents=True)
    (r / "a.txt").write_text("inside")
    (r / "sub" / "b.json").write_text("{}")
    (tmp_path / "secret.txt").write_text("outside")
    os.symlink(tmp_path / "secret.txt", r / "out-link.txt")
    os.symlink(r / "a.txt", r / "in-link.txt")
    os.symlink(tmp_path, r / "out-dir")
    return r


def test_files_under_the_root_are_served(root):
    assert confined(root, "a.txt") == (root / "a.txt").resolve()
    assert confined(root, "sub/b.json") == (root / "sub" / "b.json").resolve()
    assert confined(root, "in-link.txt") == (root / "a.txt").resolve()  # a link that stays inside


@pytest.mark.parametrize(("rel", "why"), [
    ("../secret.txt", "'..'"), ("sub/../../secret.txt", "'..'"), ("sub/../a.txt", "'..'"), ("./a.txt", "'..'"),
    ("/etc/passwd", "not a relative path"), ("out-link.txt", "leads outside"), ("out-dir/secret.txt", "leads outside"),
    ("sub", "not a plain file"), ("nope.txt", "no such file"), ("a.txt\x00.png", "not a relative path"),
    ("..\\secret.txt", "not a relative path"), ("", "not a relative path"),
])  # fmt: skip
def test_everything_else_is_refused(root, rel, why):
    with pytest.raises(Forbidden, match=re.escape(why)):
        confined(root, rel)


@pytest.fixture
def served(tmp_path):
    run = make_view_run(tmp_path / "run")
    (run / "report.html").write_text("<html><body><script>alert(1)</script>r</body></html>")
    (tmp_path / "secret.txt").write_text("outside")
    os.symlink(tmp_path / "secret.txt", run / "leak.txt")
    server = make_server(Viewer(open_sources([run], Inputs()), judge_prompt_span), "127.0.0.1", 0)
    thread = serve_in_thread(server)
    yield server.server_address[1]
    server.shutdown()
    server.server_close()
    thread.join(10)


def request(port: int, path: str, method: str = "GET", host: str | None = None) -> tuple[int, dict, str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.putrequest(method, path, skip_host=host is not None)
    if host is not None:
        conn.putheader("Host", host)
    conn.endheaders()
    r = conn.getresponse()
    body = r.read().decode("utf-8", "replace")
    conn.close()
    return r.status, dict(r.getheaders()), body


def test_pages_over_http(served):
    for path in ("/", "/s/0/", "/s/0/decisions?agent=beta&verdict=false", "/s/0/disagreements", "/s/0/d/0",
                 "/diff?a=0%3Achoice-a&b=0%3Agen-b", "/static/view.css"):
        status, headers, body = request(served, path)
        assert status == 200, (path, body[:300])
        assert headers["Content-Security-Policy"] == CSP and headers["X-Content-Type-Options"] == "nosniff"
    status, _, body = request(served, "/s/0/decisions?agent=beta&verdict=false")
    assert "28 of 180 decisions match." in body
    status, _, body = request(served, "/s/0/d/0")
    assert "The prompt the judge read" in body and "tokens omitted here" in body
    assert "Compare &lt;b&gt;Acme&lt;/b&gt; &amp; Globex revenue in 2025." in body  # the question, in the prompt


def test_files_over_http_stay_in_the_run_directory(served):
    status, headers, body = request(served, "/s/0/files/manifest.json")
    assert status == 200 and headers["Content-Type"] == "text/plain; charset=utf-8" and '"replays"' in body
    status, headers, _ = request(served, "/s/0/files/report.html")
    assert status == 200 and headers["Content-Security-Policy"] == FILE_CSP  # its script cannot run
    for path in ("/s/0/files/..%2F..%2Fsecret.txt", "/s/0/files/../secret.txt", "/s/0/files/%2Fetc%2Fpasswd",
                 "/s/0/files/leak.txt", "/s/0/files/%252e%252e%252fsecret.txt"):
        status, _, body = request(served, path)
        assert status in (403, 404) and "outside" not in body.replace("leads outside", ""), path
    assert request(served, "/s/0/files/leak.txt")[0] == 403


def test_only_get_and_only_this_host(served):
    for method in ("POST", "PUT", "DELETE", "HEAD"):
        status, headers, _ = request(served, "/", method)
        assert (status, headers.get("Allow")) == (405, "GET"), method
    assert request(served, "/", host="evil.example:80")[0] == 403  # DNS rebinding: another site's name
    assert request(served, "/", host="localhost:9999")[0] == 200  # ssh -L with another local port


def test_bad_requests_are_answered_not_crashed(served):
    assert request(served, "/s/0/decisions?verdict=maybe")[0] == 400
    assert request(served, "/s/0/d/99999")[0] == 404
    assert request(served, "/s/7/")[0] == 404
    assert request(served, "/diff?a=0%3Anobody&b=0%3Agen-b")[0] == 400
    assert request(served, "/")[0] == 200  # still serving


def test_a_port_in_use_is_one_line(served):
    with pytest.raises(LifesearchError, match=f"cannot listen on 127.0.0.1:{served}: in use"):
        make_server(Viewer([]), "127.0.0.1", served)


def test_a_damaged_record_is_a_500_page_and_the_server_stays_up(tmp_path):
    run = make_view_run(tmp_path / "run")
    lines = (run / "reports.jsonl").read_text().splitlines()
    lines[0] = lines[0].replace('"status": "completed"', '"status": "finished?"')
    (run / "reports.jsonl").write_text("\n".join(lines) + "\n")
    server = make_server(Viewer(open_sources([run], Inputs()), judge_prompt_span), "127.0.0.1", 0)
    thread = serve_in_thread(server)
    try:
        status, _, body = request(server.server_address[1], "/s/0/d/0")
        assert status == 500 and f"{run / 'reports.jsonl'}:1: status: Input should be" in body
        assert request(server.server_address[1], "/s/0/d/40")[0] == 200  # another report: fine
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


def test_a_source_without_its_slash_and_a_diff_kept_across_pages(tmp_path):
    viewer = Viewer(open_sources([make_view_run(tmp_path / "run")], Inputs()), judge_prompt_span)
    assert viewer.route("/s/0", {})[0] == 200
    first = viewer._diff((0, "choice-a"), (0, "gen-b"), True)
    assert viewer._diff((0, "choice-a"), (0, "gen-b"), True) is first  # page 2 of the same diff: not recomputed
    for other in ("choice-a#1", "choice-a#2", "gen-b#1", "const"):  # four more pairs: the oldest is dropped
        viewer._diff((0, "choice-a"), (0, other), True)
    assert len(viewer._diffs) == 4 and ((0, "choice-a"), (0, "gen-b"), True) not in viewer._diffs
