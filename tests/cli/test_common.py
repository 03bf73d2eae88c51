"""What the commands share: the caveats (random weights, a near-constant judge) under every table
of judge-derived numbers and in report.html, and the agreement summary.

The commands run in process with a scripted engine in place of a model (the caveats depend on
the configs and the verdicts, not on the forward pass)."""

from __future__ import annotations

import contextlib
import json
import shutil

import pytest

from lifesearch_local.cli import main
from tests.helpers.doubles import ScriptedBackend
from tests.helpers.inputs import AGREE, rubric, task, write_jsonl

RANDOM, CONSTANT = "WARNING: random weights", "WARNING: near-constant judge"


# -- the caveats under each command's numbers ------------------------------------------------------------

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


def test_print_agreement_summary(agree_records, tmp_path, capsys):
    from lifesearch_local.cli.common import print_agreement_summary

    print_agreement_summary(agree_records["tasks"], agree_records["judgments"], AGREE / "labels.jsonl")
    out = capsys.readouterr().out
    assert "Judge agreement with 15 labels (human)" in out and "91.11" in out
    print_agreement_summary(agree_records["tasks"], agree_records["judgments"], tmp_path / "absent.jsonl")
    assert capsys.readouterr().out == ""
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"task_id":"t1","agent":"omega","run":0,"rubric_id":"r1","satisfied":true}\n')
    print_agreement_summary(agree_records["tasks"], agree_records["judgments"], bad)
    assert "judge agreement not computed" in capsys.readouterr().err


# -- --seed ------------------------------------------------------------------------------------------------

SEEDED = {
    "score": ["score", "--tasks", str(AGREE / "tasks.jsonl"), "--judgments", str(AGREE / "judgments.jsonl")],
    "agree": ["agree", "--tasks", str(AGREE / "tasks.jsonl"), "--judgments", str(AGREE / "judgments.jsonl"),
              "--labels", str(AGREE / "labels.jsonl")],
    "reporteval": ["reporteval", "--reports", str(AGREE / "reports.jsonl"), "--model", "tiny-llama", "--out", "unused"],
    "bench judge": ["bench", "judge"],
    "leaderboard": ["leaderboard", str(AGREE / "judgments.jsonl"), "--tasks", str(AGREE / "tasks.jsonl")],
    "rejudge": ["rejudge", "unused", "--sample", "1"],
}


@pytest.mark.parametrize("command", SEEDED)
@pytest.mark.parametrize("seed", ["-1", str(2**64)])
def test_every_seed_outside_its_range_is_refused_in_one_line(command, seed, capsys, tmp_path, monkeypatch):
    """`score --seed -1` ended in a numpy traceback: every --seed is an integer
    from 0 to 2^64 - 1, refused by the argument parser in one line naming the flag."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exc:
        main([*SEEDED[command], "--seed", seed])
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2 and "argument --seed:" in err[-1] and "Traceback" not in "\n".join(err)
    assert not (tmp_path / "unused").exists()


def test_every_seed_flag_of_every_command_is_checked():
    """A command added later with `--seed` of type int took -1 (rejudge did, after every other --seed was fixed):
    every --seed of every subcommand goes through seed_int."""
    import argparse

    from lifesearch_local.cli import build_parser
    from lifesearch_local.cli.common import seed_int

    def seeds(parser: argparse.ArgumentParser, name: str) -> list[tuple[str, object]]:
        found = []
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub, subparser in action.choices.items():
                    found += seeds(subparser, f"{name} {sub}".strip())
            elif "--seed" in action.option_strings:
                found.append((name, action.type))
        return found

    found = seeds(build_parser(), "")
    assert {"score", "agree", "leaderboard", "rejudge"} <= {n for n, _ in found}
    assert [n for n, t in found if t is not seed_int] == []


def test_the_largest_seed_is_a_seed(capsys):
    assert main([*SEEDED["score"], "--json", "--resamples", "50", "--seed", str(2**64 - 1)]) == 0
    assert json.loads(capsys.readouterr().out)["judges"]["const"]["bootstrap"]["seed"] == 2**64 - 1


# -- --task-ids ------------------------------------------------------------------------------------------

def test_task_ids_from_the_option_or_a_file(tmp_path):
    import argparse

    from lifesearch_local.cli.common import add_task_ids, selected_task_ids
    from lifesearch_local.errors import InputError, LifesearchError

    p = argparse.ArgumentParser()
    p.add_argument("sources", nargs="*")
    add_task_ids(p)
    assert selected_task_ids(p.parse_args(["a.csv"])) is None
    # comma-separated, repeatable, and never swallowing the positional arguments after it
    args = p.parse_args(["--task-ids", "drb2-1, drb2-16", "--task-ids", "drb2-2", "a.csv"])
    assert selected_task_ids(args) == {"drb2-1", "drb2-16", "drb2-2"} and args.sources == ["a.csv"]
    ids = tmp_path / "ids.txt"
    ids.write_text("# chosen by hand\ndrb2-1\n  drb2-40  # the HTML one\n\n")
    assert selected_task_ids(p.parse_args(["--task-ids-file", str(ids)])) == {"drb2-1", "drb2-40"}
    ids.write_text("# nothing\n\n")
    with pytest.raises(InputError, match="lists no task ids"):
        selected_task_ids(p.parse_args(["--task-ids-file", str(ids)]))
    with pytest.raises(LifesearchError, match="no task id given"):
        selected_task_ids(p.parse_args(["--task-ids", " , "]))
    with pytest.raises(SystemExit):
        p.parse_args(["--task-ids", "a", "--task-ids-file", str(ids)])


SHADOW = "root:$6$salt$hashhashhash:19000:0:99999:7:::\ndaemon:*:19000:0:99999:7:::\n"


def test_a_task_ids_file_is_read_capped_and_never_echoed(inputs, tmp_path, capsys):
    """--task-ids-file /dev/zero ran out of memory; a private file given by mistake was printed line by line."""
    judged = [{"task_id": f"t{i}", "agent": a, "rubric_id": f"R{k}", "judge": "j", "satisfied": True}
              for i in range(N_TASKS) for a in AGENTS for k in range(N_RUBRICS)]
    base = ["score", "--tasks", str(inputs["tasks"]), "--judgments", str(write_jsonl(tmp_path / "j.jsonl", judged))]
    assert main([*base, "--task-ids-file", "/dev/zero"]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "error: /dev/zero: over 4,194,304 bytes: not a list of task ids"]
    nul = tmp_path / "nul.txt"
    nul.write_bytes(b"t1\n\x00secret\n")
    assert main([*base, "--task-ids-file", str(nul)]) == 2
    err = capsys.readouterr().err
    assert err.strip().splitlines() == [f"error: {nul}:2: not a task id: control character U+0000 at character 0: "
                                        "ids never hold control characters (a carriage return would split a CSV row in two)"]
    secret = tmp_path / "shadow"
    secret.write_text(SHADOW)
    assert main([*base, "--task-ids-file", str(secret)]) == 2
    out, err = capsys.readouterr()
    assert err.strip().splitlines() == [f"error: --task-ids: 2 id(s) not in the tasks file {inputs['tasks']}: "
                                        f"{secret}:2, {secret}:1"]
    assert "hashhash" not in out + err and "daemon" not in out + err and "19000" not in out + err
    assert main([*base, "--task-ids", "t1,t\x1b[2J"]) == 2  # typed: refused where it enters
    assert "--task-ids: not a task id: control character U+001B" in capsys.readouterr().err


def test_ids_given_as_arguments_are_checked_where_they_enter(tmp_path, capsys):
    import argparse

    from lifesearch_local.cli.common import id_arg, id_prefix_arg

    assert id_arg("agent-1") == "agent-1" and id_prefix_arg("") == "" and id_prefix_arg("drb-") == "drb-"
    for bad in ("a\x00b", " ", "x\ry"):
        with pytest.raises(argparse.ArgumentTypeError, match="not an id: "):
            id_arg(bad)
    with pytest.raises(argparse.ArgumentTypeError, match="control character U\\+0007"):
        id_prefix_arg("p\x07")


def test_judge_task_ids_judge_only_those_tasks_reports(inputs, engine, tmp_path, capsys):
    out = tmp_path / "run"
    stdout, _ = run_cli(capsys, "judge", "--tasks", str(inputs["tasks"]), "--reports", str(inputs["reports"]),
                        "--model", inputs["model"], "--out", str(out), "--quiet", "--task-ids", "t1")
    assert "--task-ids: judging 1 of 2 tasks and their 2 of 4 reports" in stdout
    judged = [json.loads(line) for line in (out / "judgments.jsonl").read_text().splitlines()]
    assert {j["task_id"] for j in judged} == {"t1"} and len(judged) == 2 * N_RUBRICS
    capsys.readouterr()
    assert main(["judge", "--tasks", str(inputs["tasks"]), "--reports", str(inputs["reports"]), "--model", inputs["model"],
                 "--out", str(tmp_path / "other"), "--task-ids", "t1,t7"]) == 2
    assert f"1 id(s) not in the tasks file {inputs['tasks']}: t7" in capsys.readouterr().err
    assert not (tmp_path / "other").exists()


def test_demo_like_agents_without_tool_calls_get_the_no_research_caveat_in_run_and_report(inputs, engine, tmp_path, capsys):
    """Found in use: the demo's agents made no tool call and nothing said their reports were not research."""
    rows = [{**json.loads(line), "tool_calls": 0 if '"alpha"' in line else 5, "pages_read": 0}
            for line in inputs["reports"].read_text().splitlines()]
    write_jsonl(inputs["reports"], rows)
    cfg = write_config(tmp_path / "run.yaml", inputs, [inputs["model"]], out=tmp_path / "run")
    stdout, _ = run_cli(capsys, "run", "--config", cfg, "--quiet")
    [line] = [x for x in stdout.splitlines() if x.startswith("WARNING: no research")]
    assert "agent alpha made no tool call in any of its 2 report(s)" in line
    page = (tmp_path / "run" / "report.html").read_text(encoding="utf-8")
    assert 'class="warn caveat no-research">No research: agent alpha' in page
    assert ">Tool calls</th>" in page and ">Pages read</th>" in page


def _option(parser, path: list[str], dest: str):
    for action in parser._actions:
        if action.dest == dest and not path:
            return action
        if path and hasattr(action, "choices") and isinstance(action.choices, dict) and path[0] in action.choices:
            return _option(action.choices[path[0]], path[1:], dest)
    raise AssertionError(f"no option {dest} under {path}")


@pytest.mark.parametrize(("path", "dest", "cls", "field", "other"), [
    (["certify"], "margin", "lifesearch_local.run.config:CertifySettings", "margin", 3.5),
    (["certify"], "category_field", "lifesearch_local.run.config:CertifySettings", "category_field", "dimension"),
    (["certify"], "alpha", "lifesearch_local.run.config:CertifySettings", "alpha", 0.05),
    (["import", "drb2"], "max_chars", "lifesearch_local.importers.config:Drb2ImportConfig", "max_chars", 999),
])
def test_an_option_that_changes_a_result_takes_its_default_from_the_marked_field(monkeypatch, path, dest, cls, field,
                                                                                 other):
    # one declaration: the CLI reads the default off the settings field (marked Result, as every config field is),
    # so changing the field changes the option; a copy written into the parser would not follow
    import importlib

    from lifesearch_local.cli import build_parser
    from serving.affects import affects

    module, name = cls.split(":")
    settings = getattr(importlib.import_module(module), name)
    assert affects(settings, field).what == "result"
    assert _option(build_parser(), path, dest).default == settings.model_fields[field].default
    monkeypatch.setattr(settings.model_fields[field], "default", other)
    assert _option(build_parser(), path, dest).default == other


def test_run_and_demo_score_tables_show_the_reports_cut(tmp_path, capsys):
    """`run` and `demo` print their scores through print_result: the cut column is there as in `score`."""
    from types import SimpleNamespace

    from lifesearch_local.analysis.scoring import score_by_judge
    from lifesearch_local.cli.common import print_result
    from lifesearch_local.records import Judgment
    from lifesearch_local.rundir.jsonl import read_records
    from lifesearch_local.tasks import load_tasks
    from tests.helpers.report_runs import make_run_dir

    run = make_run_dir(tmp_path / "run", extras=False)
    rows = [json.loads(line) for line in (run / "judgments.jsonl").read_text().splitlines()]
    for r in rows:
        if r["agent"] == "alpha" and r["task_id"] == "t1":
            r["truncated_tokens"] = 5
    (run / "judgments.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    scores = score_by_judge(load_tasks(run / "tasks.jsonl"), read_records(run / "judgments.jsonl", Judgment))
    assert print_result(SimpleNamespace(stages={}, stopped=False, scores=scores, run_dir=run))
    out = capsys.readouterr().out
    assert "Reports cut (median seen)" in out and "2/4 cut" in out, out[:3000]


# -- judge: the judge configs and the Ray settings from one reading of --config ---------------------------


def judge_args(*extra: str):
    from lifesearch_local.cli import build_parser

    return build_parser().parse_args(["judge", "--tasks", "t.jsonl", "--reports", "r.jsonl", "--out", "o", *extra])


@pytest.mark.parametrize(("flag", "ray"), [((), {"replicas": 3}), (("--ray",), {"replicas": 3}), (("--no-ray",), None)])
def test_judge_reads_the_ray_block_beside_its_judges_unless_no_ray(tmp_path, flag, ray):
    from lifesearch_local.cli.common import judge_settings

    y = tmp_path / "judge.yaml"
    y.write_text("judge:\n  id: j\n  model:\n    model: tiny-llama\nray:\n  replicas: 3\n")
    judges, got = judge_settings(judge_args("--config", str(y), "--runs", "2", *flag))
    assert [(j.id, j.runs) for j in judges] == [("j", 2)]  # the command line's settings over the file's
    assert (None if got is None else {"replicas": got.replicas}) == ray


def test_judge_without_a_ray_block_runs_in_process_unless_ray(tmp_path):
    from lifesearch_local.cli.common import judge_settings

    y = tmp_path / "judge.yaml"
    y.write_text("model:\n  model: tiny-llama\n")
    assert judge_settings(judge_args("--config", str(y)))[1] is None
    assert judge_settings(judge_args("--config", str(y), "--ray"))[1].replicas == 1  # a local cluster, one replica
    assert judge_settings(judge_args("--model", "tiny-llama", "--ray"))[1].replicas == 1


@pytest.mark.parametrize("flag", [(), ("--no-ray",)])
def test_judge_refuses_a_bad_ray_block_even_when_not_used(tmp_path, flag):
    # a file with a `judge:` block is validated whole, as `run` validates it
    from lifesearch_local.cli.common import judge_settings
    from lifesearch_local.errors import InputError

    y = tmp_path / "judge.yaml"
    y.write_text("judge:\n  model:\n    model: tiny-llama\nray:\n  replicas: 0\n")
    with pytest.raises(InputError) as e:
        judge_settings(judge_args("--config", str(y), *flag))
    assert str(e.value).startswith(f"{y}: ray.replicas:")


def test_a_flag_the_judges_backend_lacks_is_refused_in_one_line(tmp_path, capsys):
    """--kernel over an endpoint judge's config: one line naming the flag, the file and the field, exit 2
    (not a pydantic traceback)."""
    cfg = tmp_path / "judge.yaml"
    cfg.write_text("judges:\n  - id: remote\n    model: {backend: openai, model: m, base_url: 'http://127.0.0.1:9/v1'}\n")
    code = main(["judge", "--config", str(cfg), "--kernel", "shared", "--tasks", str(tmp_path / "t.jsonl"),
                 "--reports", str(tmp_path / "r.jsonl"), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1
    assert err.startswith("error: --kernel over ") and "judge.yaml: model.kernel:" in err and "openai" in err
    assert not (tmp_path / "out").exists()
