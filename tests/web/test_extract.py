"""Extraction of the bundled pages over loopback HTTP: markdown, tables, links, GBK, PDF, charsets."""

from __future__ import annotations

import gzip
import time
import zlib

import pytest

from lifesearch_local.web import extract as extract_mod
from lifesearch_local.web.extract import extract_pdf
from tests.helpers.web import WEB_FIXTURES, fetch_all, fetch_one, make_config
from tests.helpers.web_server import Reply

PAGES = WEB_FIXTURES / "pages"


def serve(server, name: str, content_type: str, **kw) -> str:
    server.routes[f"/{name}"] = Reply(body=(PAGES / name).read_bytes(), content_type=content_type, **kw)
    return server.url(f"/{name}")


@pytest.fixture
def config():
    return make_config(respect_robots=False)


def test_english_article_to_markdown_with_links_and_metadata(server, config):
    doc = fetch_one(config, serve(server, "solar.html", "text/html; charset=utf-8"))
    assert doc.ok, doc
    assert doc.title.startswith("Regional solar output rose 12 percent")
    assert doc.date == "2023-05-04"
    assert "[annual grid operator report](https://energy.example.org/annual-report-2023)" in doc.text
    assert "Copyright Energy Desk" not in doc.text  # boilerplate dropped
    assert doc.content_type == "text/html" and doc.status == 200 and doc.source == "live"
    assert doc.bytes == (PAGES / "solar.html").stat().st_size
    assert len(doc.cache_key) == 32 and doc.fetched_at


def test_table_page_keeps_the_table(server, config):
    doc = fetch_one(config, serve(server, "gdp_table.html", "text/html"))
    assert doc.ok, doc
    assert "| Province | 2021 | 2022 |" in doc.text
    assert "| Guangdong | 12436.9 | 12911.8 |" in doc.text
    assert "| Zhejiang | 7351.6 | 7771.5 |" in doc.text


@pytest.mark.parametrize("content_type", ["text/html", "text/html; charset=utf-8", "text/html; charset=gb2312"])
def test_gbk_page_decoded_as_gb18030(server, config, content_type):
    # No charset, a wrong one (the bytes are not UTF-8), or gb2312 (which lacks 镕): all must decode.
    doc = fetch_one(config, serve(server, "pudong_gbk.html", content_type))
    assert doc.ok, doc
    assert doc.encoding == "gb18030"
    assert "朱镕基" in doc.text and "陆家嘴金融贸易区" in doc.text
    assert doc.title == "朱镕基与上海浦东开发的回顾"
    assert "\ufffd" not in doc.text


def test_pdf_text_with_page_markers(server, config):
    doc = fetch_one(config, serve(server, "wind_report.pdf", "application/pdf"))
    assert doc.ok, doc
    assert doc.content_type == "application/pdf"
    assert doc.text.index("[page 1]") < doc.text.index("64 gigawatts") < doc.text.index("[page 2]") < doc.text.index("8.6 megawatts")
    assert doc.title == "Offshore Wind Capacity Report 2022" and doc.date == "2023-01-10"


def test_pdf_sniffed_when_served_as_octet_stream(server, config):
    doc = fetch_one(config, serve(server, "wind_report.pdf", "application/octet-stream"))
    assert doc.ok and doc.content_type == "application/pdf"


def test_gzip_content_encoding_is_decoded(server, config):
    body = gzip.compress((PAGES / "solar.html").read_bytes())
    server.routes["/gz"] = Reply(body=body, headers={"Content-Encoding": "gzip"})
    doc = fetch_one(config, server.url("/gz"))
    assert doc.ok and "11.8 terawatt-hours" in doc.text


def test_plain_text_page(server, config):
    server.routes["/notes.txt"] = Reply(body="Plain notes: café prices rose.".encode("cp1252"), content_type="text/plain; charset=windows-1252")
    doc = fetch_one(config, server.url("/notes.txt"))
    assert doc.ok and doc.text == "Plain notes: café prices rose."


def test_unsupported_type_and_empty_page(server, config):
    server.routes["/img"] = Reply(body=b"\x89PNG\r\n" + b"\0" * 100, content_type="image/png")
    server.routes["/blank"] = Reply(body=b"<html><head><title></title></head><body>  </body></html>")
    results, _ = fetch_all(config, [server.url("/img"), server.url("/blank")])
    assert [r.kind for r in results] == ["unsupported_type", "empty"]


def test_broken_pdf_is_a_typed_failure(server, config):
    server.routes["/bad.pdf"] = Reply(body=b"%PDF-1.4\n garbage", content_type="application/pdf")
    result = fetch_one(config, server.url("/bad.pdf"))
    assert not result.ok and result.kind in ("unsupported_type", "empty")


def test_plain_text_fallback_when_trafilatura_returns_nothing(monkeypatch):
    import trafilatura

    monkeypatch.setattr(trafilatura, "extract", lambda *a, **k: None)
    ex = extract_mod.extract_html(b"<html><body><div>Only a short line of text.</div></body></html>", None)
    assert ex.text == "Only a short line of text."


def heavy_pdf(n_pages: int, ops: int) -> bytes:
    """A few KB: every page shares one compressed content stream of `ops` text operators."""
    stream = zlib.compress(b"BT /F1 1 Tf " + b"(ab) Tj 1 0 Td " * ops + b"ET", 9)
    objs = {1: b"<< /Type /Catalog /Pages 2 0 R >>", 3: b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
            4: b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(stream) + stream + b"\nendstream"}
    objs[2] = ("<< /Type /Pages /Kids [" + " ".join(f"{10 + i} 0 R" for i in range(n_pages)) + f"] /Count {n_pages} >>").encode()
    for i in range(n_pages):
        objs[10 + i] = b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> /Contents 4 0 R >>"
    out, offsets = bytearray(b"%PDF-1.4\n"), {}
    for oid in sorted(objs):
        offsets[oid] = len(out)
        out += b"%d 0 obj\n" % oid + objs[oid] + b"\nendobj\n"
    xref, size = len(out), max(objs) + 1
    out += b"xref\n0 %d\n0000000000 65535 f \n" % size
    out += b"".join(b"%010d 00000 n \n" % offsets[i] if i in offsets else b"0000000000 65535 f \n" for i in range(1, size))
    return bytes(out + b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (size, xref))


def test_a_slow_pdf_is_a_timeout_failure_within_the_fetch_time_cap(server):
    body = heavy_pdf(90, 20_000)  # about 0.4 s a page on this machine, unloaded: ~36 s in all, more when loaded
    assert len(body) < 20_000
    server.routes["/p90.pdf"] = Reply(200, body, content_type="application/pdf")
    cfg = make_config(respect_robots=False, limits={"timeout_s": 2.0})
    t0 = time.monotonic()
    res = fetch_one(cfg, server.url("/p90.pdf"))
    wall = time.monotonic() - t0
    assert res.type == "failure" and res.kind == "timeout", res
    assert wall < 25, f"{wall:.1f} s under timeout_s 2: the extraction was waited out, not stopped"


def test_a_pdf_within_the_cap_still_reads_and_long_ones_stop_at_the_page_cap(server):
    server.routes["/small.pdf"] = Reply(200, heavy_pdf(2, 50), content_type="application/pdf")
    doc = fetch_one(make_config(respect_robots=False), server.url("/small.pdf"))
    assert doc.ok and "[page 2]" in doc.text
    ex = extract_pdf(heavy_pdf(5, 5), max_pages=2)
    assert "[page 2]" in ex.text and "[page 3]" not in ex.text and "pages 3-5 not extracted" in ex.text
