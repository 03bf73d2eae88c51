"""Charset detection: BOM, then the header, then the page's meta, then detection."""

from __future__ import annotations

import codecs

from lifesearch_local.web.decode import decode_text, sniff_charset


def test_charset_order_bom_header_meta_detection():
    text = "浦东开发开放三十多年，地区生产总值增长迅速。" * 8
    assert sniff_charset(codecs.BOM_UTF16_LE + text.encode("utf-16-le"), "iso-8859-1") == "utf-16-le"
    assert sniff_charset(text.encode("utf-8"), "utf-8") == "utf-8"
    meta = b'<html><head><meta charset="GB2312"></head><body>' + text.encode("gbk") + b"</body></html>"
    assert sniff_charset(meta, None) == "gb18030"
    assert sniff_charset(meta, "utf-8") == "gb18030"  # a header the bytes contradict loses to meta
    assert decode_text(text.encode("gbk"), None, html=False)[0] == text  # detection alone
    assert sniff_charset(b"<p>caf\xe9</p>", "latin-1") == "cp1252"
