"""`lifesearch` main: the library's notices and warnings reach stderr in their own words; --debug adds debug records."""

from __future__ import annotations

import logging

from lifesearch_local.cli import main
from serving.logs import StderrLines
from tests.helpers.inputs import rubric, task, write_jsonl


def without_log_setup() -> None:
    """Undo the suite's own setup (conftest), so that only what main does is seen."""
    root = logging.getLogger()
    for h in [h for h in root.handlers if isinstance(h, StderrLines)]:
        root.removeHandler(h)
    for name in ("lifesearch_local", "serving"):
        logging.getLogger(name).setLevel(logging.NOTSET)


def test_a_forced_resume_warns_on_stderr_in_the_words_it_always_had(tmp_path, capsys):
    tasks = write_jsonl(tmp_path / "tasks.jsonl", [task(f"t{i}", [rubric("R1", 0.5), rubric("R2", 0.5)]) for i in range(2)])
    reports = write_jsonl(tmp_path / "reports.jsonl", [{"task_id": f"t{i}", "agent": "a", "run": 0, "text": f"Report {i}."}
                                                        for i in range(2)])
    base = ["judge", "--tasks", str(tasks), "--reports", str(reports), "--out", str(tmp_path / "run"), "--id", "j",
            "--quiet"]
    without_log_setup()
    assert main([*base, "--model", "tiny-llama", "--limit", "1"]) == 0
    assert main([*base, "--model", "tiny-qwen3"]) == 2
    assert "pass --force-config" in capsys.readouterr().err
    without_log_setup()
    assert main([*base, "--model", "tiny-qwen3", "--force-config"]) == 0
    lines = capsys.readouterr().err.splitlines()
    run = tmp_path / "run"
    assert lines[0].startswith(f"warning: --force-config: {run}: judge/j has records made with other settings (")
    assert lines[1].startswith(f"warning: --force-config: judge/j in {run} continues with another config (hash ")
    assert lines[1].endswith('model.model "tiny-llama" -> "tiny-qwen3"); its records now mix both') and len(lines) == 2


def test_debug_shows_the_librarys_debug_records_named_by_logger(tmp_path, capsys, monkeypatch):
    import lifesearch_local.cli.validate as validate

    def run(args):
        logging.getLogger("lifesearch_local.tasks").debug("read %d lines", 3)
        logging.getLogger("lifesearch_local.tasks").info("a notice")
        return 0

    monkeypatch.setattr(validate, "run", run)  # a command whose library logs
    without_log_setup()
    assert main(["validate", "x.jsonl"]) == 0
    assert capsys.readouterr().err == "a notice\n"
    assert main(["--debug", "validate", "x.jsonl"]) == 0
    assert capsys.readouterr().err == "lifesearch_local.tasks: read 3 lines\na notice\n"
