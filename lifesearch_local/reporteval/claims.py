"""Claim extraction for factuality: cited sentences and table rows, with their sources resolved.

Rules (also in this package's README.md):
- Reference list: a line `[n] …` (also `- [n] …`, `[^n]: …`) that holds a URL, anywhere, and
  inside a references section (heading References, Sources, 参考来源, 参考文献 …) also
  `n. …` lines; entry n cites the line's first URL (a markdown link's target, else a bare
  URL). Reference lines, reference sections, source lists (`Sources: …`, `来源：…`, a bold
  `**References**` label, with the list under them), headings and code blocks are never claims.
- A claim is a sentence with at least one citation: `[n]` markers (`[1]`, `[1][2]`,
  `[1, 3]`, `[1-3]`) resolved through the reference list, markdown links `[text](url)`, and
  bare `http(s)://` URLs. Sentences end at 。！？ and at . ! ? followed by a space (not
  after e.g./i.e./et al./vs. and similar, nor before a lowercase word); citation markers
  right after the end of a sentence (`… fact. [2]`) belong to it. List items are split on
  their own; a table row with a citation is one claim written `header: cell; …`. Rows and
  list items without citations take those of the table header, of a source line right after
  the table, or of a lead-in sentence ending with a colon just before them.
- A claim cites each distinct source once; an `[n]` without entry n is kept as an
  unresolved citation (judged unverifiable).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from lifesearch_local.reporteval.records import Citation, Claim
from lifesearch_local.reporteval.sections import REFERENCES, SOURCE_LINE, heading_key
from lifesearch_local.web.cache import normalize_url

_HEADING = re.compile(r"^\s*#{1,6}\s+(.*)$")
_FENCE = re.compile(r"^\s*(```|~~~)")
# At most three digits: "[2025]" is a year, not reference 2025.
_NUM = r"\[\^?(\d{1,3}(?:\s*(?:[,，、;；]|[-–—~])\s*\d{1,3})*)\](?!\()"
_NUM_CITE = re.compile(_NUM)
_TRAILING_CITES = re.compile(r"(?:\s*" + _NUM + r")+")
_MD_LINK = re.compile(r"(?<!!)\[([^\]\n]*)\]\((https?://[^\s)]+)\)")
_BARE_URL = re.compile(r"https?://[^\s<>\"'()\[\]{}，。；、）（】【》《]+")
_REF_ENTRY = re.compile(r"^\s*(?:[-*+]\s+)?\[\^?(\d+)\]\s*[:：.]?\s*(.*)$")
_NUMBERED_ENTRY = re.compile(r"^\s*(\d+)[.)]\s+(.*)$")
_TABLE_SEP = re.compile(r"^\s*\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$")
_BULLET = re.compile(r"^\s*(?:[-*+]\s+(?:\[[ xX]\]\s+)?|\d+[.)]\s+)")
_ABBREV = ("e.g", "i.e", "et al", "etc", "vs", "cf", "approx", "no", "fig", "mr", "mrs", "ms", "dr", "st", "inc", "ltd", "co", "u.s")
_WORD = re.compile(r"[\w\u4e00-\u9fff]")


def _first_url(text: str) -> str | None:
    m = _MD_LINK.search(text)
    if m:
        return m.group(2)
    m = _BARE_URL.search(text)
    return _trim_url(m.group(0)) if m else None


def _trim_url(url: str) -> str:
    return url.rstrip(".,;:!?*_`'\"")


def parse_references(text: str) -> dict[int, str]:
    """Reference number -> URL: `[n] …` lines anywhere, `n. …` lines in a references section or source list."""
    refs: dict[int, str] = {}
    in_refs = in_label = False  # under a references heading / in the list after a "Sources:" label
    for line in text.splitlines():
        h = _HEADING.match(line)
        if h:
            in_refs, in_label = bool(REFERENCES.match(heading_key(h.group(1)))), False
            continue
        if SOURCE_LINE.match(line):
            in_label = True
            continue
        if in_label and line.strip() and not (_REF_ENTRY.match(line) or _BULLET.match(line)):
            in_label = False
        m = _REF_ENTRY.match(line) or (_NUMBERED_ENTRY.match(line) if in_refs or in_label else None)
        if m:
            url = _first_url(m.group(2))
            if url:
                refs.setdefault(int(m.group(1)), url)
    return refs


def _ref_numbers(spec: str) -> list[int]:
    out: list[int] = []
    for part in re.split(r"\s*[,，、;；]\s*", spec):
        bounds = re.split(r"\s*[-–—~]\s*", part)
        if len(bounds) == 2 and bounds[0].isdigit() and bounds[1].isdigit() and int(bounds[1]) - int(bounds[0]) < 50:
            out += range(int(bounds[0]), int(bounds[1]) + 1)
        elif part.isdigit():
            out.append(int(part))
    return out


def _is_boundary(text: str, i: int) -> bool:
    """Whether the ASCII . ! ? at i ends a sentence."""
    if i + 1 < len(text) and not text[i + 1].isspace() and text[i + 1] not in "\"')]*_`":
        return False
    rest = text[i + 1 :].lstrip(" \"')]*_`(")
    if rest[:1].islower():
        return False
    if text[i] == ".":
        word = re.search(r"([A-Za-z.]+)$", text[:i])
        if word and (word.group(1).lower() in _ABBREV or re.fullmatch(r"[A-Z]", word.group(1))):
            return False  # an abbreviation or an initial (Lindgren, E. (2025))
    return True


def split_sentences(text: str) -> list[str]:
    """Sentences of a paragraph; citation markers right after a sentence's end stay with it."""
    out, start, i = [], 0, 0
    while i < len(text):
        ch = text[i]
        if ch in "。！？" or (ch in ".!?" and _is_boundary(text, i)):
            j = i + 1
            while j < len(text) and text[j] in "”’\"')）]*_`":
                j += 1
            m = _TRAILING_CITES.match(text, j)
            if m:
                j = m.end()
            out.append(text[start:j])
            start = i = j
            continue
        i += 1
    out.append(text[start:])
    return [s.strip() for s in out if s.strip()]


def citations_of(sentence: str, refs: dict[int, str]) -> list[Citation]:
    """The sentence's citations in order of appearance, one per distinct source."""
    found: list[tuple[int, Citation]] = []
    for m in _MD_LINK.finditer(sentence):
        found.append((m.start(), Citation(style="link", url=m.group(2))))
    bare = _MD_LINK.sub(lambda m: " " * len(m.group(0)), sentence)  # keep offsets, hide link targets
    for m in _BARE_URL.finditer(bare):
        found.append((m.start(), Citation(style="url", url=_trim_url(m.group(0)))))
    for m in _NUM_CITE.finditer(bare):
        for n in _ref_numbers(m.group(1)):
            found.append((m.start(), Citation(style="numbered", url=refs.get(n), ref=n)))
    out, seen = [], set()
    for _, c in sorted(found, key=lambda x: x[0]):
        key = normalize_url(c.url) if c.url else f"ref:{c.ref}"
        if key not in seen:
            seen.add(key)
            out.append(c)
    return out


def clean_claim(sentence: str) -> str:
    """The sentence without citation markers, links reduced to their text, emphasis removed."""
    t = _MD_LINK.sub(lambda m: m.group(1), sentence)
    t = _NUM_CITE.sub("", t)
    t = _BULLET.sub("", t)
    t = re.sub(r"\*\*|__|`", "", t)
    t = re.sub(r"\s+", " ", t).strip()
    return re.sub(r"\s+([.,;:!?。，；：！？、）)])", r"\1", t)


def _table_claims(rows: list[list[str]], refs: dict[int, str], inherited: list[Citation]) -> list[tuple[str, list[Citation]]]:
    header, out = rows[0], []
    for row in rows[1:]:
        cites = citations_of(" ".join(row), refs) or inherited
        if not cites:
            continue
        cells = [clean_claim(c) for c in row]
        parts = [f"{clean_claim(h)}: {c}" if h.strip() else c for h, c in zip(header, cells) if c]
        out.append(("; ".join(parts), cites))
    return out


@dataclass
class _Unit:
    kind: str  # para | item | table | sources | break
    text: str = ""
    rows: list[list[str]] = field(default_factory=list)


def _units(text: str) -> list[_Unit]:
    """Paragraphs, list items, tables and source lists, outside references, headings and code."""
    units: list[_Unit] = []
    cur: _Unit | None = None
    in_refs = fenced = in_sources = False
    for line in text.splitlines():
        if _FENCE.match(line):
            fenced, cur, in_sources = not fenced, None, False
            continue
        h = _HEADING.match(line)
        if fenced or h or not line.strip():
            if h:
                in_refs, in_sources = bool(REFERENCES.match(heading_key(h.group(1)))), False
                units.append(_Unit("break"))  # a lead-in's citations never reach past a heading
            if not in_sources:  # a source list's items may follow its label after a blank line
                cur = None
            continue
        if in_refs:
            continue
        table_line = line.lstrip().startswith("|")
        kind = "table" if table_line else "item" if _BULLET.match(line) else "para"
        if SOURCE_LINE.match(line) or (in_sources and (kind == "item" or _REF_ENTRY.match(line))):
            if not in_sources:
                cur, in_sources = _Unit("sources"), True
                units.append(cur)
            cur.text = f"{cur.text} {line.strip()}".strip()  # type: ignore[union-attr]
            continue
        in_sources = False
        if _REF_ENTRY.match(line) and _first_url(line):
            cur = None
            continue
        # A line continues the unit above if of the same kind (but each list item is its own
        # unit), or if it is the wrapped text of a list item.
        continues = cur is not None and (cur.kind == kind != "item" or (cur.kind, kind) == ("item", "para"))
        if not continues:
            cur = _Unit(kind)
            units.append(cur)
        if kind == "table":
            if not _TABLE_SEP.match(line):
                cur.rows.append([c.strip() for c in line.strip().strip("|").split("|")])
        else:
            cur.text = f"{cur.text} {line.strip()}".strip()
    return units


def _is_lead_in(sentence: str) -> bool:
    return clean_claim(sentence).rstrip().endswith((":", "："))


def _table_level(units: list[_Unit], k: int, refs: dict[int, str], carry: list[Citation]) -> list[Citation]:
    """Citations that apply to every uncited row: the header's, a source line right after, a lead-in's."""
    # A source line after a table cites it, unless it is the report's closing source list.
    after = units[k + 1] if k + 2 < len(units) and units[k + 1].kind == "sources" else None
    return citations_of(" ".join(units[k].rows[0]), refs) or (citations_of(after.text, refs) if after else []) or carry


def extract_claims(text: str) -> list[Claim]:
    """Every cited sentence (and cited table row) of a report, in order."""
    refs = parse_references(text)
    units = _units(text)
    found: list[tuple[str, list[Citation]]] = []
    carry: list[Citation] = []  # a lead-in's citations, for the list or table right after it
    for k, u in enumerate(units):
        if u.kind in ("sources", "break"):
            carry = []
            continue
        if u.kind == "table":
            found += _table_claims(u.rows, refs, _table_level(units, k, refs, carry)) if len(u.rows) > 1 else []
            carry = []
            continue
        if u.kind == "para":
            carry = []
        nxt = units[k + 1].kind if k + 1 < len(units) else None
        sentences = split_sentences(u.text)
        for n, sentence in enumerate(sentences):
            cites = citations_of(sentence, refs)
            if n == len(sentences) - 1 and cites and nxt in ("table", "item") and _is_lead_in(sentence):
                carry = cites  # "According to [3]:" cites what follows; it is not a claim itself
                continue
            cites = cites or (carry if u.kind == "item" else [])
            claim = clean_claim(sentence)
            if cites and len(_WORD.findall(_BARE_URL.sub("", claim))) >= 4:
                found.append((claim, cites))
    return [Claim(index=i, text=t, citations=c) for i, (t, c) in enumerate(found)]
