"""Split a report into sections for the redundancy metric, leave out intro/conclusion, sample pairs.

Rules (also in this package's README.md):
- Markdown headings (`#`…`######`, outside code fences) cut the report. The section level is
  the shallowest heading level used at least twice, so a single `# Title` does not swallow
  the report; deeper headings stay inside their section. Text before the first
  section-level heading (a preamble, possibly under the title) is the introduction.
- A report without headings (or whose headings never repeat a level, e.g. a lone title) is
  split into paragraphs at blank lines; a paragraph that is only a bold label (`**Mortgage**`)
  is joined to the paragraph after it, and a lone heading line is dropped.
- References are left out: a section whose heading names a reference list (References,
  Sources, Bibliography, 参考来源, 参考文献, 来源 …), and paragraphs that are a source list
  (`Sources: …`, `来源：…`) or consist only of `[n] …` reference lines.
- Introduction and conclusion. With headings: the first section when its heading (numbering
  such as `1.`, `一、` stripped) starts with an introduction word (Summary, Overview,
  Introduction, Background, TL;DR, Key findings, 摘要, 引言, 概述, 前言, 背景 …); the last
  section when its heading starts with a conclusion word (Conclusion, Summary, Recommendation,
  Takeaways, Bottom line, Outlook, 结论, 总结, 小结, 结语, 建议, 展望 …). Only the first and
  the last section are tested, so a "结论" heading in the middle of a report stays. Without
  headings: the first and the last paragraph, as the paper does.
"""

from __future__ import annotations

import itertools
import random
import re
from collections import Counter
from dataclasses import dataclass

_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")
_NUMBERING = re.compile(
    r"^\s*(?:第?[一二三四五六七八九十百]+[、.．章节部分]|\d+(?:\.\d+)*[.、)．]?|[ivxlc]+[.)]|[a-z][.)]|[(（][^)）]{1,4}[)）])\s*",
    re.IGNORECASE,
)
REFERENCES = re.compile(
    r"^(references?|sources?|bibliography|citations?|works cited|further reading|links|参考来源|参考文献|参考资料|"
    r"资料来源|数据来源|来源|引用)\b", re.IGNORECASE)
INTRO = re.compile(
    r"^(summary|executive summary|overview|introduction|intro|background|tl;?dr|key findings|key points|"
    r"at a glance|abstract|short answer|quick answer|摘要|引言|概述|前言|导语|导言|背景|概要|总览|简介|核心结论|要点)",
    re.IGNORECASE)
CONCLUSION = re.compile(
    r"^(conclusions?|concluding|in conclusion|in summary|summary|final (?:thoughts|remarks|word)|wrap[- ]?up|"
    r"bottom line|(?:key )?takeaways?|recommendations?|outlook|结论|总结|小结|结语|结束语|建议|展望|总体评价)",
    re.IGNORECASE)
# A source-list label: "Sources: …", "来源：…", or a label alone on its line ("**References**").
SOURCE_LINE = re.compile(
    r"^\s*(?:\*\*)?(?:sources?|references?|参考来源|参考资料|参考文献|资料来源|数据来源|来源)(?:\*\*)?\s*(?:[:：]|$)",
    re.IGNORECASE)
REF_LINE = re.compile(r"^\s*(?:[-*+]\s+)?\[\^?\d+\]")
_BOLD_LABEL = re.compile(r"^\*\*[^*\n]+\*\*[:：]?$")


@dataclass
class Section:
    """A section (or paragraph) of a report."""

    title: str
    text: str
    excluded: str | None = None


def heading_key(title: str) -> str:
    """A heading without markdown emphasis and leading numbering, for keyword tests."""
    t = re.sub(r"[*_`]+", "", title).strip()
    return _NUMBERING.sub("", t, count=1).strip()


def _lines_outside_fences(text: str) -> list[tuple[str, bool]]:
    out, fenced = [], False
    for line in text.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            out.append((line, True))
            continue
        out.append((line, fenced))
    return out


def _first_words(text: str, n: int = 60) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= n else flat[:n].rstrip() + "…"


def _by_headings(lines: list[tuple[str, bool]], heads: list[tuple[int, int, str]]) -> list[Section]:
    counts = Counter(level for _, level, _ in heads)
    level = min(lv for lv, c in counts.items() if c >= 2)
    cuts = [h for h in heads if h[1] <= level]
    sections: list[Section] = []
    pre = "\n".join(line for line, _ in lines[: cuts[0][0]]).strip()
    if pre:
        sections.append(Section(_first_words(pre), pre, "introduction"))
    for k, (idx, lv, title) in enumerate(cuts):
        end = cuts[k + 1][0] if k + 1 < len(cuts) else len(lines)
        body = "\n".join(line for line, _ in lines[idx + 1 : end]).strip()
        if not body:
            continue  # a bare title or an empty heading
        text = "\n".join(line for line, _ in lines[idx:end]).strip()
        excluded = "introduction" if lv < level else None  # text under the title, before the first section
        sections.append(Section(title, text, excluded))
    return sections


def _by_paragraphs(lines: list[tuple[str, bool]]) -> list[Section]:
    paras, cur = [], []
    for line, fenced in lines:
        if not line.strip() and not fenced:
            if cur:
                paras.append("\n".join(cur).strip())
            cur = []
        else:
            cur.append(line)
    if cur:
        paras.append("\n".join(cur).strip())
    merged: list[str] = []
    pending = ""
    for p in paras:
        if _HEADING.match(p) and "\n" not in p:
            continue  # a lone title: not a paragraph
        if _BOLD_LABEL.match(p):
            pending += p + "\n"  # a bold pseudo-heading belongs to the paragraph it introduces
            continue
        merged.append(pending + p)
        pending = ""
    if pending:
        merged.append(pending.strip())
    return [Section(_first_words(p), p) for p in merged if p]


def _is_reference_block(s: Section, with_headings: bool) -> bool:
    if with_headings and REFERENCES.match(heading_key(s.title)):
        return True
    body = [ln for ln in s.text.splitlines() if ln.strip()]
    if with_headings:
        body = body[1:]
    return bool(body) and (SOURCE_LINE.match(body[0]) is not None or all(REF_LINE.match(ln) for ln in body))


def split_sections(text: str) -> tuple[str, list[Section]]:
    """("headings" | "paragraphs", every section in order, with `excluded` set where it is left out)."""
    lines = _lines_outside_fences(text)
    heads = [(i, len(m.group(1)), m.group(2)) for i, (line, fenced) in enumerate(lines)
             if not fenced and (m := _HEADING.match(line))]
    # Headings structure a report only if some level repeats; a lone title does not.
    with_headings = bool(heads) and max(Counter(lv for _, lv, _ in heads).values()) >= 2
    mode = "headings" if with_headings else "paragraphs"
    sections = _by_headings(lines, heads) if with_headings else _by_paragraphs(lines)
    for s in sections:
        if s.excluded is None and _is_reference_block(s, with_headings):
            s.excluded = "references"
    body = [s for s in sections if s.excluded is None]
    if not body:
        return mode, sections
    if mode == "paragraphs":
        body[0].excluded = "introduction"
        if len(body) > 1:
            body[-1].excluded = "conclusion"
        return mode, sections
    if INTRO.match(heading_key(body[0].title)):
        body[0].excluded = "introduction"
    if len(body) > 1 and CONCLUSION.match(heading_key(body[-1].title)):
        body[-1].excluded = "conclusion"
    return mode, sections


def pair_seed(seed: int, task_id: str, agent: str, run: int) -> str:
    """The per-report seed string: pairs depend on the base seed and the report, not on batch order."""
    return f"{seed}:{task_id}:{agent}:{run}"


def sample_pairs(n: int, max_pairs: int, seed: int | str) -> list[tuple[int, int]]:
    """Up to `max_pairs` pairs (a < b) of n sections, drawn with random.Random(seed), sorted."""
    pairs = list(itertools.combinations(range(n), 2))
    if len(pairs) <= max_pairs:
        return pairs
    return sorted(random.Random(seed).sample(pairs, max_pairs))
