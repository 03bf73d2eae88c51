"""One declaration of what changes a result (serving/affects.py): every field of every config class
is marked, and the resume guard, the run-config check and the derived judge id all follow the marks."""

from __future__ import annotations

import importlib
import pkgutil
import typing

import pytest
from pydantic import BaseModel, ConfigDict

import lifesearch_local
import serving
from lifesearch_local.errors import LifesearchError
from lifesearch_local.judge.config import JudgeConfig
from lifesearch_local.judge.stage import judge_stage
from lifesearch_local.records import Report, Task
from lifesearch_local.run.config import RunConfig
from lifesearch_local.run.pipeline import prepare_run_dir
from lifesearch_local.rundir.directory import RunDir
from lifesearch_local.rundir.manifest import ConfigChanged, resume_config
from serving.affects import Affects, Execution, Result, affects, unclassified
from serving.config import HFConfig, OpenAIConfig, RayConfig, VLLMConfig, model_config
from tests.helpers.doubles import ScriptedBackend
from tests.helpers.inputs import ROOT, rubric, task

# Scripts run as files (never imported by the package): importing them would run them.
_SCRIPTS = {"lifesearch_local.__main__", "lifesearch_local.agent.sandbox_runner"}
# Modules whose forbid-extra models are records (what stages write, protocol messages, other
# benchmarks' file formats), not settings.
_RECORD_MODULES = ("records", "protocol")


def _all_models() -> list[type[BaseModel]]:
    for pkg in (lifesearch_local, serving):
        for mod in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + "."):
            if mod.name not in _SCRIPTS:
                importlib.import_module(mod.name)
    seen: list[type[BaseModel]] = []
    todo = [BaseModel]
    while todo:
        for sub in todo.pop().__subclasses__():
            if sub not in seen:
                seen.append(sub)
                todo.append(sub)
    return [c for c in seen if c.__module__.split(".")[0] in ("lifesearch_local", "serving")]


def _nested_models(tp: object) -> list[type[BaseModel]]:
    """The BaseModel classes a field annotation holds (inside unions, lists, Annotated)."""
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return [tp]
    return [m for arg in typing.get_args(tp) for m in _nested_models(arg)]


def config_classes(models: list[type[BaseModel]], where: dict[type, str] | None = None,
                   ) -> tuple[set[type[BaseModel]], list[str]]:
    """(the config classes, what is wrong): a config is a model defined in a `config` module, or one
    a config's field holds; any other forbid-extra model must live in a records module. `where`:
    the module of a class, when not its own (the check's own test)."""
    def module(c: type) -> str:
        return (where or {}).get(c, c.__module__)

    configs = {c for c in models if module(c).rsplit(".", 1)[-1] == "config"}
    todo = list(configs)
    while todo:
        for field in todo.pop().model_fields.values():
            for sub in _nested_models(field.annotation):
                if sub not in configs:
                    configs.add(sub)
                    todo.append(sub)
    wrong = [f"{module(c)}.{c.__name__}: a forbid-extra model outside the configs and the records modules"
             for c in models if c not in configs and c.model_config.get("extra") == "forbid"
             and module(c).rsplit(".", 1)[-1] not in _RECORD_MODULES and ".importers." not in module(c)]
    wrong += [f"{module(c)}.{c.__name__}: a config without extra='forbid'" for c in configs
              if c.model_config.get("extra") != "forbid"]
    return configs, wrong


def test_every_field_of_every_config_class_says_what_it_changes():
    configs, wrong = config_classes(_all_models())
    # discovery finds every kind of config (so the check below is not vacuous)
    names = {c.__name__ for c in configs}
    assert {"RunConfig", "JudgeConfig", "AgentConfig", "ToolsConfig", "PythonToolConfig", "BatchConfig", "WebConfig",
            "FetchLimits", "SearchConfig", "ReportEvalConfig", "CurateConfig", "StageTokens", "HFConfig", "VLLMConfig",
            "OpenAIConfig", "RayConfig"} <= names, names
    assert not wrong, wrong
    missing = {f"{c.__module__}.{c.__name__}.{f}" for c in configs for f in unclassified(c)}
    assert not missing, f"fields without Result[...] / Execution[...] (serving/affects.py): {sorted(missing)}"


def test_the_coverage_check_catches_an_unmarked_field_and_a_config_outside_config_modules():
    class Loose(BaseModel):
        model_config = ConfigDict(extra="forbid")
        marked: Result[int] = 0
        bare: int = 0

    class Holder(BaseModel):
        model_config = ConfigDict(extra="forbid")
        inner: Result[Loose] = Loose()

    where = {Holder: "lifesearch_local.fake.config", Loose: "lifesearch_local.fake.options"}
    configs, wrong = config_classes([Holder, Loose], where)
    assert configs == {Holder, Loose} and not wrong  # held by a config: a config, wherever it lives
    assert unclassified(Loose) == ["bare"] and unclassified(Holder) == []
    _, wrong = config_classes([Loose], where)  # a forbid model neither config nor record is named
    assert wrong == ["lifesearch_local.fake.options.Loose: a forbid-extra model outside the configs and the records modules"]


# -- the resume guard of a stage ---------------------------------------------------------------------------------

# Another valid value for every setting of a judge and its hf model block.
JUDGE_ALT = {"model": "tiny-qwen2", "mode": "generate", "runs": 2, "threshold": 0.6, "max_tokens": 64,
             "temperature": 0.5, "retries": 0, "groups_per_call": 1}
HF_ALT = {"backend": "vllm", "model": "tiny-qwen2", "seed": 1, "chat_template_kwargs": {"enable_thinking": False},
          "max_model_len": 4096, "revision": "abc", "dtype": "float32", "trust_remote_code": True, "device": "cpu",
          "kernel": "shared", "token_budget": 512, "generate_form": "padded"}


def _inputs() -> tuple[list[Task], list[Report]]:
    tasks = [Task.model_validate(task(f"t{i}", [rubric(f"R{k}", 0.5) for k in range(2)])) for i in range(2)]
    return tasks, [Report(task_id=t.id, agent="a", text=f"Report on {t.id}.") for t in tasks]


def _variant(where: str, name: str) -> JudgeConfig:
    if where == "model":
        return JudgeConfig(id="j", model=model_config(**{"model": "tiny-llama", name: HF_ALT[name]}))
    fields = {"model": model_config(model="tiny-llama"), name: JUDGE_ALT[name]}
    if name == "model":
        fields["model"] = model_config(model=JUDGE_ALT["model"])
    return JudgeConfig(id="j", **fields)


def _mark(where: str, name: str) -> Affects:
    mark = affects(HFConfig if where == "model" else JudgeConfig, name)
    assert mark is not None
    return mark


CASES = [("judge", n) for n in JUDGE_ALT] + [("model", n) for n in HF_ALT]


def test_the_cases_cover_every_setting_of_a_judge():
    assert set(JUDGE_ALT) == set(JudgeConfig.model_fields) - {"id"}  # a new id is a new judge
    assert set(HF_ALT) == set(HFConfig.model_fields)


@pytest.mark.parametrize(("where", "name"), CASES, ids=[f"{w}.{n}" for w, n in CASES])
def test_a_judge_resumes_across_execution_settings_and_refuses_result_settings(tmp_path, where, name):
    rd, (tasks, reports) = RunDir(tmp_path), _inputs()
    judge_stage(rd, tasks, reports, JudgeConfig(id="j", model=HFConfig(model="tiny-llama")), ScriptedBackend(), show=False)
    before = rd.file("judgments.jsonl").read_bytes()
    changed = _variant(where, name)
    if _mark(where, name).what == "execution":
        stats = judge_stage(rd, tasks, reports, changed, ScriptedBackend(), show=False)
        assert stats["decisions"] == (4 if name == "runs" else 0)  # runs=2 adds the second repetition
        assert rd.file("judgments.jsonl").read_bytes().startswith(before)
    else:
        with pytest.raises(ConfigChanged, match="judge/j has records made with another config"):
            judge_stage(rd, tasks, reports, changed, ScriptedBackend(), show=False)
        assert rd.file("judgments.jsonl").read_bytes() == before


# -- the derived judge id -----------------------------------------------------------------------------------------

def _execution_variants() -> list[dict]:
    """One model block per execution-only setting of each backend, changed from its default."""
    values = {"device": "cpu", "kernel": "shared", "token_budget": 512, "generate_form": "padded", "tensor_parallel_size": 2,
              "gpu_memory_utilization": 0.5, "kv_cache_gib": 4.0, "enable_prefix_caching": False, "enforce_eager": True,
              "cpu_cores": "0-1", "base_url": "http://127.0.0.1:8000/v1", "api_key_env": "KEY", "timeout_s": 5.0,
              "max_retries": 1, "max_concurrency": 2, "retry_base_delay_s": 0.1, "max_response_mib": 4}
    out = []
    for backend, cls in (("hf", HFConfig), ("vllm", VLLMConfig), ("openai", OpenAIConfig)):
        execution = [n for n in cls.model_fields if affects(cls, n).what == "execution"]
        assert set(execution) <= set(values), set(execution) - set(values)
        out += [{"backend": backend, n: values[n]} for n in execution]
    return out


@pytest.mark.parametrize("mode", ["choice", "generate"])
def test_the_derived_id_ignores_execution_settings_and_the_other_modes_settings(mode):
    for block in _execution_variants():
        base = JudgeConfig(mode=mode, model=model_config(backend=block["backend"], model="m"))
        assert JudgeConfig(mode=mode, model=model_config(model="m", **block), runs=3, groups_per_call=1).id == base.id
    other = {"choice": {"max_tokens": 64, "temperature": 0.5, "retries": 0}, "generate": {"threshold": 0.6}}[mode]
    assert JudgeConfig(mode=mode, **other).id == JudgeConfig(mode=mode).id
    mine = {"choice": {"threshold": 0.6}, "generate": {"temperature": 0.5}}[mode]
    assert JudgeConfig(mode=mode, **mine).id != JudgeConfig(mode=mode).id


def test_the_verdict_schema_joins_the_generate_mode_id_only(monkeypatch):
    import lifesearch_local.judge.verdict as verdict

    before = {mode: JudgeConfig(mode=mode).id for mode in ("choice", "generate")}
    schema = {**verdict.VERDICT_SCHEMA, "required": ["satisfied"]}
    monkeypatch.setattr(verdict, "VERDICT_SCHEMA", schema)
    assert JudgeConfig(mode="choice").id == before["choice"]
    assert JudgeConfig(mode="generate").id != before["generate"]
    assert JudgeConfig(mode="generate").id.startswith("tiny-llama/generate/")


# -- the run-config check of `lifesearch run` ---------------------------------------------------------------------

def _run(tmp_path, **judge_kw) -> RunConfig:
    model = judge_kw.pop("model", {"model": "tiny-llama"})
    return RunConfig(out=str(tmp_path / "run"), tasks=str(ROOT / "data/sample/tasks.jsonl"),
                     judge=JudgeConfig(id="j", model=model_config(**model), **judge_kw))


def test_a_run_directory_takes_execution_changes_and_refuses_result_changes(tmp_path):
    first = _run(tmp_path)
    prepare_run_dir(first)
    for same in (first.model_copy(update={"ray": RayConfig(replicas=2), "name": "other"}),
                 _run(tmp_path, model={"model": "tiny-llama", "device": "cpu", "kernel": "shared"}, groups_per_call=1)):
        prepare_run_dir(same)  # where and how fast: no refusal
    for other in (_run(tmp_path, threshold=0.6), _run(tmp_path, model={"model": "tiny-llama", "seed": 1}),
                  first.model_copy(update={"seed": 1})):
        with pytest.raises(LifesearchError, match="holds a run with a different config.yaml"):
            prepare_run_dir(other)


# -- all three read the one declaration ---------------------------------------------------------------------------

def test_remarking_one_field_changes_all_three_consumers(tmp_path, monkeypatch):
    def views(seed: int) -> tuple[str, dict]:
        cfg = JudgeConfig(model=HFConfig(model="tiny-llama", seed=seed))
        return cfg.id, resume_config(cfg)

    assert views(0)[0] != views(1)[0] and views(0)[1] != views(1)[1]
    prepare_run_dir(_run(tmp_path))
    with pytest.raises(LifesearchError, match="different config.yaml"):
        prepare_run_dir(_run(tmp_path, model={"model": "tiny-llama", "seed": 1}))

    # seed marked execution-only in the one place: the id, the resume settings and the run check follow
    monkeypatch.setattr(HFConfig.model_fields["seed"], "metadata", [Affects("execution")])
    assert views(0) == views(1)
    prepare_run_dir(_run(tmp_path, model={"model": "tiny-llama", "seed": 1}))


def test_execution_marked_fields_are_the_only_ones_left_out():
    cfg = JudgeConfig(model=HFConfig(model="tiny-llama"))
    kept = resume_config(cfg)
    assert set(kept) == {n for n in JudgeConfig.model_fields if affects(JudgeConfig, n).what == "result"}
    assert set(kept["model"]) == {n for n in HFConfig.model_fields if affects(HFConfig, n).what == "result"}


class _Probe(BaseModel):
    model_config = ConfigDict(extra="forbid")
    fast: Execution[int] = 0
    slow: Result[int] = 0


def test_an_execution_marked_nested_block_is_left_out_whole():
    from serving.affects import result_settings

    class Outer(BaseModel):
        model_config = ConfigDict(extra="forbid")
        kept: Result[list[_Probe]] = [_Probe()]
        dropped: Execution[_Probe] = _Probe()

    assert result_settings(Outer()) == {"kept": [{"slow": 0}]}
