"""`lifesearch bench judge` prints both forms on the same inputs, and they agree."""

from __future__ import annotations

import importlib.util
import json
from types import SimpleNamespace

import pytest

from lifesearch_local.cli import main
from tests.helpers.inputs import SAMPLE
from tests.helpers.tolerances import P_TOL

ARGS = ["bench", "judge", "--model", "tiny-llama", "--prefix-tokens", "192", "--rubrics", "5", "--suffix-tokens", "24"]


@pytest.fixture
def bench(capsys):
    """`lifesearch …` in this process, as the shell sees it: returncode (argparse's exit too), stdout, stderr."""
    def run(*argv: str) -> SimpleNamespace:
        capsys.readouterr()
        try:
            code = main(list(argv))
        except SystemExit as e:
            code = e.code
        out = capsys.readouterr()
        return SimpleNamespace(returncode=code, stdout=out.out, stderr=out.err)

    return run


def test_json_has_both_sides_and_they_agree(bench):
    r = bench(*ARGS, "--json", "--reports", "2")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    for k in ("packed_s", "naive_s", "speedup", "packed_tokens", "naive_tokens", "max_abs_diff"):
        assert k in out
    # the packed pass counts each report's prefix once (a suffix may share a few more first tokens)
    assert out["packed_tokens"] <= 2 * (192 + 5 * 24) and out["naive_tokens"] == 2 * 5 * (192 + 24)
    assert out["max_abs_diff"] <= P_TOL and out["packed_form"] == "shared" and out["decisions"] == 10
    assert out["packed_attention"] == "flash"  # fp32: torch's attention, never the compiled bf16 kernels
    # this CPU's matmul rate in both dtypes, and what each column achieved against it
    assert set(out["matmul_gflops"]) == {"float32", "bfloat16"} and out["matmul_gflops"]["float32"] > 0
    for name in ("packed", "naive", "prefix"):
        assert out[f"{name}_gflops"] > 0 and out[f"{name}_of_matmul"] > 0
    assert out["naive_gflop"] > out["packed_gflop"] > out["prefix_gflop"]  # the prefix once, not per rubric


def test_text_output(bench):
    r = bench(*ARGS)
    assert r.returncode == 0 and "speedup" in r.stdout and "baseline (single)" in r.stdout
    assert "matmul rate here" in r.stdout and "GFLOP/s" in r.stdout.split("achieved at the median")[1]
    # before the minutes of work: the inputs, then per form an estimate and when it is done (stderr)
    said = [line for line in r.stderr.splitlines() if line.startswith(("inputs:", "shared:", "single:"))]
    assert said[0].startswith("inputs: 1 report(s) × 5 rubrics, prefix 192 + suffix 24 tokens; model tiny-llama")
    assert [line.split(" ")[:2] for line in said[1:]] == [["shared:", "about"], ["shared:", "done"],
                                                          ["single:", "about"], ["single:", "done"]]
    assert "tokens/s, so roughly" in said[1]


def test_vllm_baseline_without_vllm_is_a_clear_error(bench):
    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("vLLM is installed: the GPU tests cover the real baseline")
    r = bench(*ARGS, "--backend", "vllm")
    assert r.returncode == 2 and "needs vLLM" in r.stderr
    assert "inputs:" not in r.stderr  # said before the hf side's scoring, not after it


def test_reports_from_uses_the_real_judge_prompts(bench):
    """Shapes come from real reports: one group per report, one decision per judged rubric, and the
    packed kernel still agrees with the baseline on those real token ids."""
    from transformers import AutoTokenizer

    from lifesearch_local.judge.rubric import judged_rubrics
    from lifesearch_local.llm.models import tiny_model_dir
    from lifesearch_local.records import Report
    from lifesearch_local.rundir.jsonl import read_records
    from lifesearch_local.tasks import load_tasks

    reports = read_records(SAMPLE / "reports.jsonl", Report)[:2]
    tasks = {t.id: t for t in load_tasks(SAMPLE / "tasks.jsonl")}
    r = bench("bench", "judge", "--model", "tiny-llama", "--reports-from", str(SAMPLE / "reports.jsonl"), "--limit", "2",
              "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["reports"] == 2
    assert out["decisions"] == sum(len(judged_rubrics(tasks[x.task_id])) for x in reports)
    # every report lies inside its prompts' shared prefix (with the template head and the question);
    # a BPE merge at the report's edges may move a token or two across the boundary
    tok = AutoTokenizer.from_pretrained(tiny_model_dir("tiny-llama"))
    shortest = min(len(tok(x.text, add_special_tokens=False)["input_ids"]) for x in reports)
    assert out["prefix_tokens_min"] >= shortest - 2 and out["suffix_tokens_mean"] > 0
    assert out["packed_tokens"] < out["naive_tokens"] and out["max_abs_diff"] <= P_TOL


def test_reports_from_unknown_task_is_an_input_error(tmp_path, bench):
    bad = tmp_path / "reports.jsonl"
    bad.write_text(json.dumps({"task_id": "nope", "agent": "a", "text": "x"}) + "\n")
    r = bench("bench", "judge", "--reports-from", str(bad), "--tasks", str(SAMPLE / "tasks.jsonl"))
    assert r.returncode == 2 and "reports.jsonl:1: task_id" in r.stderr and "nope" in r.stderr
    r = bench("bench", "judge", "--reports-from", str(SAMPLE / "reports.jsonl"), "--limit", "0")
    assert r.returncode == 2 and "must be at least 1" in r.stderr
    r = bench("bench", "judge", "--limit", "2")
    assert r.returncode == 2 and "go with --reports-from" in r.stderr


def test_repeats_give_min_median_max_and_the_load_average_and_baseline_none_skips_a_column(bench):
    r = bench(*ARGS, "--json", "--repeats", "3", "--baseline", "none")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)  # the whole of stdout is the one JSON object
    assert len(out["packed_runs"]) == 3 and out["repeats"] == 3
    assert out["packed_s_min"] <= out["packed_s"] <= out["packed_s_max"]
    assert sorted(out["packed_runs"])[1] == pytest.approx(out["packed_s"], abs=1e-4)
    assert len(out["load_average_before"]) == 3 and len(out["load_average_after"]) == 3
    assert "naive_s" not in out and "speedup" not in out
    text = bench(*ARGS, "--repeats", "2", "--baseline", "none")
    assert text.returncode == 0 and "min s" in text.stdout and "load average" in text.stdout
    assert "baseline" not in text.stdout


def test_reports_from_times_the_judges_own_path(bench):
    r = bench("bench", "judge", "--model", "tiny-llama", "--reports-from", str(SAMPLE / "reports.jsonl"), "--limit", "1",
              "--json", "--repeats", "1")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["judge_path"] is True and out["max_abs_diff"] <= P_TOL


def test_json_stdout_moves_what_child_processes_write_to_stderr(tmp_path):
    """vLLM's engine processes log to file descriptor 1: with --json only the object may reach stdout."""
    import subprocess
    import sys

    code = ("import os, sys\n"
            "from lifesearch_local.cli.bench_judge import json_stdout\n"
            "with json_stdout() as out:\n"
            "    os.system('echo engine-noise')\n"
            "    print('python-noise')\n"
            "    print('{\"ok\": 1}', file=out)\n"
            "print('after')\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout == '{"ok": 1}\nafter\n'
    assert "engine-noise" in run.stderr and "python-noise" in run.stderr


def test_a_busy_machine_is_said_in_one_line(bench, monkeypatch):
    from serving._util import threads

    monkeypatch.setattr(threads, "_loadavg", lambda: "3.00 2.00 1.00 4/300 9")
    monkeypatch.setattr(threads, "read_limits", lambda env=None, reserved=None: threads.CpuLimits(2, None, None))
    r = bench(*ARGS, "--json", "--repeats", "1", "--baseline", "none")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["busy"].startswith("machine busy: load average 3, 3 other busy process(es) on 2 usable CPU(s)")
    text = bench(*ARGS, "--repeats", "1", "--baseline", "none")
    assert out["busy"].split(";")[0] in text.stdout and out["busy"].split(";")[0] in text.stderr
