"""Report files (idx-<n>.md|.txt|.html|.pdf|.docx, as DRB II's evaluator takes them) to text, with what each lost.

`lifesearch import reports` reads a folder of them; `import drb2 --reports-dir` reads its folders the same way.
Markdown and text are read as UTF-8; HTML goes through trafilatura (web.extract, recall favoured: a report is
all content) to markdown with its tables and links; PDF through the web layer's capped path (a child process
killed after `PDF_TIMEOUT_S`, at most `MAX_PDF_PAGES` pages); DOCX through importers.docx_text. Our judges read
text, so what has none is lost and said so per file (`FileRead.lost`): images, a PDF's layout (tables and
columns flattened into lines), a page's chrome. A file that gives no text (an image, a scanned PDF, a broken
or unknown format, bytes that are not UTF-8) is refused in one line naming it and why.
"""

from __future__ import annotations

import os
import re
import stat
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from lifesearch_local.errors import InputError, LifesearchError, printable
from lifesearch_local.importers.docx_text import MAX_TEXT_CHARS
from lifesearch_local.records import Report, id_problem
from lifesearch_local.web.extract import MAX_PDF_PAGES

FORMATS = {".md": "markdown", ".markdown": "markdown", ".txt": "text", ".html": "html", ".htm": "html",
           ".pdf": "pdf", ".docx": "docx"}
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp", ".gif", ".bmp", ".tif", ".tiff")
REPORT_NAME = re.compile(r"^idx-(\d+)(?:\..+)?$", re.IGNORECASE)  # the upstream evaluator's naming
MAX_FILE_BYTES = 64 * 1024 * 1024
PDF_TIMEOUT_S = 120.0
_MD_IMAGE = re.compile(r"!\[[^\]]*\]\([^)]*\)|<img\b", re.IGNORECASE)


class Unreadable(Exception):
    """A report file that gives no text; the message says why in one line."""


class FileRead(BaseModel):
    """How one report file became text (import.json's `report_files`)."""

    model_config = ConfigDict(extra="forbid")

    file: str
    """The report file, as found."""
    task_id: str
    """The task its report answers."""
    agent: str
    """The agent named for it."""
    format: str
    """markdown, text, html, pdf or docx."""
    chars: int
    """Characters of text kept (before any --max-chars cut)."""
    images: int = 0
    """Images the file holds: no judge sees them (markdown keeps their alt text and address)."""
    tables: int = 0
    """Tables the file holds (how they were kept is in `lost` when not as markdown tables)."""
    pages: int | None = None
    """Pages of a PDF."""
    lost: list[str] = Field(default_factory=list)
    """What did not make it into the text, in words; empty when nothing did not."""


def file_problem(path: Path) -> str | None:
    """Why a file with this name cannot be a report we read (an image, an unknown format), or None."""
    suffix = path.suffix.lower()
    if suffix in FORMATS:
        return None
    if suffix in IMAGE_SUFFIXES:
        return (f"a {suffix} image: our judges read text and there is no OCR here (the upstream evaluator sends "
                "images to Gemini as attachments); transcribe it to markdown")
    if suffix == ".doc":
        return "a legacy Word .doc: save it as .docx or markdown"
    return f"unknown report format {suffix or '(none)'}; expected one of {', '.join(sorted(FORMATS))}"


def read_report_file(path: Path, task_id: str, agent: str, *, pdf_timeout_s: float = PDF_TIMEOUT_S,
                     within: Path | None = None) -> tuple[str, FileRead]:
    """The text of one report file and the record of what it lost; Unreadable when it gives none."""
    why = file_problem(path)
    if why:
        raise Unreadable(why)
    data = _read_regular(path, within)
    fmt = FORMATS[path.suffix.lower()]
    text, counts = _READERS[fmt](data, pdf_timeout_s)  # markdown and text verbatim (a BOM aside), as the evaluator reads them
    if len(text) > MAX_TEXT_CHARS:
        raise Unreadable(f"{len(text):,} characters of text, over the {MAX_TEXT_CHARS:,}-character cap per report")
    if not text.strip():
        raise Unreadable(f"no text in this {fmt} file" + (" (a scanned PDF? OCR it first)" if fmt == "pdf" else ""))
    return text, FileRead(file=str(path), task_id=task_id, agent=agent, format=fmt, chars=len(text), **counts)


def _read_regular(path: Path, within: Path | None = None) -> bytes:
    """The bytes of a regular file of at most MAX_FILE_BYTES; a FIFO, device or socket is refused
    before it is read (opened non-blocking, so a FIFO with no writer cannot hang the import).
    `within`: the file opened must lie in that folder, checked on the open descriptor, so that a
    link swapped in after the folder was listed is refused too."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise Unreadable(f"cannot be read: {e.strerror or e}") from None
    with os.fdopen(fd, "rb") as fh:
        if within is not None and not _opened_within(fd, within):
            raise Unreadable("a link out of the folder (swapped in while importing): refused, nothing read")
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise Unreadable(f"{special_kind(st.st_mode)}, not a report file: refused, nothing read")
        if st.st_size > MAX_FILE_BYTES:
            raise Unreadable(f"{st.st_size:,} bytes, over the {MAX_FILE_BYTES:,}-byte cap")
        try:
            data = fh.read(MAX_FILE_BYTES + 1)
        except OSError as e:
            raise Unreadable(f"cannot be read: {e.strerror or e}") from None
    if len(data) > MAX_FILE_BYTES:  # grew since its size was read
        raise Unreadable(f"over the {MAX_FILE_BYTES:,}-byte cap")
    return data


def _opened_within(fd: int, folder: Path) -> bool:
    """Whether the open file `fd` lies in `folder` (by /proc's name of the descriptor; where there
    is no /proc, the listing's check stands alone)."""
    try:
        real = Path(os.readlink(f"/proc/self/fd/{fd}"))
    except OSError:
        return True
    return real.is_relative_to(folder.resolve())


def special_kind(mode: int) -> str:
    """A file type in words (`a FIFO`, `a device`, ...)."""
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a directory" if stat.S_ISDIR(mode) else "not a regular file"


def entry_problem(f: Path, root: Path) -> str | None:
    """Why an entry of a report folder is refused before anything of it is read: a link that
    leaves the folder (as the run directory refuses links for writing), a broken link, or a
    special file (FIFO, device, socket); None for a file or directory, or a link to one inside."""
    try:
        st = f.lstat()
        if stat.S_ISLNK(st.st_mode):
            target = f.resolve(strict=True)
            if not target.is_relative_to(root.resolve()):
                return f"a link out of the folder (to {target}): refused, nothing read"
            st = target.stat()
    except (OSError, RuntimeError):  # dangling, a loop, or gone
        return "a link that leads nowhere readable: refused"
    if stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode):
        return None
    return f"{special_kind(st.st_mode)}, not a report file: refused, nothing read"


def report_entries(root: Path, refused: list[str]) -> list[Path]:
    """The files of a report folder to read, in name order (hidden names and folders left out);
    a refused entry (`entry_problem`) joins `refused` as one line."""
    out = []
    for f in sorted(root.iterdir()):
        if f.name.startswith("."):
            continue
        why = entry_problem(f, root)
        if id_problem(f.name):  # a name with a control character is shown escaped, never read
            why = f"its name holds a {id_problem(f.name)}; refused, nothing read"
        if why:
            refused.append(f"{printable(str(f))}: {why}")
        elif f.is_file():
            out.append(f)
    return out


def _plain(data: bytes, _timeout: float) -> tuple[str, dict[str, Any]]:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise Unreadable(f"not UTF-8 text at byte {e.start}; re-encode the report as UTF-8") from None
    images = len(_MD_IMAGE.findall(text))
    lost = [f"{images} image(s): only their alt text and address reach the judge"] if images else []
    return text, {"images": images, "lost": lost}


def _html(data: bytes, _timeout: float) -> tuple[str, dict[str, Any]]:
    import trafilatura

    from lifesearch_local.web.extract import extract_html

    head = data[:4096].lower()
    if b"<html" not in head and b"<body" not in head:  # a saved fragment (a chat's answer): trafilatura needs a page
        data = b"<html><body>" + data + b"</body></html>"
    text = extract_html(data, None, favor_recall=True).text
    shown = trafilatura.html2txt(data.decode("utf-8", "replace")) or ""
    images = len(re.findall(rb"<img\b", data, re.IGNORECASE))
    lost = [f"{images} image(s) dropped"] if images else []
    kept = _share_kept(shown, text)
    if kept < 0.995:
        lost.append(f"{1 - kept:.1%} of the page's visible words not kept (what the extractor took for the page's "
                    "chrome: menus, buttons, link lists)")
    return text, {"images": images, "tables": len(re.findall(rb"<table\b", data, re.IGNORECASE)), "lost": lost}


def _share_kept(shown: str, text: str) -> float:
    """Share of the words a browser would show that are in the extracted text (counted with multiplicity)."""
    want, got = Counter(re.findall(r"\w+", shown.lower())), Counter(re.findall(r"\w+", text.lower()))
    total = sum(want.values())
    return 1.0 if not total else sum(min(n, got[w]) for w, n in want.items()) / total


def _pdf(data: bytes, timeout_s: float) -> tuple[str, dict[str, Any]]:
    from lifesearch_local.web.extract import ExtractTimeout, extract_pdf_bounded

    if b"%PDF-" not in data[:1024]:
        raise Unreadable("not a PDF file (no %PDF- header)")
    try:
        text = extract_pdf_bounded(data, timeout_s).text
    except (ExtractTimeout, ValueError) as e:
        raise Unreadable(str(e)) from None
    # An image XObject is a stream, which never sits in a compressed object stream: its dictionary is plain bytes.
    images = len(re.findall(rb"/Subtype\s*/Image\b", data))
    cut = re.search(r"\[pages (\d+)-(\d+) not extracted", text)
    pages = int(cut.group(2)) if cut else text.count("[page ")
    lost = [f"{images} embedded image(s) dropped"] if images else []
    lost.append("layout flattened into text lines: tables, columns and headings are not marked")
    if cut:
        lost.append(f"pages {cut.group(1)}-{cut.group(2)} not read (over the {MAX_PDF_PAGES}-page cap)")
    return text, {"images": images, "pages": pages, "lost": lost}


def _docx(data: bytes, _timeout: float) -> tuple[str, dict[str, Any]]:
    from lifesearch_local.importers.docx_text import docx_text

    try:
        d = docx_text(data)
    except ValueError as e:
        raise Unreadable(str(e)) from None
    lost = [f"{d.images} image(s) or chart(s) dropped"] if d.images else []
    if d.tables:
        lost.append(f"{d.tables} table(s) written as markdown rows (merged cells not spanned)")
    if d.comments:
        lost.append(f"{d.comments} reviewer comment(s) not read")
    return d.text, {"images": d.images, "tables": d.tables, "lost": lost}


_READERS = {"markdown": _plain, "text": _plain, "html": _html, "pdf": _pdf, "docx": _docx}


def refusal(refused: list[str]) -> LifesearchError:
    """The error for unreadable report files: one line each, and how to import the others."""
    lines = "\n".join(f"  {r}" for r in refused)
    return LifesearchError(f"{len(refused)} report file(s) cannot be read (--skip-unreadable imports the others "
                           f"and records these in import.json):\n{lines}")


# -- `lifesearch import reports` -------------------------------------------------------------------

@dataclass
class ReportsImport:
    """The reports of one folder, what each file lost, and the files refused."""

    reports: list[Report] = field(default_factory=list)
    files: list[FileRead] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    cut_reports: int = 0
    inputs: dict[str, Any] = field(default_factory=dict)


def task_id_of(path: Path, prefix: str) -> str:
    """`idx-<n>.<ext>` → prefix + n (the evaluator's naming); any other `<name>.<ext>` → name."""
    m = REPORT_NAME.match(path.name)
    return f"{prefix}{m.group(1)}" if m else path.stem


def import_reports(folder: str | Path, agent: str, *, prefix: str = "", known: set[str] | None = None,
                   tasks_source: str | None = None, max_chars: int | None = None,
                   skip_unreadable: bool = False) -> ReportsImport:
    """Every report file of `folder` as a Report of `agent` (run 0); `known` (the tasks file's ids) refuses
    a report of another task, naming `tasks_source`."""
    root = Path(folder)
    if not root.is_dir():
        raise InputError(str(root), None, None, "no such directory")
    out = ReportsImport(inputs={"dir": str(root), "agent": agent, "id_prefix": prefix, "tasks": tasks_source,
                                "max_chars": max_chars})
    seen: dict[str, Path] = {}
    for f in report_entries(root, out.refused):
        tid = task_id_of(f, prefix)
        if id_problem(tid):
            out.refused.append(f"{f}: its name gives no task id ({id_problem(tid)})")
            continue
        if tid in seen:
            raise InputError(str(f), None, None, f"a second report for task {tid} (first: {seen[tid].name})")
        seen[tid] = f
        if known is not None and tid not in known:
            raise InputError(str(f), None, None, f"a report of task {tid}, which is not in the tasks file {tasks_source}")
        try:
            text, info = read_report_file(f, tid, agent, within=root)
        except Unreadable as e:
            out.refused.append(f"{f}: {e}")
            continue
        if max_chars and len(text) > max_chars:
            text, out.cut_reports = text[:max_chars], out.cut_reports + 1
        out.reports.append(Report(task_id=tid, agent=agent, run=0, text=text))
        out.files.append(info)
    if out.refused and not skip_unreadable:
        raise refusal(out.refused)
    if not out.reports:
        raise InputError(str(root), None, None, "no report files in it (" + ", ".join(sorted(FORMATS)) + ")")
    return out


def write_reports_import(result: ReportsImport, out: str | Path, *, force: bool = False) -> Path:
    """reports.jsonl and import.json (inputs, what each file lost, the files refused), atomically."""
    from lifesearch_local.importers.common import json_text, write_import_dir

    info = {"inputs": result.inputs, "counts": {"reports": len(result.reports), "refused": len(result.refused),
                                                "reports_cut": result.cut_reports},
            "report_files": [f.model_dump() for f in result.files], "refused": result.refused}
    return write_import_dir(out, {"reports.jsonl": result.reports, "import.json": json_text(info)},
                            source_file="reports.jsonl", command="lifesearch import reports", force=force)
