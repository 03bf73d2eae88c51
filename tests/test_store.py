"""Run store: whole-line appends, torn tails dropped on resume, manifest merged."""

from __future__ import annotations

import json
import threading

import pytest

from lifesearch_local.errors import InputError
from lifesearch_local.records import Judgment
from lifesearch_local.rundir.directory import RunDir


def j(i: int, **kw) -> Judgment:
    return Judgment(task_id=f"t{i}", agent="a", rubric_id="R1", judge="j", satisfied=i % 2 == 0, **kw)


def test_resume_keys_and_torn_tail(tmp_path):
    rd = RunDir(tmp_path / "run")
    rd.append("judgments.jsonl", [j(0), j(1)])
    # A kill in the middle of a write leaves a partial last line.
    with open(rd.file("judgments.jsonl"), "a") as f:
        f.write('{"task_id": "t2", "agent": "a", "rub')
    # A reader without the lock skips it but leaves the file alone: the line may be mid-write.
    assert rd.done_keys("judgments.jsonl", Judgment, lambda r: r.key) == {j(0).key, j(1).key}
    assert not rd.file("judgments.jsonl").read_text().endswith("\n")
    with rd.locked():
        keys = rd.done_keys("judgments.jsonl", Judgment, lambda r: r.key)
    assert keys == {j(0).key, j(1).key}
    assert rd.file("judgments.jsonl").read_text().endswith("\n")  # repaired for the next append
    rd.append("judgments.jsonl", [j(2)])
    assert [r.task_id for r in rd.load("judgments.jsonl", Judgment)] == ["t0", "t1", "t2"]


def test_append_cuts_a_torn_tail_first(tmp_path):
    rd = RunDir(tmp_path)
    rd.append("judgments.jsonl", [j(0)])
    with open(rd.file("judgments.jsonl"), "a") as f:
        f.write('{"task_id": "t1", "agent": "a", "rub')
    rd.append("judgments.jsonl", [j(1)])  # never glued onto the torn line
    assert [r.task_id for r in rd.load("judgments.jsonl", Judgment)] == ["t0", "t1"]


def test_corrupt_middle_line_is_an_error(tmp_path):
    rd = RunDir(tmp_path)
    rd.append("judgments.jsonl", [j(0)])
    with open(rd.file("judgments.jsonl"), "a") as f:
        f.write("garbage\n")
    rd.append("judgments.jsonl", [j(1)])
    with pytest.raises(InputError, match=r"judgments.jsonl:2: malformed JSON"):
        rd.load("judgments.jsonl", Judgment)


def test_concurrent_appends_keep_lines_whole(tmp_path):
    rd = RunDir(tmp_path)
    long_reason = "x" * 20000  # larger than a pipe buffer: would tear if writes interleaved

    def worker(k):
        for i in range(25):
            rd.append("judgments.jsonl", [j(k * 100 + i, reason=long_reason)])

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    rows = rd.load("judgments.jsonl", Judgment)
    assert len(rows) == 200 and len({r.key for r in rows}) == 200


def test_manifest_merges(tmp_path):
    rd = RunDir(tmp_path)
    m = rd.update_manifest(hashes={"tasks": "abc"}, seeds={"judge": 1})
    assert m.package_version and m.python
    rd.update_manifest(hashes={"prompts/judge_en": "def"}, stage=("judge", {"decisions": 10}))
    rd.update_manifest(stage=("judge", {"wall_s": 2.0}))
    data = json.loads(rd.file("manifest.json").read_text())
    assert data["hashes"] == {"tasks": "abc", "prompts/judge_en": "def"}
    assert data["seeds"] == {"judge": 1}
    assert data["stages"]["judge"] == {"decisions": 10, "wall_s": 2.0}
    assert data["created"] <= data["updated"]
