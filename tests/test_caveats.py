"""Caveats (random weights, a near-constant judge) from lifesearch_local.analysis.caveats, in every command
that prints judge-derived numbers and in report.html: present where they apply, absent otherwise.
The commands run in process with a scripted engine in place of a model (the caveats depend on the
configs and the verdicts, not on the forward pass)."""

from __future__ import annotations

import contextlib
import json
import shutil

import pytest
from conftest import rubric, task, write_jsonl
from doubles import ScriptedBackend

from lifesearch_local.analysis.caveats import (
    MIN_DECISIONS,
    NEAR_CONSTANT_SHARE,
    NEAR_CONSTANT_SPREAD,
    caveats,
    caveats_html,
)
from lifesearch_local.cli import main
from lifesearch_local.judge.config import JudgeConfig
from lifesearch_local.records import Judgment
from serving.config import model_config

RANDOM, CONSTANT = "WARNING: random weights", "WARNING: near-constant judge"


def verdicts(judge: str, satisfied: list[bool | None], p_true: list[float] | None = None) -> list[Judgment]:
    p_true = p_true or [None] * len(satisfied)
    return [Judgment(task_id="t", agent="a", rubric_id=f"r{i}", judge=judge, satisfied=s, p_true=p)
            for i, (s, p) in enumerate(zip(satisfied, p_true))]


# --- the function ---------------------------------------------------------------------------------

def test_random_weights_from_configs_manifest_and_derived_ids():
    tiny, real = JudgeConfig(model=model_config(model="tiny-llama")), JudgeConfig(model=model_config(model="org/judge"))
    assert caveats(judges=[real]) == []
    [line] = caveats(judges=[tiny, real])
    assert line.startswith(f"{RANDOM}: judge {tiny.id} (tiny-llama).") and "org/judge" not in line
    manifest = {"stages": {"agent/bot": {"model": "tiny-qwen3", "random_weights": True},
                           "judge/custom": {"model": "tiny-qwen2", "random_weights": True},
                           "judge/other": {"model": "tiny-qwen2", "random_weights": True},
                           "judge/real": {"model": "org/judge", "random_weights": False}}}
    shown = [j.model_copy(update={"agent": "bot"}) for j in verdicts("custom", [True, False])]
    [line] = caveats(manifest=manifest, judgments=shown)  # only the stages behind the numbers shown
    assert "agent bot (tiny-qwen3), judge custom (tiny-qwen2)." in line and "judge other" not in line
    assert caveats(manifest=manifest, judgments=verdicts("real", [True, False])) == []
    # a bare judgments file: a derived id names its model
    assert "judge tiny-llama/choice/abc123 (tiny-llama)" in caveats(judgments=verdicts("tiny-llama/choice/abc123", [True]))[0]
    assert caveats(judgments=verdicts("tiny-llama-custom", [True])) == []


def test_near_constant_by_the_share_of_one_verdict():
    n = MIN_DECISIONS
    yes = round(n * NEAR_CONSTANT_SHARE)  # 19 of 20 = 95%: at the threshold
    [line] = caveats(judgments=verdicts("j", [True] * yes + [False] * (n - yes)))
    assert line.startswith(f"{CONSTANT}: j answered satisfied in 95% of {n} verdicts")
    [line] = caveats(judgments=verdicts("j", [False] * n + [None] * 5))  # ungraded are not verdicts
    assert "answered not satisfied in 100% of 20 verdicts" in line
    assert caveats(judgments=verdicts("j", [True] * (yes - 1) + [False] * (n - yes + 1))) == []  # 90%
    assert caveats(judgments=verdicts("j", [True] * (n - 1))) == []  # too few to tell
    # per judge: one constant judge beside a varied one
    mixed = verdicts("const", [True] * n) + verdicts("varied", [True, False] * (n // 2))
    assert [line.split(":")[1].split()[0] for line in caveats(judgments=mixed)] == ["near-constant"]
    assert "const answered" in caveats(judgments=mixed)[0]


def test_near_constant_by_the_spread_of_p_true():
    n = MIN_DECISIONS
    narrow = [0.49 + 0.02 * i / (n - 1) for i in range(n)]  # spans 0.02, verdicts split at 0.5
    [line] = caveats(judgments=verdicts("j", [p >= 0.5 for p in narrow], narrow))
    assert line.startswith(f"{CONSTANT}: j's p_true spans only 0.0") and f"below {NEAR_CONSTANT_SPREAD}" in line
    wide = [0.3 + 0.4 * i / (n - 1) for i in range(n)]
    assert caveats(judgments=verdicts("j", [p >= 0.5 for p in wide], wide)) == []
    # one outlier each side does not widen the middle 90%
    outliers = [0.0] + narrow[1:-1] + [1.0]
    assert caveats(judgments=verdicts("j", [p >= 0.5 for p in outliers], outliers))


def test_html_paragraphs():
    lines = caveats(judges=[JudgeConfig(model=model_config(model="tiny-llama"))], judgments=verdicts("<j>", [True] * 20))
    html = caveats_html(lines)
    assert html.count("<p class=\"warn caveat") == 2 and 'id="random-weights">Random weights: judge' in html
    assert "&lt;j&gt; answered satisfied" in html and "WARNING" not in html
    assert caveats_html([]) == ""


# --- the commands ---------------------------------------------------------------------------------

N_TASKS, N_RUBRICS, AGENTS = 2, 6, ("alpha", "beta")  # 24 decisions per judge: enough to call one constant
P_TRUE = {"varied": lambda key, i, req: 0.9 if i % 2 == 0 else 0.2, "constant": lambda key, i, req: 0.97}


@pytest.fixture
def inputs(tmp_path):
    tasks = [task(f"t{i}", [rubric(f"R{k}", 0.5) for k in range(N_RUBRICS)]) for i in range(N_TASKS)]
    reports = [{"task_id": f"t{i}", "agent": a, "run": 0, "text": f"Report {a} {i}."} for i in range(N_TASKS) for a in AGENTS]
    labels = [{"task_id": f"t{i}", "agent": a, "rubric_id": f"R{k}", "satisfied": k % 3 == 0, "source": "human"}
              for i in range(N_TASKS) for a in AGENTS for k in range(N_RUBRICS)]
    model_dir = tmp_path / "org-judge"  # a local model directory: real weights, as far as the caveats know
    model_dir.mkdir()
    return {"tasks": write_jsonl(tmp_path / "tasks.jsonl", tasks), "reports": write_jsonl(tmp_path / "reports.jsonl", reports),
            "labels": write_jsonl(tmp_path / "labels.jsonl", labels), "model": str(model_dir)}


@pytest.fixture
def engine(monkeypatch):
    """Every stage's model is a scripted engine whose p_true follows `engine.kind`."""
    class Fake:
        kind = "varied"

    def open_fake(model, ray, name):
        p = P_TRUE[Fake.kind]
        return contextlib.nullcontext(ScriptedBackend(texts=lambda req: '{"score": 4}', p_true_fn=p))

    monkeypatch.setattr("lifesearch_local.runtime.skeleton.default_open", open_fake)
    return Fake


def run_cli(capsys, *argv: str) -> tuple[str, str]:
    capsys.readouterr()
    assert main(list(argv)) == 0
    captured = capsys.readouterr()
    return captured.out, captured.err


def judge(capsys, inputs, out, model: str) -> str:
    stdout, _ = run_cli(capsys, "judge", "--tasks", str(inputs["tasks"]), "--reports", str(inputs["reports"]),
                        "--model", model, "--out", str(out), "--quiet")
    return stdout


@pytest.mark.parametrize("kind,model,expect", [
    ("varied", "dir", []), ("constant", "dir", [CONSTANT]), ("varied", "tiny-llama", [RANDOM]),
])
def test_judge_score_agree_and_report(inputs, engine, tmp_path, capsys, kind, model, expect):
    engine.kind = kind
    model = inputs["model"] if model == "dir" else model
    out = tmp_path / "run"
    said = {RANDOM: False, CONSTANT: False}
    outputs = {"judge": judge(capsys, inputs, out, model)}
    judgments = str(out / "judgments.jsonl")
    outputs["score"], _ = run_cli(capsys, "score", "--tasks", str(inputs["tasks"]), "--judgments", judgments)
    outputs["agree"], _ = run_cli(capsys, "agree", "--tasks", str(inputs["tasks"]), "--judgments", judgments,
                                  "--labels", str(inputs["labels"]))
    assert "LifeSearch scores" in outputs["score"] and "Judge agreement" in outputs["agree"]
    json_out, json_err = run_cli(capsys, "score", "--tasks", str(inputs["tasks"]), "--judgments", judgments, "--json")
    json.loads(json_out)  # the caveat goes to stderr: the JSON stays parseable
    outputs["score --json (stderr)"] = json_err
    for name in ("tasks", "reports"):  # a judge directory holds judgments only; `report` reads a run directory
        shutil.copy(inputs[name], out / f"{name}.jsonl")
    run_cli(capsys, "report", str(out))
    page = (out / "report.html").read_text(encoding="utf-8")
    for name, text in outputs.items():
        for caveat in said:
            assert (caveat in text) == (caveat in expect), (name, caveat, text[-600:])
    scores = page[page.index('<h2 id="scores">'):]
    assert ('id="random-weights"' in scores) == (RANDOM in expect)
    assert ("near-constant" in scores) == (CONSTANT in expect)
    if expect:  # above the tables, not below the fold
        assert scores.index('class="warn caveat') < scores.index("<table")


def test_score_of_a_judgments_file_outside_its_run_directory(inputs, engine, tmp_path, capsys):
    out = tmp_path / "run"
    judge(capsys, inputs, out, "tiny-llama")
    alone = tmp_path / "elsewhere" / "judgments.jsonl"  # no manifest beside it: the derived id tells
    alone.parent.mkdir()
    shutil.copy(out / "judgments.jsonl", alone)
    stdout, _ = run_cli(capsys, "score", "--tasks", str(inputs["tasks"]), "--judgments", str(alone))
    assert f"{RANDOM}: judge tiny-llama/choice/" in stdout


def write_config(path, inputs, judges: list[str], **extra) -> str:
    blocks = "".join(f"  - model:\n      model: {m}\n" for m in judges)
    lines = [f"tasks: {inputs['tasks']}", f"reports: {inputs['reports']}", f"labels: {inputs['labels']}",
             *(f"{k}: {v}" for k, v in extra.items()), f"judges:\n{blocks}"]
    path.write_text("\n".join(lines))
    return str(path)


def test_sweep_names_only_the_judges_it_applies_to(inputs, engine, tmp_path, capsys):
    engine.kind = "constant"
    cfg = write_config(tmp_path / "sweep.yaml", inputs, [inputs["model"], "tiny-llama"], name="s")
    stdout, _ = run_cli(capsys, "sweep", "--config", cfg, "--out", str(tmp_path / "sweep"), "--quiet")
    [random] = [line for line in stdout.splitlines() if line.startswith(RANDOM)]
    assert "judge tiny-llama/choice/" in random and "org-judge" not in random
    constant = [line for line in stdout.splitlines() if line.startswith(CONSTANT)]
    assert len(constant) == 2 and any("org-judge/choice/" in line for line in constant)
    engine.kind = "varied"
    cfg = write_config(tmp_path / "sweep2.yaml", inputs, [inputs["model"]], name="s2")
    stdout, _ = run_cli(capsys, "sweep", "--config", cfg, "--out", str(tmp_path / "sweep2"), "--quiet")
    assert "Judge agreement" in stdout and "WARNING" not in stdout


@pytest.mark.parametrize("kind", ["varied", "constant"])
def test_run_prints_the_caveat_under_its_scores(inputs, engine, tmp_path, capsys, kind):
    engine.kind = kind
    cfg = write_config(tmp_path / "run.yaml", inputs, [inputs["model"]], out=tmp_path / "run")
    stdout, _ = run_cli(capsys, "run", "--config", cfg, "--quiet")
    assert "LifeSearch scores" in stdout and (CONSTANT in stdout) == (kind == "constant") and RANDOM not in stdout
    if kind == "constant":
        assert stdout.index(CONSTANT) > stdout.index("LifeSearch scores")
        assert "near-constant" in (tmp_path / "run" / "report.html").read_text(encoding="utf-8")


@pytest.mark.parametrize("model,json_output", [("tiny-llama", False), ("tiny-llama", True), ("dir", False)])
def test_reporteval_says_when_its_judge_has_random_weights(inputs, engine, tmp_path, capsys, model, json_output):
    model = inputs["model"] if model == "dir" else model
    stdout, stderr = run_cli(capsys, "reporteval", "--reports", str(inputs["reports"]), "--tasks", str(inputs["tasks"]),
                             "--model", model, "--out", str(tmp_path / "re"), "--metrics", "quality", "--quiet",
                             *(["--json"] if json_output else []))
    said = stderr if json_output else stdout
    assert (RANDOM in said) == (model == "tiny-llama") and RANDOM not in (stdout if json_output else stderr)
