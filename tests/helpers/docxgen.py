"""A tiny hand-rolled DOCX writer (the WordprocessingML parts a reader meets), so tests need no Word library."""

from __future__ import annotations

import io
import zipfile

W_NS = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
R_NS = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
REL_NS = "http://schemas.openxmlformats.org/package/2006/relationships"
HYPERLINK = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/hyperlink"


def run(text: str) -> str:
    return f'<w:r><w:t xml:space="preserve">{text}</w:t></w:r>'


def para(*runs: str, style: str | None = None, level: int | None = None) -> str:
    ppr = ""
    if style or level is not None:
        num = f'<w:numPr><w:ilvl w:val="{level}"/><w:numId w:val="1"/></w:numPr>' if level is not None else ""
        ppr = "<w:pPr>" + (f'<w:pStyle w:val="{style}"/>' if style else "") + num + "</w:pPr>"
    return f"<w:p>{ppr}{''.join(runs)}</w:p>"


def link(text: str, rid: str) -> str:
    return f'<w:hyperlink r:id="{rid}">{run(text)}</w:hyperlink>'


def table(rows: list[list[str]]) -> str:
    return "<w:tbl>" + "".join("<w:tr>" + "".join(f"<w:tc>{para(run(c))}</w:tc>" for c in r) + "</w:tr>"
                               for r in rows) + "</w:tbl>"


PICTURE = "<w:r><w:drawing><wp:inline/></w:drawing></w:r>"


def footnote_ref(n: int) -> str:
    return f'<w:r><w:footnoteReference w:id="{n}"/></w:r>'


def _part(root: str, body: str, extra_ns: str = "") -> str:
    return (f'<?xml version="1.0" encoding="UTF-8"?><w:{root} xmlns:w="{W_NS}" xmlns:r="{R_NS}" '
            f'xmlns:wp="http://schemas.openxmlformats.org/drawingml/2006/wordprocessingDrawing"{extra_ns}>{body}</w:{root}>')


def make_docx(blocks: list[str], *, links: dict[str, str] | None = None, footnotes: dict[int, str] | None = None,
              comments: int = 0, document_xml: str | None = None) -> bytes:
    """A DOCX whose body holds `blocks` (para / table XML), with hyperlink targets by relationship id,
    footnotes by id and `comments` reviewer comments; `document_xml` replaces word/document.xml whole."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("[Content_Types].xml", '<?xml version="1.0"?><Types/>')
        z.writestr("word/document.xml", document_xml or _part("document", "<w:body>" + "".join(blocks) + "</w:body>"))
        rels = "".join(f'<Relationship Id="{rid}" Type="{HYPERLINK}" Target="{url}" TargetMode="External"/>'
                       for rid, url in (links or {}).items())
        z.writestr("word/_rels/document.xml.rels", f'<?xml version="1.0"?><Relationships xmlns="{REL_NS}">{rels}</Relationships>')
        if footnotes is not None:
            notes = '<w:footnote w:type="separator" w:id="-1"><w:p><w:r><w:separator/></w:r></w:p></w:footnote>'
            notes += "".join(f'<w:footnote w:id="{n}">{para(run(t))}</w:footnote>' for n, t in footnotes.items())
            z.writestr("word/footnotes.xml", _part("footnotes", notes))
        if comments:
            z.writestr("word/comments.xml", _part("comments", "".join(
                f'<w:comment w:id="{i}">{para(run("a note"))}</w:comment>' for i in range(comments))))
    return buf.getvalue()
