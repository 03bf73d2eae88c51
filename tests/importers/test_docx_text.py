"""The DOCX reader: paragraphs, headings, lists, links, tables, notes as markdown; pictures and comments counted; bad files refused."""

from __future__ import annotations

import pytest

from lifesearch_local.importers.docx_text import docx_text
from tests.helpers.docxgen import PICTURE, footnote_ref, link, make_docx, para, run, table


def test_structure_links_tables_and_notes_become_markdown():
    data = make_docx([
        para(run("Salt substitutes"), style="Title"),
        para(run("Trials"), style="Heading2"),
        para(run("Blood pressure fell by 5 mmHg"), link("[1]", "rId9"), footnote_ref(1)),
        para(run("first point"), level=0),
        para(run("nested point"), level=1),
        table([["Study", "Country"], ["CSSS | 2007", "China"]]),
        para(PICTURE),
        para(run("tab"), "<w:r><w:tab/></w:r>", run("bed"), "<w:r><w:br/></w:r>", run("next line")),
        "<w:p><w:r><w:del><w:delText>removed</w:delText></w:del></w:r></w:p>",
    ], links={"rId9": "https://example.org/trial"}, footnotes={1: "Neal et al., NEJM 2021."}, comments=2)
    d = docx_text(data)
    assert d.text.split("\n\n") == [
        "# Salt substitutes",
        "## Trials",
        "Blood pressure fell by 5 mmHg[[1]](https://example.org/trial)[^1]",
        "- first point",
        "  - nested point",
        "| Study | Country |\n| --- | --- |\n| CSSS \\| 2007 | China |",
        "tab\tbed\nnext line",
        "[^1]: Neal et al., NEJM 2021.",
    ]
    assert (d.images, d.tables, d.notes, d.comments) == (1, 1, 1, 2)


@pytest.mark.parametrize(("data", "why"), [
    (b"PK not really", "no ZIP archive"),
    (make_docx([], document_xml="<w:document"), "not well-formed XML"),
    (make_docx([], document_xml='<?xml version="1.0"?><!DOCTYPE d [<!ENTITY a "aaaa">]><d>&a;</d>'), "declares a DTD"),
])
def test_what_is_no_readable_docx_is_refused_in_one_line(data, why):
    with pytest.raises(ValueError, match=why) as e:
        docx_text(data)
    assert "\n" not in str(e.value)


def test_a_zip_without_a_document_is_no_docx():
    import io
    import zipfile

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("hello.txt", "hi")
    with pytest.raises(ValueError, match="no word/document.xml"):
        docx_text(buf.getvalue())


BOMB = '<!DOCTYPE d [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">]>'


@pytest.mark.parametrize(("xml", "why"), [
    # UTF-16: the bytes `<!DOCTYPE` never appear as such; the parser still sees the DTD
    (('<?xml version="1.0" encoding="UTF-16"?>' + BOMB + "<d>&b;</d>").encode("utf-16"), "declares a DTD"),
    # a DOCTYPE (an external one, no entity) after 4 KB of comment: past where a text filter looked
    ('<?xml version="1.0"?><!--' + "x" * 5000 + '--><!DOCTYPE d SYSTEM "http://127.0.0.1:9/x.dtd"><d/>',
     "declares a DTD"),
    # 100,000 nested elements: the walk recursed into a RecursionError
    (f'<w:document xmlns:w="{__import__("tests.helpers.docxgen", fromlist=["W_NS"]).W_NS}"><w:body><w:p>'
     + "<w:r>" * 100_000 + "</w:r>" * 100_000 + "</w:p></w:body></w:document>", "nests elements more than 200 deep"),
])
def test_dtds_in_any_encoding_or_place_and_deep_nesting_are_refused_in_one_line(xml, why):
    with pytest.raises(ValueError, match=why) as e:
        docx_text(make_docx([], document_xml=xml))
    assert "\n" not in str(e.value)


def test_a_small_docx_that_would_grow_past_the_text_cap_is_refused():
    """Each of 40,000 tiny hyperlinks repeats a 100 KB address: 4 GB of text from 3.5 MB of XML (far less zipped)."""
    data = make_docx([para(*[link("x", "rId1")] * 40_000)], links={"rId1": "https://e.org/" + "a" * 100_000})
    assert len(data) < 4_000_000
    with pytest.raises(ValueError, match="more than 8,000,000 characters of text") as e:
        docx_text(data)
    assert "\n" not in str(e.value)
