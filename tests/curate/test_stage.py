"""`lifesearch curate`'s stages 1-3 with scripted answers: the paper's prompts, retries, failures, resume, drafts."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from lifesearch_local.curate.config import CurateConfig
from lifesearch_local.curate.queries import load_queries
from lifesearch_local.curate.records import CurationRecord
from lifesearch_local.curate.stage import DRAFTS, RECORDS, curate_stage
from lifesearch_local.llm.prompts import load_template, render
from lifesearch_local.records import Domain
from lifesearch_local.rundir.directory import RunDir
from lifesearch_local.rundir.jsonl import read_records
from lifesearch_local.rundir.manifest import ConfigChanged
from lifesearch_local.tasks import DOMAIN_NAMES_ZH, load_tasks, parse_domain
from tests.helpers.curate import EN_QUERY, ZH_QUERY, Script, domain_json, filter_json, q, run_curate
from tests.helpers.inputs import ROOT

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


# -- the stages ------------------------------------------------------------------------------

def test_valid_answers_first_time_keep_the_query(tmp_path):
    s = Script()
    (rec,) = run_curate(tmp_path, [q()], s)
    assert (rec.status, rec.stage, rec.code, rec.reason) == ("kept", "rewrite", "kept", "kept")
    assert rec.filter.quality_level == "high" and rec.classification.domain is Domain.financial
    assert rec.rewritten == EN_QUERY and rec.raw == {"filter": [filter_json()], "domain": [domain_json()],
                                                     "rewrite": [EN_QUERY]}
    assert rec.prompts == {n: load_template(n)[1] for n in ("curate_filter", "curate_domain_en", "curate_rewrite")}
    assert s.log == [("filter", EN_QUERY), ("domain", EN_QUERY), ("rewrite", EN_QUERY)]
    assert all(r.temperature == 0.0 for call in s.backend.generate_calls for r in call)


def test_invalid_json_is_retried_with_a_new_seed_then_kept(tmp_path):
    s = Script({("filter", EN_QUERY): ["I think this is fine.", filter_json(quality_level="medium")]})
    (rec,) = run_curate(tmp_path, [q()], s)
    assert rec.status == "kept" and rec.filter.quality_level == "medium"
    assert rec.raw["filter"] == ["I think this is fine.", filter_json(quality_level="medium")]
    first, retry = s.backend.generate_calls[0][0], s.backend.generate_calls[1][0]
    assert (first.temperature, first.seed) == (0.0, 0) and (retry.temperature, retry.seed) == (0.7, 1)


@pytest.mark.parametrize("stage", ["filter", "domain", "rewrite"])
def test_never_valid_is_recorded_as_failed_at_that_stage_and_the_run_goes_on(tmp_path, stage):
    bad = {"filter": "nope", "domain": domain_json("Gardening"), "rewrite": ZH_QUERY}[stage]
    s = Script({(stage, EN_QUERY): [bad, bad, bad]})
    other = "Find the opening hours of a fictional town library."
    recs = run_curate(tmp_path, [q(), q(other, "q2")], s)
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
    (rec,) = run_curate(tmp_path, [q()], s)
    assert (rec.status, rec.stage, rec.code, rec.reason) == ("dropped", "filter", code, reason)
    assert s.asked() == [EN_QUERY] and rec.classification is None and rec.rewritten is None


def test_min_quality(tmp_path):
    medium = {("filter", EN_QUERY): [filter_json(quality_level="medium", quality_reason="Minor gaps.")]}
    assert run_curate(tmp_path / "a", [q()], Script(medium))[0].status == "kept"
    (rec,) = run_curate(tmp_path / "b", [q()], Script(medium), min_quality="high")
    assert (rec.status, rec.code, rec.reason) == ("dropped", "low_quality", "medium quality: Minor gaps.")


def test_empty_rewrite_on_every_attempt_means_only_engineering_operations(tmp_path):
    s = Script({("rewrite", EN_QUERY): ["```\n\n```", '""', ""]})
    (rec,) = run_curate(tmp_path, [q()], s)
    assert (rec.status, rec.stage, rec.code, rec.reason) == (
        "dropped", "rewrite", "only_engineering_operations", "only engineering operations (an empty rewrite on all 3 attempts)")
    assert rec.rewritten == "" and rec.classification.domain is Domain.financial
    assert s.asked("rewrite") == [EN_QUERY] * 3
    assert (tmp_path / "out" / DRAFTS).read_text() == ""


def test_one_empty_rewrite_is_asked_again(tmp_path):
    shorter = EN_QUERY.replace(" for a 12-month certificate", "")
    (rec,) = run_curate(tmp_path, [q()], Script({("rewrite", EN_QUERY): ["", shorter]}))
    assert (rec.status, rec.rewritten, rec.raw["rewrite"]) == ("kept", shorter, ["", shorter])


def test_an_answer_cut_at_max_tokens_is_retried(tmp_path):
    """A rewrite that stopped at the token cap would pass for a shorter query: never accepted."""
    from serving.protocol import Generation

    shorter = EN_QUERY.replace(" for a 12-month certificate", "")
    cut = Generation(text=EN_QUERY[:30], finish_reason="length")
    (rec,) = run_curate(tmp_path, [q()], Script({("rewrite", EN_QUERY): [cut, shorter]}))
    assert (rec.status, rec.rewritten, rec.raw["rewrite"]) == ("kept", shorter, [EN_QUERY[:30], shorter])
    (rec,) = run_curate(tmp_path / "b", [q()], Script({("rewrite", EN_QUERY): [cut] * 3}))
    assert (rec.status, rec.stage, rec.code) == ("failed", "rewrite", "no_valid_answer")


def test_rewrite_in_the_other_language_or_too_long_is_retried(tmp_path):
    shorter = EN_QUERY.replace(" for a 12-month certificate", "")
    s = Script({("rewrite", EN_QUERY): [ZH_QUERY, EN_QUERY + " Also" * 40, shorter]})
    (rec,) = run_curate(tmp_path, [q()], s)
    assert rec.status == "kept" and rec.rewritten == shorter and len(rec.raw["rewrite"]) == 3
    assert rec.reason == "kept: operations or file dependencies removed by the rewrite"
    (draft,) = load_tasks(tmp_path / "out" / DRAFTS, draft=True)
    assert draft.question == shorter


def test_chinese_query_uses_the_chinese_classifier_and_its_answer_is_mapped(tmp_path):
    s = Script({("domain", ZH_QUERY): [domain_json("政策法规与政府数据", "政府统计数据")]})
    (rec,) = run_curate(tmp_path, [q(ZH_QUERY, language="zh")], s)
    assert rec.status == "kept" and rec.classification.domain is Domain.policy
    assert rec.classification.taxonomy == "政策法规与政府数据"
    assert "curate_domain_zh" in rec.prompts and "curate_domain_en" not in rec.prompts
    assert s.backend.generate_calls[1][0].messages[0]["content"].startswith("你是一个搜索评测集的标注负责人")


def test_resume_after_a_partial_run_asks_only_unfinished_queries(tmp_path):
    queries = [q(f"Find fact number {i} about a fictional town.", f"q{i}") for i in range(5)]
    crash = Script(fail_after=7)  # chunk 1 (q0, q1) takes 6 requests; chunk 2 dies mid-way
    with pytest.raises(RuntimeError, match="backend died"):
        run_curate(tmp_path, queries, crash, batch_size=2)
    assert [r.id for r in read_records(tmp_path / "out" / RECORDS, CurationRecord)] == ["q0", "q1"]
    again = Script()
    recs = run_curate(tmp_path, queries, again, batch_size=2)
    assert [r.id for r in recs] == ["q0", "q1", "q2", "q3", "q4"] and {r.status for r in recs} == {"kept"}
    assert set(again.asked()) == {x.text for x in queries[2:]}
    third = Script()
    stats = curate_stage(RunDir(tmp_path / "out"), queries, CurateConfig(batch_size=2), third.backend, show=False)
    assert third.log == [] and (stats["already_recorded"], stats["curated"], stats["records"]) == (5, 0, 5)
    assert [t.id for t in load_tasks(tmp_path / "out" / DRAFTS, draft=True)] == ["q0", "q1", "q2", "q3", "q4"]


def test_resuming_with_another_config_is_refused_unless_forced(tmp_path, capsys):
    queries = [q(f"Find fact number {i} about a fictional town.", f"q{i}") for i in range(3)]
    with pytest.raises(RuntimeError, match="backend died"):
        run_curate(tmp_path, queries, Script(fail_after=3), batch_size=1)  # q0 recorded, then the backend dies
    run_curate(tmp_path, queries, Script(), batch_size=2)  # the batch size does not change what is written
    assert "another config" not in capsys.readouterr().err
    with pytest.raises(RuntimeError, match="backend died"):
        run_curate(tmp_path / "b", queries, Script(fail_after=3), batch_size=1)
    with pytest.raises(ConfigChanged, match=r"curate has records made with another config \(hash \w+, now \w+: "
                       r"retries 2 -> 0\)"):
        run_curate(tmp_path / "b", queries, Script(), batch_size=1, retries=0)
    assert len(read_records(tmp_path / "b" / "out" / RECORDS, CurationRecord)) == 1  # nothing added
    curate_stage(RunDir(tmp_path / "b" / "out"), queries, CurateConfig(batch_size=1, retries=0), Script().backend,
                 show=False, force_config=True)
    assert "--force-config: curate" in capsys.readouterr().err
    assert len(read_records(tmp_path / "b" / "out" / RECORDS, CurationRecord)) == 3


def test_manifest_records_prompt_hashes_config_and_counts(tmp_path):
    s = Script({("filter", "Q two"): [filter_json(quality_level="low")]})
    run_curate(tmp_path, [q(), q("Q two", "q2")], s, retries=1)
    m = json.loads((tmp_path / "out" / "manifest.json").read_text())
    for name in ("curate_filter", "curate_domain_en", "curate_domain_zh", "curate_rewrite"):
        assert m["hashes"][f"prompts/{name}"] == load_template(name)[1]
    assert m["curate_config"]["retries"] == 1 and m["curate_config"]["min_quality"] == "medium"
    st = m["stages"]["curate"]
    assert (st["kept"], st["dropped"], st["failed"]) == (1, 1, 0)
    assert st["dropped_by_reason"] == {"low_quality": 1} and st["kept_by_domain"] == {"financial": 1}


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
