"""The README's promises that a test can hold: its two commands, the one `.ci/run` runs, its length and its links."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def bash_blocks(text: str) -> list[str]:
    return [b.strip() for b in re.findall(r"```bash\n(.*?)```", text, flags=re.S)]


def test_the_readme_opens_with_the_demo_then_the_test_command():
    demo, tests = bash_blocks(README)[:2]
    assert demo.endswith("&& lifesearch demo") and "pip install torch==2.13.0" in demo
    assert "python -m pytest" in tests and "ruff check ." in tests and "lint-imports" in tests
    # both within the first screen
    assert README.index(tests) < len("\n".join(README.splitlines()[:30]))


def test_ci_runs_exactly_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert bash_blocks(README)[1] in ci


def test_the_readme_reads_in_five_minutes():
    assert len(README.splitlines()) < 200


def test_every_local_link_of_the_readme_exists():
    links = re.findall(r"\]\(([^)#]+)\)", README)
    assert links, "the README links its docs"
    missing = [link for link in links if not link.startswith("http") and not (ROOT / link).exists()]
    assert not missing


def test_what_the_readme_s_commands_write_lands_under_runs():
    """A quickstart line once wrote scores.csv into the repository itself (untracked, beside the
    code): every `> FILE` of the README's commands goes under runs/, which git ignores."""
    targets = [t for b in bash_blocks(README) for t in re.findall(r"(?<![0-9&])>\s*([^\s;&|]+)", b)]
    assert targets, "the quickstart redirects a CSV"
    assert [t for t in targets if not t.startswith(("runs/", "/dev/"))] == []
