"""`lifesearch curate`: the paper's stages 1–3 with scripted answers, retries, failures, resume and drafts."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, rubric, task, write_jsonl
from doubles import ScriptedBackend

from lifesearch_local.cli import main
from lifesearch_local.curate.config import CurateConfig, load_curate_config
from lifesearch_local.curate.parse import parse_domain_answer, parse_filter, parse_rewrite, strip_fences
from lifesearch_local.curate.queries import detect_language, load_queries
from lifesearch_local.curate.records import CurationRecord, Query
from lifesearch_local.curate.stage import DRAFTS, RECORDS, curate_stage
from lifesearch_local.errors import InputError
from lifesearch_local.llm.prompts import load_template, render
from lifesearch_local.records import Domain
from lifesearch_local.rundir.directory import RunDir
from lifesearch_local.rundir.jsonl import read_records
from lifesearch_local.rundir.manifest import ConfigChanged
from lifesearch_local.tasks import DOMAIN_NAMES_ZH, load_tasks, parse_domain

# How each stage's prompt starts, and the header after which the query is rendered.
STAGE_OF_PROMPT = {
    "You are a search/research task reviewer.": ("filter", "[Task]\n"),
    "You are a labeling lead for a search benchmark.": ("domain", "# Current query\n"),
    "你是一个搜索评测集的标注负责人。": ("domain", "# 当前查询\n"),
    "You are a data-cleaning assistant.": ("rewrite", "[Original query]\n"),
}
OK = {"quality_level": "high", "quality_reason": "Clear.", "is_unrelated_to_search": False,
      "unrelated_reason": "ok", "is_time_dependent": False, "time_dependent_reason": "ok"}
EN_QUERY = "Compare the fees of two fictional credit unions for a 12-month certificate."
ZH_QUERY = "请整理青河县2021—2025年的常住人口数据，并说明统计口径。"


def filter_json(**kw) -> str:
    return json.dumps({**OK, **kw})


def domain_json(taxonomy: str = "Financial market analysis", reason: str = "fees of products") -> str:
    return json.dumps({"taxonomy": taxonomy, "reason": reason}, ensure_ascii=False)


class Script:
    """A ScriptedBackend answering by (stage, query): scripted answers in order, then a default
    (valid JSON; the rewrite echoes the query). `log` lists every (stage, query) asked."""

    def __init__(self, answers: dict[tuple[str, str], list[str]] | None = None, fail_after: int | None = None):
        self.answers = {k: list(v) for k, v in (answers or {}).items()}
        self.fail_after = fail_after
        self.log: list[tuple[str, str]] = []
        self.backend = ScriptedBackend(self.answer)

    def answer(self, req) -> str:
        if self.fail_after is not None and len(self.log) >= self.fail_after:
            raise RuntimeError("backend died")
        prompt = req.messages[0]["content"]
        stage, header = next(v for k, v in STAGE_OF_PROMPT.items() if prompt.startswith(k))
        query = prompt.rsplit(header, 1)[1].removesuffix("\n")
        self.log.append((stage, query))
        queue = self.answers.get((stage, query))
        if queue:
            return queue.pop(0)
        return {"filter": filter_json(), "domain": domain_json(), "rewrite": query}[stage]

    def asked(self, stage: str | None = None) -> list[str]:
        return [q for s, q in self.log if stage in (None, s)]


def run(tmp_path: Path, queries: list[Query], script: Script, **cfg) -> list[CurationRecord]:
    curate_stage(RunDir(tmp_path / "out"), queries, CurateConfig(**cfg), script.backend, show=False)
    return read_records(tmp_path / "out" / RECORDS, CurationRecord)


def q(text: str = EN_QUERY, qid: str = "q1", language: str = "en") -> Query:
    return Query(id=qid, text=text, language=language)


# -- prompts ---------------------------------------------------------------------------------

PAPER_PHRASES = {
    "curate_filter": [
        "You are a search/research task reviewer. Make the following three judgments about the task in a single "
        "response. Return strict JSON.",
        '- "low": Ambiguous, truncated, missing essential information, merely a follow-up fragment, full of '
        "disruptive spelling or grammatical errors, meaningless, incoherent after rewriting, clearly abandoned, "
        "or only a debugging query.",
        "- Pure translation without prior search.",
        "Key question: Does the task depend on a specific recent event that the user assumes but does not "
        "explicitly describe? If so, return true. For general time-sensitive searches, return false.",
        '{\n  "quality_level": "high",\n  "quality_reason": "One-sentence explanation.",',
        '"time_dependent_reason": "ok"\n}\n\n[Task]\n{query}\n',
    ],
    "curate_domain_en": [
        "You are a labeling lead for a search benchmark. Classify the given English user query into exactly ONE "
        "of the seven categories below. Output the category's English name.",
        "- Classify by the CORE PURPOSE, not the surface topic.",
        "7. Everyday facts: everyday factual information, general knowledge, single-point lookups, history, "
        "biographies, and sports records.",
        '{\n  "taxonomy": "<one of the seven English category names>",\n  "reason": "<short reason, at most 10 words>"\n}',
        "# Current query\n{query}\n",
    ],
    "curate_rewrite": [
        "You are a data-cleaning assistant. Transform an original user query into a version that contains only "
        "search/research tasks.",
        "2. Explicit skill/tool calls: using a named skill, update_memory, image_gen, deliver_attachments, "
        "preview_url, the open command, web_search, web_fetch, or other explicitly named built-in tools.",
        "8. Local-file dependencies: attached-file references such as @/Users/X/.../doc.pdf; requests to read "
        "local, state, template, or configuration files or historical logs; and any step that requires a local "
        "file as input.",
        "- If nothing remains because the entire query consists of engineering operations, return an empty string.",
        "- Keep the language of the original query (Chinese or English).",
        "[Original query]\n{user_query}\n",
    ],
    "curate_domain_zh": ["输出该类别的中文名称。", "# 当前查询\n{query}\n"],
}


@pytest.mark.parametrize("name", sorted(PAPER_PHRASES))
def test_prompt_files_hold_the_paper_text_and_render_cleanly(name):
    text, _ = load_template(name)
    for phrase in PAPER_PHRASES[name]:
        assert phrase in text
    # PDF page furniture must not have leaked into the prompts.
    assert "(continued)" not in text and "\n16\n" not in text and " 14 " not in text
    key = "user_query" if name == "curate_rewrite" else "query"
    assert set(re.findall(r"\{([a-z_][a-z0-9_]*)\}", text)) == {key}
    rendered, digest = render(name, **{key: "MY QUERY {x}"})
    assert rendered.endswith("MY QUERY {x}\n") and "{query}" not in rendered and "{user_query}" not in rendered
    assert digest == load_template(name)[1] and len(digest) == 16


@pytest.mark.parametrize("name", ["curate_domain_en", "curate_domain_zh"])
def test_classifier_categories_map_to_the_seven_domains_in_the_paper_order(name):
    text, _ = load_template(name)
    listed = [line.split(". ", 1)[1].split(":" if name.endswith("en") else "：", 1)[0]
              for line in text.splitlines() if line[:2] in {f"{i}." for i in range(1, 8)}]
    order = [Domain.financial, Domain.academic, Domain.company, Domain.industry, Domain.policy,
             Domain.technical, Domain.everyday]
    assert [parse_domain(n) for n in listed] == order
    if name.endswith("zh"):
        assert listed == [DOMAIN_NAMES_ZH[d] for d in order]


# -- parsers ---------------------------------------------------------------------------------

def test_filter_parser_takes_exactly_the_papers_fields_and_types():
    assert parse_filter(filter_json()).quality_level == "high"
    assert parse_filter("Sure:\n```json\n" + filter_json(quality_level=" Medium ") + "\n```").quality_level == "medium"
    assert parse_filter(filter_json(quality_level="excellent")) is None
    assert parse_filter(filter_json(is_time_dependent="false")) is None  # a string, not a JSON boolean
    assert parse_filter(filter_json(is_unrelated_to_search=0)) is None
    assert parse_filter(filter_json(quality_reason=None)) is None
    assert parse_filter(json.dumps({**OK, "extra": 1})) is None
    assert parse_filter(json.dumps({k: v for k, v in OK.items() if k != "unrelated_reason"})) is None
    assert parse_filter("no json here") is None and parse_filter('{"quality_level": "high",') is None


def test_domain_parser_maps_english_and_chinese_names():
    assert parse_domain_answer(domain_json("Policy, regulation and government data")).domain is Domain.policy
    assert parse_domain_answer(domain_json("政策法规与政府数据")).domain is Domain.policy
    assert parse_domain_answer(domain_json("行业新闻与趋势聚合")).domain is Domain.industry
    assert parse_domain_answer("```json\n" + domain_json("Everyday facts") + "\n```").domain is Domain.everyday
    assert parse_domain_answer(domain_json("<one of the seven English category names>")) is None
    assert parse_domain_answer(domain_json("Gardening")) is None
    assert parse_domain_answer(json.dumps({"taxonomy": "Everyday facts"})) is None
    assert parse_domain_answer(json.dumps({"taxonomy": "Everyday facts", "reason": "x", "confidence": 1})) is None


def test_rewrite_parser():
    en, zh = q(), q(ZH_QUERY, language="zh")
    assert parse_rewrite(f"```\n{EN_QUERY}\n```", en, 1.25) == EN_QUERY
    assert strip_fences("```markdown\nA\nB\n```") == "A\nB"
    # empty answers are asked again (a broken model answers nothing too); see the empty-rewrite tests
    assert parse_rewrite("  \n", en, 1.25) is None and parse_rewrite('""', en, 1.25) is None
    assert parse_rewrite(ZH_QUERY, en, 1.25) is None and parse_rewrite(EN_QUERY, zh, 1.25) is None
    # the language is the query text's, not its label: an English query labelled zh keeps English
    assert parse_rewrite(EN_QUERY, q(EN_QUERY, language="zh"), 1.25) == EN_QUERY
    assert parse_rewrite(EN_QUERY + " x" * 30, en, 1.25) is None  # 74 chars -> at most 112
    assert parse_rewrite(EN_QUERY + " x" * 10, en, 1.25) == EN_QUERY + " x" * 10


@pytest.mark.parametrize("text, lang", [
    ("Find the 2025 budget of a fictional town.", "en"),
    ("请比较 Workflow 和 Chatflow 的 start node 差异", "zh"),
    ("我们需要http://w.ks.gov.cn/上的统计公报数据", "zh"),
    ("Summarise the 2025 statistics bulletin of 青河县 for a report on population and housing demand.", "en"),
    ("12345", "en"),
])
def test_detect_language(text, lang):
    assert detect_language(text) == lang


# -- the stages ------------------------------------------------------------------------------

def test_valid_answers_first_time_keep_the_query(tmp_path):
    s = Script()
    (rec,) = run(tmp_path, [q()], s)
    assert (rec.status, rec.stage, rec.code, rec.reason) == ("kept", "rewrite", "kept", "kept")
    assert rec.filter.quality_level == "high" and rec.classification.domain is Domain.financial
    assert rec.rewritten == EN_QUERY and rec.raw == {"filter": [filter_json()], "domain": [domain_json()],
                                                     "rewrite": [EN_QUERY]}
    assert rec.prompts == {n: load_template(n)[1] for n in ("curate_filter", "curate_domain_en", "curate_rewrite")}
    assert s.log == [("filter", EN_QUERY), ("domain", EN_QUERY), ("rewrite", EN_QUERY)]
    assert all(r.temperature == 0.0 for call in s.backend.generate_calls for r in call)


def test_invalid_json_is_retried_with_a_new_seed_then_kept(tmp_path):
    s = Script({("filter", EN_QUERY): ["I think this is fine.", filter_json(quality_level="medium")]})
    (rec,) = run(tmp_path, [q()], s)
    assert rec.status == "kept" and rec.filter.quality_level == "medium"
    assert rec.raw["filter"] == ["I think this is fine.", filter_json(quality_level="medium")]
    first, retry = s.backend.generate_calls[0][0], s.backend.generate_calls[1][0]
    assert (first.temperature, first.seed) == (0.0, 0) and (retry.temperature, retry.seed) == (0.7, 1)


@pytest.mark.parametrize("stage", ["filter", "domain", "rewrite"])
def test_never_valid_is_recorded_as_failed_at_that_stage_and_the_run_goes_on(tmp_path, stage):
    bad = {"filter": "nope", "domain": domain_json("Gardening"), "rewrite": ZH_QUERY}[stage]
    s = Script({(stage, EN_QUERY): [bad, bad, bad]})
    other = "Find the opening hours of a fictional town library."
    recs = run(tmp_path, [q(), q(other, "q2")], s)
    assert [r.id for r in recs] == ["q1", "q2"]
    assert (recs[0].status, recs[0].stage, recs[0].code) == ("failed", stage, "no_valid_answer")
    assert recs[0].reason == f"no valid {stage} answer after 3 attempts" and recs[0].raw[stage] == [bad] * 3
    assert recs[1].status == "kept"
    assert s.asked(stage).count(EN_QUERY) == 3
    assert (json.loads((tmp_path / "out" / DRAFTS).read_text())["id"]) == "q2"


@pytest.mark.parametrize("answer, code, reason", [
    (filter_json(quality_level="low", quality_reason="A fragment."), "low_quality", "low quality: A fragment."),
    (filter_json(is_unrelated_to_search=True, unrelated_reason="Debugging."), "unrelated_to_search",
     "unrelated to search: Debugging."),
    (filter_json(is_time_dependent=True, time_dependent_reason="Presupposes a fall."), "time_dependent",
     "time-dependent: Presupposes a fall."),
    (filter_json(quality_level="low", quality_reason="Vague.", is_time_dependent=True, time_dependent_reason="Event."),
     "low_quality", "low quality: Vague.; time-dependent: Event."),
])
def test_stage_1_drop_reasons(tmp_path, answer, code, reason):
    s = Script({("filter", EN_QUERY): [answer]})
    (rec,) = run(tmp_path, [q()], s)
    assert (rec.status, rec.stage, rec.code, rec.reason) == ("dropped", "filter", code, reason)
    assert s.asked() == [EN_QUERY] and rec.classification is None and rec.rewritten is None


def test_min_quality(tmp_path):
    medium = {("filter", EN_QUERY): [filter_json(quality_level="medium", quality_reason="Minor gaps.")]}
    assert run(tmp_path / "a", [q()], Script(medium))[0].status == "kept"
    (rec,) = run(tmp_path / "b", [q()], Script(medium), min_quality="high")
    assert (rec.status, rec.code, rec.reason) == ("dropped", "low_quality", "medium quality: Minor gaps.")


def test_empty_rewrite_on_every_attempt_means_only_engineering_operations(tmp_path):
    s = Script({("rewrite", EN_QUERY): ["```\n\n```", '""', ""]})
    (rec,) = run(tmp_path, [q()], s)
    assert (rec.status, rec.stage, rec.code, rec.reason) == (
        "dropped", "rewrite", "only_engineering_operations", "only engineering operations (an empty rewrite on all 3 attempts)")
    assert rec.rewritten == "" and rec.classification.domain is Domain.financial
    assert s.asked("rewrite") == [EN_QUERY] * 3
    assert (tmp_path / "out" / DRAFTS).read_text() == ""


def test_one_empty_rewrite_is_asked_again(tmp_path):
    shorter = EN_QUERY.replace(" for a 12-month certificate", "")
    (rec,) = run(tmp_path, [q()], Script({("rewrite", EN_QUERY): ["", shorter]}))
    assert (rec.status, rec.rewritten, rec.raw["rewrite"]) == ("kept", shorter, ["", shorter])


def test_an_answer_cut_at_max_tokens_is_retried(tmp_path):
    """A rewrite that stopped at the token cap would pass for a shorter query: never accepted."""
    from serving.protocol import Generation

    shorter = EN_QUERY.replace(" for a 12-month certificate", "")
    cut = Generation(text=EN_QUERY[:30], finish_reason="length")
    (rec,) = run(tmp_path, [q()], Script({("rewrite", EN_QUERY): [cut, shorter]}))
    assert (rec.status, rec.rewritten, rec.raw["rewrite"]) == ("kept", shorter, [EN_QUERY[:30], shorter])
    (rec,) = run(tmp_path / "b", [q()], Script({("rewrite", EN_QUERY): [cut] * 3}))
    assert (rec.status, rec.stage, rec.code) == ("failed", "rewrite", "no_valid_answer")


def test_rewrite_in_the_other_language_or_too_long_is_retried(tmp_path):
    shorter = EN_QUERY.replace(" for a 12-month certificate", "")
    s = Script({("rewrite", EN_QUERY): [ZH_QUERY, EN_QUERY + " Also" * 40, shorter]})
    (rec,) = run(tmp_path, [q()], s)
    assert rec.status == "kept" and rec.rewritten == shorter and len(rec.raw["rewrite"]) == 3
    assert rec.reason == "kept: operations or file dependencies removed by the rewrite"
    (draft,) = load_tasks(tmp_path / "out" / DRAFTS, draft=True)
    assert draft.question == shorter


def test_chinese_query_uses_the_chinese_classifier_and_its_answer_is_mapped(tmp_path):
    s = Script({("domain", ZH_QUERY): [domain_json("政策法规与政府数据", "政府统计数据")]})
    (rec,) = run(tmp_path, [q(ZH_QUERY, language="zh")], s)
    assert rec.status == "kept" and rec.classification.domain is Domain.policy
    assert rec.classification.taxonomy == "政策法规与政府数据"
    assert "curate_domain_zh" in rec.prompts and "curate_domain_en" not in rec.prompts
    assert s.backend.generate_calls[1][0].messages[0]["content"].startswith("你是一个搜索评测集的标注负责人")


def test_resume_after_a_partial_run_asks_only_unfinished_queries(tmp_path):
    queries = [q(f"Find fact number {i} about a fictional town.", f"q{i}") for i in range(5)]
    crash = Script(fail_after=7)  # chunk 1 (q0, q1) takes 6 requests; chunk 2 dies mid-way
    with pytest.raises(RuntimeError, match="backend died"):
        run(tmp_path, queries, crash, batch_size=2)
    assert [r.id for r in read_records(tmp_path / "out" / RECORDS, CurationRecord)] == ["q0", "q1"]
    again = Script()
    recs = run(tmp_path, queries, again, batch_size=2)
    assert [r.id for r in recs] == ["q0", "q1", "q2", "q3", "q4"] and {r.status for r in recs} == {"kept"}
    assert set(again.asked()) == {x.text for x in queries[2:]}
    third = Script()
    stats = curate_stage(RunDir(tmp_path / "out"), queries, CurateConfig(batch_size=2), third.backend, show=False)
    assert third.log == [] and (stats["already_recorded"], stats["curated"], stats["records"]) == (5, 0, 5)
    assert [t.id for t in load_tasks(tmp_path / "out" / DRAFTS, draft=True)] == ["q0", "q1", "q2", "q3", "q4"]


def test_resuming_with_another_config_is_refused_unless_forced(tmp_path, capsys):
    queries = [q(f"Find fact number {i} about a fictional town.", f"q{i}") for i in range(3)]
    with pytest.raises(RuntimeError, match="backend died"):
        run(tmp_path, queries, Script(fail_after=3), batch_size=1)  # q0 recorded, then the backend dies
    run(tmp_path, queries, Script(), batch_size=2)  # the batch size does not change what is written
    assert "another config" not in capsys.readouterr().err
    with pytest.raises(RuntimeError, match="backend died"):
        run(tmp_path / "b", queries, Script(fail_after=3), batch_size=1)
    with pytest.raises(ConfigChanged, match=r"curate has records made with another config \(hash \w+, now \w+: "
                       r"retries 2 -> 0\)"):
        run(tmp_path / "b", queries, Script(), batch_size=1, retries=0)
    assert len(read_records(tmp_path / "b" / "out" / RECORDS, CurationRecord)) == 1  # nothing added
    curate_stage(RunDir(tmp_path / "b" / "out"), queries, CurateConfig(batch_size=1, retries=0), Script().backend,
                 show=False, force_config=True)
    assert "--force-config: curate" in capsys.readouterr().err
    assert len(read_records(tmp_path / "b" / "out" / RECORDS, CurationRecord)) == 3


def test_manifest_records_prompt_hashes_config_and_counts(tmp_path):
    s = Script({("filter", "Q two"): [filter_json(quality_level="low")]})
    run(tmp_path, [q(), q("Q two", "q2")], s, retries=1)
    m = json.loads((tmp_path / "out" / "manifest.json").read_text())
    for name in ("curate_filter", "curate_domain_en", "curate_domain_zh", "curate_rewrite"):
        assert m["hashes"][f"prompts/{name}"] == load_template(name)[1]
    assert m["curate_config"]["retries"] == 1 and m["curate_config"]["min_quality"] == "medium"
    st = m["stages"]["curate"]
    assert (st["kept"], st["dropped"], st["failed"]) == (1, 1, 0)
    assert st["dropped_by_reason"] == {"low_quality": 1} and st["kept_by_domain"] == {"financial": 1}


# -- inputs, config, CLI ---------------------------------------------------------------------

def test_load_queries_aliases_and_language_detection(tmp_path):
    rows = [{"id": "a", "query": "Find X."}, {"qid": 7, "prompt": "查找X的资料。"},
            {"id": "c", "question": "Q?", "language": "Chinese"}, {"id": "d", "text": "T.", "lang": "en"}]
    got = load_queries(write_jsonl(tmp_path / "q.jsonl", rows))
    assert [(x.id, x.text, x.language) for x in got] == [("a", "Find X.", "en"), ("7", "查找X的资料。", "zh"),
                                                         ("c", "Q?", "zh"), ("d", "T.", "en")]


@pytest.mark.parametrize("row, field, message", [
    ({"query": "x"}, "id", "missing (expected one of: id, qid)"),
    ({"id": "b"}, "query", "missing (expected one of: query, prompt, question, text)"),
    ({"id": "b", "prompt": "  "}, "prompt", "expected a non-empty string"),
    ({"id": "b", "query": "x", "language": "fr"}, "language", "unknown language 'fr'"),
    ({"id": "a", "query": "y"}, "id", "duplicate query id 'a' (first on line 1)"),
])
def test_bad_queries_are_named_by_file_line_field(tmp_path, row, field, message):
    path = write_jsonl(tmp_path / "q.jsonl", [{"id": "a", "query": "x"}, row])
    with pytest.raises(InputError) as e:
        load_queries(path)
    assert (e.value.line, e.value.field) == (2, field) and message in e.value.message
    assert str(e.value).startswith(f"{path}:2: {field}: ")


def test_shipped_config_and_unknown_keys(tmp_path):
    cfg = load_curate_config(ROOT / "configs" / "curate_tiny.yaml")
    assert cfg.model.model == "tiny-llama" and cfg.model.device == "cpu" and cfg.retries <= 1
    bad = tmp_path / "c.yaml"
    bad.write_text("curate:\n  retries: 1\n  max_tokens: {filter: 64, rewirte: 8}\n")
    with pytest.raises(InputError, match=r"max_tokens\.rewirte: Extra inputs are not permitted"):
        load_curate_config(bad)


def test_draft_validates_only_with_draft(tmp_path, capsys):
    run(tmp_path, [q(), q(ZH_QUERY, "q2", "zh")], Script())
    drafts = tmp_path / "out" / DRAFTS
    assert [json.loads(x) for x in drafts.read_text().splitlines()][0] == {
        "id": "q1", "language": "en", "domain": "financial", "question": EN_QUERY, "rubrics": []}
    assert main(["validate", "--draft", str(drafts)]) == 0
    assert "ok (draft): 2 tasks, 0 rubrics" in capsys.readouterr().out
    assert main(["validate", str(drafts)]) == 2
    assert f"{drafts}:1: rubrics: a non-empty list of rubrics is required" in capsys.readouterr().err
    # Draft mode still checks the rubrics that are there.
    bad = write_jsonl(tmp_path / "t.jsonl", [task("a", [rubric("R1", 0.0)])])
    assert main(["validate", "--draft", str(bad)]) == 2


def test_cli_prints_the_summary(tmp_path, monkeypatch, capsys):
    import contextlib

    import serving.hosting

    s = Script({("filter", "and the other one too, cheaper??"): [filter_json(quality_level="low")]})
    monkeypatch.setattr(serving.hosting, "host_engine", lambda cfg, ray=None, phase="": contextlib.nullcontext(s.backend))
    monkeypatch.setattr("lifesearch_local.run.preflight.weights_problem", lambda name, revision=None: None)  # no hub here
    qs = write_jsonl(tmp_path / "q.jsonl", [{"id": "a", "query": EN_QUERY}, {"id": "b", "query": "and the other one too, cheaper??"}])
    assert main(["curate", "--queries", str(qs), "--model", "some/model", "--out", str(tmp_path / "o"), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "curate some/model: 2 queries, 0 already recorded, 2 processed now in" in out
    assert "every query failed" not in out
    assert "  kept 1, dropped 1, failed 0 (of 2 records)\n  dropped by reason: low_quality 1\n" in out
    assert "  kept by domain:    financial 1\n" in out


def test_cli_summary_when_every_query_failed_says_so(tmp_path, monkeypatch, capsys):
    import contextlib

    import serving.hosting

    other = "and the other one too, cheaper??"
    s = Script({("filter", EN_QUERY): ["nope"] * 3, ("filter", other): ["nope"] * 3})
    monkeypatch.setattr(serving.hosting, "host_engine", lambda cfg, ray=None, phase="": contextlib.nullcontext(s.backend))
    monkeypatch.setattr("lifesearch_local.run.preflight.weights_problem", lambda name, revision=None: None)  # no hub here
    qs = write_jsonl(tmp_path / "q.jsonl", [{"id": "a", "query": EN_QUERY}, {"id": "b", "query": other}])
    assert main(["curate", "--queries", str(qs), "--model", "some/model", "--out", str(tmp_path / "o"), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert " curated" not in out  # the old summary said "2 curated" for two failures
    assert "2 processed now in" in out and "  kept 0, dropped 0, failed 2 (of 2 records)" in out
    assert "every query failed" in out and "no query kept, the file is empty" in out


@pytest.mark.slow
def test_tiny_model_end_to_end(tmp_path):
    out = tmp_path / "out"
    queries = ROOT / "data" / "sample" / "queries.jsonl"
    cmd = [sys.executable, "-m", "lifesearch_local", "curate", "--queries", str(queries), "--model", "tiny-llama",
           "--out", str(out), "--retries", "1", "--max-tokens", "24", "--device", "cpu", "--quiet"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert "curate tiny-llama: 10 queries, 0 already recorded, 10 processed now" in proc.stdout
    recs = read_records(out / RECORDS, CurationRecord)
    assert sorted(r.id for r in recs) == sorted(x.id for x in load_queries(queries))
    for r in recs:
        assert r.status in ("kept", "dropped", "failed")
        if r.status == "failed":
            assert len(r.raw[r.stage]) == 2  # --retries 1: both attempts used and kept
    kept = sum(r.status == "kept" for r in recs)
    assert (len(load_tasks(out / DRAFTS, draft=True)) if kept else len((out / DRAFTS).read_text())) == kept
    assert json.loads((out / "manifest.json").read_text())["stages"]["curate"]["records"] == 10


SEED = ROOT.parent / "shared" / "seeds" / "000_8d5b0527452fbe0e.txt"


@pytest.mark.parametrize(("name", "start", "end", "placeholder"), [
    ("curate_filter", "You are a search/research task reviewer.", "[Task] query", "query"),
    ("curate_domain_en", "You are a labeling lead for a search benchmark.", "# Current query query", "query"),
    ("curate_rewrite", "You are a data-cleaning assistant.", "[Original query] user_query", "user_query"),
])
def test_prompt_files_equal_the_papers_text_word_for_word(name, start, end, placeholder):
    """Against the paper's own text (its PDF extraction lost braces and line breaks and interleaved
    page numbers and "(continued)" headers): once those are undone, not one character differs."""
    if not SEED.is_file():
        pytest.skip(f"the paper's text is not at {SEED}")
    paper = SEED.read_text(encoding="utf-8")
    i = paper.index(start)
    section = paper[i: paper.index(end, i) + len(end)]
    section = re.sub(r" \d{2} (Intent and Quality Filtering|Domain Classification|Task Rewriting) \(continued\)", "",
                     section)
    ours = (ROOT / "prompts" / f"{name}.txt").read_text(encoding="utf-8").replace("{" + placeholder + "}", placeholder)

    def norm(text: str) -> str:
        return " ".join(text.replace("{", " ").replace("}", " ").split())

    assert norm(ours) == norm(section)
