"""Issue 24, the third adversarial pass: each break reproduced through the command or API that broke."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from conftest import ROOT, rubric, task, write_jsonl

from lifesearch_local.cli import main
from lifesearch_local.errors import InputError, LifesearchError
from lifesearch_local.records import Judgment, Report, Task
from lifesearch_local.rundir.directory import RunDir
from lifesearch_local.rundir.jsonl import read_records
from lifesearch_local.rundir.lock import LOCK_FILE
from lifesearch_local.web.cache import WebCache
from lifesearch_local.web.records import Document

J = {"task_id": "t0", "agent": "a", "run": 0, "rubric_id": "R0", "judge": "j", "satisfied": True, "p_true": 0.9}
R = {"task_id": "t0", "agent": "a", "run": 0, "text": "A report."}
HUGE = "1" * 5000  # beyond Python's 4300-digit limit for int() of a string


def inputs(tmp_path: Path, n: int = 2) -> tuple[Path, Path]:
    tasks = write_jsonl(tmp_path / "tasks.jsonl", [task(f"t{i}", [rubric(f"R{k}", 0.5) for k in range(2)]) for i in range(n)])
    reports = write_jsonl(tmp_path / "reports.jsonl", [{**R, "task_id": f"t{i}", "text": f"Report on t{i}."} for i in range(n)])
    return tasks, reports


def run_cli(args: list[str], capsys) -> tuple[int, str, str]:
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


# -- 5. a blob that is a FIFO or a symlink to /dev/zero ---------------------------------------------------

def _cache_with_page(root: Path) -> tuple[WebCache, Document]:
    cache = WebCache(root)
    doc = Document(url="http://example.org/", final_url="http://example.org/", text="This is a page.", content_type="text/html",
                   status=200, bytes=6, fetched_at="2026-01-01T00:00:00+00:00", cache_key="k1", source="live")
    cache.put_page("k1", doc.url, None, doc, b"<html>")
    return cache, doc


@pytest.mark.parametrize("kind", ["fifo", "devzero"])
def test_a_blob_that_is_a_fifo_or_a_symlink_to_dev_zero_is_cache_corrupt(tmp_path, kind):
    script = f"""
import os, sys
sys.path.insert(0, {str(ROOT)!r})
from lifesearch_local.web.cache import WebCache
cache = WebCache({str(tmp_path / 'cache')!r})
sha = cache._db().execute("SELECT body_sha256 FROM pages").fetchone()[0]
path = cache.blob_path(sha)
path.unlink()
if {kind!r} == "fifo":
    os.mkfifo(path)
else:
    os.symlink("/dev/zero", path)
res = cache.get_page("k1")
print(res.kind, "|", res.message)
rep = cache.verify()
print(rep.ok, "|", rep.problems)
"""
    _cache_with_page(tmp_path / "cache")[0].close()
    # in a child with a memory cap and a timeout: the break is a hang (FIFO) or memory exhaustion (/dev/zero)
    res = subprocess.run([sys.executable, "-c", "import resource; resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))\n"
                          + script], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr[-2000:]
    first, second = res.stdout.splitlines()[:2]
    assert first.startswith("cache_corrupt |"), res.stdout
    assert "not a plain file" in first or "symbolic link" in first
    assert second.startswith("False |")


# -- 6. a symlinked lock file is not followed -------------------------------------------------------------

def test_a_symlinked_lock_file_is_refused_and_its_target_untouched(tmp_path, capsys):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    out = tmp_path / "run"
    out.mkdir()
    os.symlink(victim, out / LOCK_FILE)
    tasks, reports = inputs(tmp_path)
    code, _, err = run_cli(["judge", "--tasks", str(tasks), "--reports", str(reports), "--model", "tiny-llama",
                            "--out", str(out), "--quiet"], capsys)
    assert victim.read_text() == "precious\n"
    assert code == 2 and "symbolic link" in err and "Traceback" not in err, err


# -- 7. a 5000-digit integer ------------------------------------------------------------------------------

def test_a_5000_digit_integer_is_a_located_error_in_validate_score_judge(tmp_path, capsys):
    tasks, reports = inputs(tmp_path)
    bad_tasks = tmp_path / "bad_tasks.jsonl"
    bad_tasks.write_text(tasks.read_text() + '{"id": "t9", "x": ' + HUGE + "}\n")
    code, _, err = run_cli(["validate", str(bad_tasks)], capsys)
    assert code == 2 and f"{bad_tasks}:3:" in err and "Traceback" not in err, err
    bad_reports = tmp_path / "bad_reports.jsonl"
    bad_reports.write_text(reports.read_text() + '{"task_id": "t0", "agent": "b", "run": ' + HUGE + ', "text": "x"}\n')
    code, _, err = run_cli(["judge", "--tasks", str(tasks), "--reports", str(bad_reports), "--model", "tiny-llama",
                            "--out", str(tmp_path / "j"), "--quiet"], capsys)
    assert code == 2 and f"{bad_reports}:3:" in err, err
    judgments = tmp_path / "judgments.jsonl"
    judgments.write_text(json.dumps(J) + "\n" + json.dumps(J)[:-1] + ', "truncated_tokens": ' + HUGE + "}\n")
    code, _, err = run_cli(["score", "--tasks", str(tasks), "--judgments", str(judgments)], capsys)
    assert code == 2 and f"{judgments}:2:" in err and "Traceback" not in err, err


def test_repair_drops_a_line_with_a_5000_digit_integer(tmp_path, capsys):
    out = tmp_path / "run"
    out.mkdir()
    (out / "judgments.jsonl").write_text(json.dumps(J) + "\n" + '{"run": ' + HUGE + "}\n")
    code, stdout, err = run_cli(["repair", str(out)], capsys)
    assert code == 0 and "Traceback" not in err, err
    assert read_records(out / "judgments.jsonl", Judgment)[0].p_true == 0.9
    dropped = [json.loads(x) for x in (out / "judgments.jsonl.dropped").read_text().splitlines()]
    assert len(dropped) == 1 and "digits" in dropped[0]["why"]


# -- 8. a manifest nested 100k deep ------------------------------------------------------------------------

def test_a_deeply_nested_manifest_is_a_clear_error_in_judge_and_set_aside_by_repair(tmp_path, capsys):
    tasks, reports = inputs(tmp_path)
    out = tmp_path / "run"
    out.mkdir()
    (out / "manifest.json").write_text('{"stages": ' + "[" * 100_000 + "]" * 100_000 + "}")
    code, _, err = run_cli(["judge", "--tasks", str(tasks), "--reports", str(reports), "--model", "tiny-llama",
                            "--out", str(out), "--quiet"], capsys)
    assert code == 2 and "manifest.json" in err and "nested" in err and "Traceback" not in err, err
    code, stdout, err = run_cli(["repair", str(out)], capsys)
    assert code == 0 and "Traceback" not in err, err
    assert not (out / "manifest.json").exists() and list(out.glob("manifest.json.corrupt-*"))


# -- 9. --out naming a file, or a path under a file ----------------------------------------------------------

@pytest.mark.parametrize("under", [False, True])
def test_out_naming_a_file_is_one_line_exit_2(tmp_path, capsys, under):
    tasks, reports = inputs(tmp_path)
    a_file = tmp_path / "plain.txt"
    a_file.write_text("x")
    out = a_file / "run" if under else a_file
    code, _, err = run_cli(["judge", "--tasks", str(tasks), "--reports", str(reports), "--model", "tiny-llama",
                            "--out", str(out), "--quiet"], capsys)
    assert code == 2 and err.count("\n") == 1 and "is a file" in err and "Traceback" not in err, err
    assert a_file.read_text() == "x"


# -- 11. impossible p_true ---------------------------------------------------------------------------------

@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity", "7.5", "-0.1"])
def test_an_impossible_p_true_is_refused_at_load(tmp_path, value):
    path = tmp_path / "judgments.jsonl"
    path.write_text(json.dumps(J) + "\n" + json.dumps(J)[:-1].replace('"p_true": 0.9', f'"p_true": {value}') + "}\n")
    with pytest.raises(InputError) as e:
        read_records(path, Judgment)
    assert e.value.line == 2, str(e.value)


def test_agree_json_never_writes_bare_nan(tmp_path, capsys):
    tasks, _ = inputs(tmp_path, 1)
    judgments = tmp_path / "judgments.jsonl"
    judgments.write_text(json.dumps({**J, "rubric_id": "R0"}) + "\n"
                         + json.dumps({**J, "rubric_id": "R1"}).replace('"p_true": 0.9', '"p_true": NaN') + "\n")
    labels = write_jsonl(tmp_path / "labels.jsonl", [{**{k: J[k] for k in ("task_id", "agent", "run")}, "rubric_id": r,
                                                      "satisfied": r == "R0"} for r in ("R0", "R1")])
    code, out, err = run_cli(["agree", "--tasks", str(tasks), "--judgments", str(judgments), "--labels", str(labels), "--json"],
                             capsys)
    if code == 2:  # refused at load, naming the line
        assert f"{judgments}:2:" in err and "Traceback" not in err, err
    else:
        json.loads(out, parse_constant=lambda c: pytest.fail(f"bare {c} in --json output"))


# -- 12. duplicate keys, blank reports, a closed pipe, validate's hint -------------------------------------------------

def test_a_duplicate_key_is_a_located_error(tmp_path, capsys):
    path = tmp_path / "tasks.jsonl"
    line = json.dumps(task("t0", [rubric("R0", 0.5)], language="en"))
    path.write_text(line[:-1] + ', "language": "zh"}\n')
    code, _, err = run_cli(["validate", str(path)], capsys)
    assert code == 2 and f"{path}:1: language: duplicate key" in err, err


@pytest.mark.parametrize("text", ["\u200b\u200b\u200b", "\u200b \ufeff\u2060\u200d\n", "\u3000\u00a0"])
def test_a_report_of_zero_width_spaces_is_not_judged(tmp_path, text):
    from doubles import ScriptedBackend

    from lifesearch_local.judge.config import JudgeConfig
    from lifesearch_local.judge.stage import judge_stage
    from serving.config import model_config

    tasks = [Task.model_validate(task("t0", [rubric("R0", 0.5)]))]
    backend = ScriptedBackend(p_true_fn=lambda *a: 0.99)
    judge_stage(RunDir(tmp_path / "run"), tasks, [Report(task_id="t0", agent="a", text=text)],
                JudgeConfig(id="j", model=model_config(model="tiny-llama")), backend, show=False)
    assert backend.choice_calls == []
    (j,) = RunDir(tmp_path / "run").load("judgments.jsonl", Judgment)
    assert j.satisfied is False and j.reason == "empty report"


def test_score_json_into_a_closed_pipe_exits_quietly(tmp_path):
    tasks, _ = inputs(tmp_path, 1)
    judgments = write_jsonl(tmp_path / "judgments.jsonl", [{**J, "rubric_id": f"R{k}"} for k in range(2)])
    # the reader goes away before the command writes a byte (`| head` that has what it wanted)
    proc = subprocess.Popen([sys.executable, "-m", "lifesearch_local", "score", "--tasks", str(tasks), "--judgments",
                             str(judgments), "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    proc.stdout.close()
    err = proc.stderr.read().decode()
    proc.wait(timeout=120)
    assert "Traceback" not in err and "BrokenPipe" not in err, err
    assert proc.returncode in (0, 141), proc.returncode


def test_validate_on_a_reports_file_suggests_what_works(tmp_path, capsys):
    reports = write_jsonl(tmp_path / "reports.jsonl", [R])
    code, _, err = run_cli(["validate", str(reports)], capsys)
    assert code == 2 and "--draft" not in err and "`lifesearch " in err, err
    suggested = err.split("`lifesearch ")[1].split("`")[0].split()
    code, out, err = run_cli(suggested, capsys)
    assert code == 0 and "ok: 1 reports" in out, err


# -- 2. forged cache rows ------------------------------------------------------------------------------------

def _forge(root: Path, sql: str) -> None:
    con = sqlite3.connect(root / "index.sqlite")
    with con:
        con.execute(sql)
    con.close()


@pytest.mark.parametrize("how", ["null_checksum", "recomputed_checksum", "null_mac"])
def test_a_forged_cache_row_is_detected(tmp_path, capsys, how):
    from lifesearch_local.web.cache import row_sha256

    root = tmp_path / "cache"
    cache, doc = _cache_with_page(root)
    cache.close()
    forged = doc.model_copy(update={"text": "FORGED text", "body_sha256": cache._db().execute(
        "SELECT body_sha256 FROM pages").fetchone()[0]}).model_dump_json()
    con = sqlite3.connect(root / "index.sqlite")
    key, url, as_of, body = con.execute("SELECT key, url, as_of, body_sha256 FROM pages").fetchone()
    con.close()
    checksum = "NULL" if how == "null_checksum" else f"'{row_sha256(key, url, as_of, forged, body)}'"
    con = sqlite3.connect(root / "index.sqlite")
    keyed = "row_mac" in {r[1] for r in con.execute("PRAGMA table_info(pages)")}
    con.close()
    mac = ", row_mac = NULL" if keyed and how != "recomputed_checksum" else ""  # the forger blanks it too
    _forge(root, f"UPDATE pages SET result = '{forged.replace(chr(39), chr(39) * 2)}', row_sha256 = {checksum}{mac}")
    got = WebCache(root).get_page("k1")
    assert got.kind == "cache_corrupt", got
    code, out, err = run_cli(["cache", "verify", str(root)], capsys)
    assert code == 1 and "CORRUPT" in err and "row MAC" in out, out + err


def test_a_cache_made_to_look_older_is_refused(tmp_path, capsys):
    root = tmp_path / "cache"
    _cache_with_page(root)[0].close()
    _forge(root, "DROP TABLE meta")  # the index now looks like an older version's: adoption would bless forgeries
    with pytest.raises(LifesearchError, match="format marker|cache.key"):
        WebCache(root)
    (tmp_path / "other").mkdir()
    root2 = tmp_path / "c2"
    _cache_with_page(root2)[0].close()
    (root2 / "cache.key").unlink()
    with pytest.raises(LifesearchError, match="cache.key is missing"):
        WebCache(root2)


def test_the_cache_key_is_private_and_concurrent_openers_share_it(tmp_path):
    root = tmp_path / "cache"
    caches: list[WebCache] = []
    threads = [threading.Thread(target=lambda: caches.append(WebCache(root))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({c._key for c in caches}) == 1
    assert (root / "cache.key").stat().st_mode & 0o777 == 0o600


# -- 4. every encoding of an API key --------------------------------------------------------------------------

SECRET = "sk-Live_9f8e7d6c5b4a/3+21zyXW"


def _encoded_forms() -> dict[str, str]:
    from urllib.parse import quote

    return {
        "quote, safe '/'": quote(SECRET),
        "quote, safe ''": quote(SECRET, safe=""),
        "every byte": "".join(f"%{b:02X}" for b in SECRET.encode()),
        "every byte, lower": "".join(f"%{b:02x}" for b in SECRET.encode()),
        "double": quote(quote(SECRET, safe=""), safe=""),
        "double, every byte": "".join(f"%25{b:02X}" for b in SECRET.encode()),
        "json \\u": "".join(f"\\u{ord(c):04x}" for c in SECRET),
        "json \\u in json": "".join(f"\\\\u{ord(c):04x}" for c in SECRET),
        "mixed": "".join(f"%{ord(c):02X}" if i % 2 else c for i, c in enumerate(SECRET)),
    }


@pytest.fixture
def secret(monkeypatch):
    from serving import redact

    monkeypatch.setattr(redact, "_secrets", set())
    monkeypatch.setattr(redact, "_pattern", None)
    monkeypatch.setenv("LS_H3_KEY", SECRET)
    assert redact.secret_from_env("LS_H3_KEY") == SECRET
    return SECRET


@pytest.mark.parametrize("name", list(_encoded_forms()))
def test_every_encoding_of_a_key_is_redacted_in_judgments_and_http_errors(tmp_path, secret, name):
    import httpx

    from lifesearch_local.rundir.jsonl import append_lines
    from serving.config import model_config
    from serving.engines.openai import EndpointError, OpenAIEngine
    from serving.protocol import ChatRequest

    form = _encoded_forms()[name]
    path = tmp_path / "judgments.jsonl"
    append_lines(path, [Judgment.model_validate({**J, "reason": f"called with {form}.", "raw": f"<{form}>"})])
    assert form not in path.read_text() and "***" in path.read_text()
    for status in (401, 500):
        def handler(request: httpx.Request, status: int = status) -> httpx.Response:
            return httpx.Response(status, text=f"bad key {form}")

        cfg = model_config(backend="openai", model="m", base_url="http://endpoint.test/v1", api_key_env="LS_H3_KEY",
                           max_retries=1, retry_base_delay_s=0.0)
        with pytest.raises(EndpointError) as e:
            OpenAIEngine(cfg, transport=httpx.MockTransport(handler)).generate([ChatRequest(messages=[{"role": "user", "content": "hi"}])])
        assert form not in str(e.value) and "***" in str(e.value), (status, str(e.value))


def test_ordinary_percent_and_unicode_escapes_are_left_alone(secret):
    from serving.redact import redact

    text = "50%2F100 of sk-Live users; \\u0073k- is not a key; %73%6B only starts one"
    assert redact(text) == text


# -- 3. resume after `repair` (or a lost manifest) with other settings ----------------------------------------------

def _judge(model: str, jid: str = "X"):
    from lifesearch_local.judge.config import JudgeConfig
    from serving.config import model_config

    return JudgeConfig(id=jid, model=model_config(model=model))


def _tasks_reports(n: int = 3) -> tuple[list[Task], list[Report]]:
    tasks = [Task.model_validate(task(f"t{i}", [rubric(f"R{k}", 0.5) for k in range(2)])) for i in range(n)]
    return tasks, [Report(task_id=f"t{i}", agent="a", text=f"Report on t{i}.") for i in range(n)]


@pytest.mark.parametrize("how", ["repair", "deleted"])
def test_resume_with_other_settings_after_the_manifest_is_lost_is_refused(tmp_path, capsys, how):
    from doubles import ScriptedBackend

    from lifesearch_local.judge.stage import judge_stage
    from lifesearch_local.rundir.manifest import ConfigChanged

    rd = RunDir(tmp_path / "run")
    tasks, reports = _tasks_reports()
    judge_stage(rd, tasks[:1], reports[:1], _judge("tiny-llama"), ScriptedBackend(), show=False)
    if how == "repair":
        rd.file("manifest.json").write_text("{broken")
        assert main(["repair", str(rd.path)]) == 0
    else:
        rd.file("manifest.json").unlink()
    assert not rd.file("manifest.json").exists()
    before = rd.file("judgments.jsonl").read_bytes()
    with pytest.raises(ConfigChanged, match="as the records themselves say"):
        judge_stage(rd, tasks[:2], reports[:2], _judge("tiny-qwen3"), ScriptedBackend(), show=False)
    assert rd.file("judgments.jsonl").read_bytes() == before
    # the same settings resume; --force-config mixes them, once, and says so
    assert judge_stage(rd, tasks[:2], reports[:2], _judge("tiny-llama"), ScriptedBackend(), show=False)["decisions"] == 2
    stats = judge_stage(rd, tasks, reports, _judge("tiny-qwen3"), ScriptedBackend(), show=False, force_config=True)
    assert stats["decisions"] == 2 and "--force-config" in capsys.readouterr().err
    assert judge_stage(rd, tasks, reports, _judge("tiny-qwen3"), ScriptedBackend(), show=False)["decisions"] == 0


# -- 12. a rubric edited after judging -------------------------------------------------------------------------

@pytest.mark.parametrize("field,value", [("criterion", "Names the CEO."), ("priority", "Nice to Have"), ("question", "Other?")])
def test_verdicts_on_an_edited_rubric_are_refused_not_kept(tmp_path, field, value):
    from doubles import ScriptedBackend

    from lifesearch_local.judge.stage import judge_stage
    from lifesearch_local.rundir.manifest import ConfigChanged

    rd = RunDir(tmp_path / "run")
    tasks, reports = _tasks_reports(2)
    judge_stage(rd, tasks, reports, _judge("tiny-llama"), ScriptedBackend(), show=False)
    edited = [t.model_copy(deep=True) for t in tasks]
    if field == "question":
        edited[1].question = value
    else:
        setattr(edited[1].rubrics[0], field, value)
    with pytest.raises(ConfigChanged, match=r"changed since they were judged \(t1/R0"):
        judge_stage(rd, edited, reports, _judge("tiny-llama"), ScriptedBackend(), show=False)
    # a weight is not in what the judge reads: its verdicts stand, scoring uses the new weight
    reweighted = [t.model_copy(deep=True) for t in tasks]
    reweighted[1].rubrics[0].weight = 0.9
    assert judge_stage(rd, reweighted, reports, _judge("tiny-llama"), ScriptedBackend(), show=False)["decisions"] == 0


# -- 10. a task id of 100 CJK characters (300 bytes) -----------------------------------------------------------

@pytest.mark.parametrize("task_id,agent", [("长" * 100, "a"), ("t", "代理" * 60), ("é" * 200, "x" * 300)])
def test_a_long_task_id_gets_a_trajectory_file(tmp_path, task_id, agent):
    from lifesearch_local.agent.trajectory import TrajectoryLog, trajectory_name

    log = TrajectoryLog(tmp_path, task_id, agent, 0)
    log.reset()
    log.write({"step": 1})
    assert log.path.read_text().strip() == '{"step":1}'
    assert len(Path(trajectory_name(task_id, agent, 0)).name.encode()) <= 255
    assert trajectory_name(task_id, agent, 0) != trajectory_name(task_id + "长", agent, 0)  # cut names stay apart


def test_validate_accepts_a_long_cjk_task_id_that_the_agent_can_then_log(tmp_path, capsys):
    path = write_jsonl(tmp_path / "tasks.jsonl", [task("长" * 100, [rubric("R0", 0.5)])])
    code, out, err = run_cli(["validate", str(path)], capsys)
    assert code == 0, err
