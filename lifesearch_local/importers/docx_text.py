"""DOCX to markdown text with the standard library (zipfile + word/document.xml), and a count of what it drops.

What a report's reader needs of a Word file: paragraphs (headings as `#`, list items as `-`),
hyperlinks as `[text](url)` (research reports cite through them), tables as markdown pipe rows
(each cell's paragraphs joined; a merged cell is not spanned), footnotes and endnotes as `[^n]`
notes at the end. Images, charts and embedded objects have no text here: they are counted, as
are reviewers' comments (not read). The XML is parsed by defusedxml: a DTD anywhere, in any
encoding, is refused (no entity expansion). Also refused, each in one line: a part larger than
`MAX_PART_BYTES` uncompressed, parts together over `MAX_DOCX_BYTES`, elements nested deeper than
`MAX_DEPTH` (no Word file nests so; the walk recurses), and text past `MAX_TEXT_CHARS` (a link's
address repeated by every reference to it can grow a small file into hundreds of megabytes).
"""

from __future__ import annotations

import io
import zipfile
from dataclasses import dataclass, field
from xml.etree import ElementTree as ET

W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
R = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}"
REL = "{http://schemas.openxmlformats.org/package/2006/relationships}"
MAX_PART_BYTES = 64 * 1024 * 1024
MAX_DOCX_BYTES = 128 * 1024 * 1024  # every part read, together, uncompressed
MAX_DEPTH = 200  # Word nests tables in tables a few levels; 200 keeps the walk far from Python's recursion limit
MAX_TEXT_CHARS = 8_000_000  # far above any report a judge can read (about two million tokens)
_PICTURES = {W + "drawing", W + "pict", W + "object"}
_SKIP = {W + "pPr", W + "rPr", W + "del", W + "instrText", W + "delText", W + "commentReference"}


@dataclass
class DocxText:
    """A DOCX as text, and what did not become text."""

    text: str
    images: int = 0
    """Drawings, pictures and embedded objects: dropped (no text)."""
    tables: int = 0
    """Tables written as markdown pipe rows (merged cells not spanned, nested tables flattened)."""
    notes: int = 0
    """Footnotes and endnotes, kept as `[^n]` notes at the end."""
    comments: int = 0
    """Reviewers' comments: not read (they are not the report)."""
    links: dict[str, str] = field(default_factory=dict)
    read_bytes: int = 0
    """Uncompressed bytes of the parts read so far (capped at MAX_DOCX_BYTES)."""
    chars: int = 0
    """Characters of text produced so far (capped at MAX_TEXT_CHARS)."""

    def add(self, text: str) -> str:
        """`text`, counted against the text cap (ValueError past it)."""
        self.chars += len(text)
        if self.chars > MAX_TEXT_CHARS:
            raise ValueError(f"gives more than {MAX_TEXT_CHARS:,} characters of text: refused")
        return text


def docx_text(data: bytes) -> DocxText:
    """The text of a DOCX file; ValueError (one line) when it is no readable DOCX."""
    try:
        z = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile:
        raise ValueError("not a DOCX file (no ZIP archive)") from None
    with z:
        out = DocxText(text="")
        body = _xml(z, "word/document.xml", out)
        if body is None:
            raise ValueError("not a DOCX file (no word/document.xml)")
        out.links = _rels(z, "word/_rels/document.xml.rels", out)
        root = body.find(W + "body")
        blocks = _blocks(root if root is not None else body, out)
        for part in ("footnotes", "endnotes"):
            blocks += _notes(z, part, out)
        comments = _xml(z, "word/comments.xml", out)
        out.comments = 0 if comments is None else len(comments.findall(W + "comment"))
    out.text = "\n\n".join(b for b in blocks if b.strip())
    return out


def _xml(z: zipfile.ZipFile, name: str, out: DocxText) -> ET.Element | None:
    """A part parsed by defusedxml (no DTD, no entities), within the size and depth caps."""
    from defusedxml import DefusedXmlException
    from defusedxml.ElementTree import fromstring

    try:
        info = z.getinfo(name)
    except KeyError:
        return None
    if info.file_size > MAX_PART_BYTES:
        raise ValueError(f"{name} is {info.file_size:,} bytes uncompressed, over the {MAX_PART_BYTES:,}-byte cap")
    out.read_bytes += info.file_size
    if out.read_bytes > MAX_DOCX_BYTES:
        raise ValueError(f"its parts are over {MAX_DOCX_BYTES:,} bytes uncompressed together: refused")
    try:
        raw = z.read(info)  # zipfile stops at the declared size and checks the CRC
        root = fromstring(raw, forbid_dtd=True, forbid_entities=True, forbid_external=True)
    except DefusedXmlException:
        raise ValueError(f"{name} declares a DTD or entities, which no Word file needs: refused") from None
    except ET.ParseError as e:
        raise ValueError(f"{name} is not well-formed XML ({e})") from None
    except (zipfile.BadZipFile, OSError, EOFError, NotImplementedError) as e:
        raise ValueError(f"{name} cannot be unpacked ({str(e)[:80]})") from None
    _check_depth(root, name)
    return root


def _check_depth(root: ET.Element, name: str) -> None:
    """ValueError when elements nest deeper than MAX_DEPTH (walked without recursion)."""
    stack = [(root, 1)]
    while stack:
        el, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise ValueError(f"{name} nests elements more than {MAX_DEPTH} deep, which no Word file does: refused")
        stack.extend((c, depth + 1) for c in el)


def _rels(z: zipfile.ZipFile, name: str, out: DocxText) -> dict[str, str]:
    """Relationship id → external target (the URLs hyperlinks point at)."""
    root = _xml(z, name, out)
    if root is None:
        return {}
    return {r.get("Id", ""): r.get("Target", "") for r in root.iter(REL + "Relationship")
            if r.get("TargetMode") == "External"}


def _blocks(parent: ET.Element, out: DocxText) -> list[str]:
    """Paragraphs and tables in document order (content controls opened)."""
    blocks: list[str] = []
    for el in parent:
        if el.tag == W + "p":
            blocks.append(_paragraph(el, out))
        elif el.tag == W + "tbl":
            out.tables += 1
            blocks.append(_table(el, out))
        elif el.tag in (W + "sdt", W + "sdtContent", W + "customXml"):
            blocks += _blocks(el, out)
    return blocks


def _paragraph(p: ET.Element, out: DocxText) -> str:
    text = _inline(p, out).strip()
    ppr = p.find(W + "pPr")
    if not text or ppr is None:
        return text
    style = ppr.find(W + "pStyle")
    name = (style.get(W + "val", "") if style is not None else "").lower()
    if name == "title" or (name.startswith("heading") and name[7:].isdigit()):
        return "#" * (int(name[7:]) if name[7:].isdigit() else 1) + " " + text
    num = ppr.find(W + "numPr")
    if num is not None:
        lvl = num.find(W + "ilvl")
        depth = int(lvl.get(W + "val", "0")) if lvl is not None and lvl.get(W + "val", "0").isdigit() else 0
        return "  " * depth + "- " + text
    return text


def _inline(el: ET.Element, out: DocxText) -> str:
    """The text of runs under `el`: tabs, breaks, hyperlinks as markdown, note marks; pictures counted."""
    parts: list[str] = []
    for c in el:
        if c.tag == W + "t":
            parts.append(out.add(c.text or ""))
        elif c.tag == W + "tab":
            parts.append("\t")
        elif c.tag in (W + "br", W + "cr"):
            parts.append("\n")
        elif c.tag == W + "hyperlink":
            text, url = _inline(c, out), out.links.get(c.get(R + "id", ""))
            parts.append(out.add(f"[{text}]({url})") if url and text.strip() else text)
        elif c.tag in (W + "footnoteReference", W + "endnoteReference"):
            parts.append(out.add(f"[^{_note_id(c)}]"))
        elif c.tag in _PICTURES:
            out.images += 1
        elif c.tag not in _SKIP:
            parts.append(_inline(c, out))
    return "".join(parts)


def _table(tbl: ET.Element, out: DocxText) -> str:
    rows = []
    for tr in tbl.findall(W + "tr"):
        cells = [" ".join(b for b in _blocks(tc, out) if b.strip()) for tc in tr.findall(W + "tc")]
        rows.append("| " + " | ".join(c.replace("\n", " ").replace("|", "\\|") for c in cells) + " |")
    if rows:
        width = rows[0].count(" | ") + 1
        rows.insert(1, "|" + " --- |" * width)
    return "\n".join(rows)


def _note_id(ref: ET.Element) -> str:
    kind = "e" if ref.tag == W + "endnoteReference" else ""
    return kind + ref.get(W + "id", "?")


def _notes(z: zipfile.ZipFile, part: str, out: DocxText) -> list[str]:
    """Footnotes or endnotes as `[^n]: text` (the separator notes Word keeps are not notes)."""
    root = _xml(z, f"word/{part}.xml", out)
    if root is None:
        return []
    links, out.links = out.links, {**out.links, **_rels(z, f"word/_rels/{part}.xml.rels", out)}
    kind = "e" if part == "endnotes" else ""
    notes = []
    for note in root.findall(W + part[:-1]):
        if note.get(W + "type") in (None, "normal"):
            text = " ".join(b for b in _blocks(note, out) if b.strip())
            if text:
                notes.append(f"[^{kind}{note.get(W + 'id', '?')}]: {text}")
    out.links, out.notes = links, out.notes + len(notes)
    return notes
