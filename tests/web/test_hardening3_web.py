"""Issue 24, break 1: extracting a PDF from the network is bounded by the fetch's time cap."""

from __future__ import annotations

import time
import zlib

from lifesearch_local.web.extract import extract_pdf

from .conftest import fetch_one, make_config
from .server import Reply


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
    body = heavy_pdf(30, 20_000)  # about 0.4 s a page on this machine, unloaded: ~12 s in all
    assert len(body) < 10_000
    server.routes["/p30.pdf"] = Reply(200, body, content_type="application/pdf")
    cfg = make_config(respect_robots=False, limits={"timeout_s": 2.0})
    t0 = time.monotonic()
    res = fetch_one(cfg, server.url("/p30.pdf"))
    wall = time.monotonic() - t0
    assert res.type == "failure" and res.kind == "timeout", res
    assert wall < 5.0, f"{wall:.1f} s under timeout_s 2"


def test_a_pdf_within_the_cap_still_reads_and_long_ones_stop_at_the_page_cap(server):
    server.routes["/small.pdf"] = Reply(200, heavy_pdf(2, 50), content_type="application/pdf")
    doc = fetch_one(make_config(respect_robots=False), server.url("/small.pdf"))
    assert doc.ok and "[page 2]" in doc.text
    ex = extract_pdf(heavy_pdf(5, 5), max_pages=2)
    assert "[page 2]" in ex.text and "[page 3]" not in ex.text and "pages 3-5 not extracted" in ex.text
