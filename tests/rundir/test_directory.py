"""The run directory: whole-line appends, torn tails cut, --out naming a file, a new directory or nothing."""

from __future__ import annotations

import threading

import pytest

from lifesearch_local.errors import InputError
from lifesearch_local.records import Judgment
from lifesearch_local.rundir.directory import RunDir, new_dir_or_nothing
from tests.helpers.cli import run_cli
from tests.helpers.inputs import judge_inputs


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


# -- --out naming a file, or a path under a file --------------------------------------------------------------

@pytest.mark.parametrize("under", [False, True])
def test_out_naming_a_file_is_one_line_exit_2(tmp_path, capsys, under):
    tasks, reports = judge_inputs(tmp_path)
    a_file = tmp_path / "plain.txt"
    a_file.write_text("x")
    out = a_file / "run" if under else a_file
    code, _, err = run_cli(["judge", "--tasks", str(tasks), "--reports", str(reports), "--model", "tiny-llama",
                            "--out", str(out), "--quiet"], capsys)
    assert code == 2 and err.count("\n") == 1 and "is a file" in err and "Traceback" not in err, err
    assert a_file.read_text() == "x"


def test_new_dir_or_nothing(tmp_path):
    fresh = tmp_path / "fresh"
    with pytest.raises(RuntimeError), new_dir_or_nothing(fresh, keep=("judgments.jsonl",)):
        fresh.mkdir()
        (fresh / "manifest.json").write_text("{}")
        raise RuntimeError("model failed to load")
    assert not fresh.exists()
    with pytest.raises(RuntimeError), new_dir_or_nothing(fresh, keep=("judgments.jsonl",)):
        fresh.mkdir()
        (fresh / "judgments.jsonl").write_text("{}\n")  # work done: kept for the rerun
        raise RuntimeError("died later")
    assert (fresh / "judgments.jsonl").exists()
    old = tmp_path / "old"
    old.mkdir()
    with pytest.raises(RuntimeError), new_dir_or_nothing(old):
        raise RuntimeError("x")
    assert old.exists()  # never remove what was there before


@pytest.mark.parametrize("name", ["judgments.jsonl", "manifest.json"])
def test_a_file_of_the_run_planted_as_a_symlink_is_refused_and_its_target_untouched(tmp_path, name):
    """The lock file's rule for every file a run directory writes: the writer that
    holds the directory refuses the link before it reads, cuts or appends anything."""
    from lifesearch_local.rundir.files import NotAPlainFile

    victim = tmp_path / "victim.jsonl"
    victim.write_text('{"task_id": "t9", "agent": "a", "rubric_id": "R1", "judge": "j", "satisfied": true}\n{"torn')
    rd = RunDir(tmp_path / "run")
    rd.file(name).symlink_to(victim)
    before = victim.read_bytes()
    with rd.locked(), pytest.raises(NotAPlainFile, match=f"{name}: is a symbolic link"):
        if name == "judgments.jsonl":
            rd.load(name, Judgment)  # the owner's load would cut the torn line of whatever it points at
        else:
            rd.update_manifest(seeds={"x": 1})
    with pytest.raises(NotAPlainFile):
        rd.append(name, [j(0)])
    assert victim.read_bytes() == before
