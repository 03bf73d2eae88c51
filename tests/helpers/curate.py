"""A scripted curation model answering by stage and query, and the queries it is asked about."""

from __future__ import annotations

import json
from pathlib import Path

from lifesearch_local.curate.config import CurateConfig
from lifesearch_local.curate.records import CurationRecord, Query
from lifesearch_local.curate.stage import RECORDS, curate_stage
from lifesearch_local.rundir.directory import RunDir
from lifesearch_local.rundir.jsonl import read_records
from tests.helpers.doubles import ScriptedBackend

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


def run_curate(tmp_path: Path, queries: list[Query], script: Script, **cfg) -> list[CurationRecord]:
    curate_stage(RunDir(tmp_path / "out"), queries, CurateConfig(**cfg), script.backend, show=False)
    return read_records(tmp_path / "out" / RECORDS, CurationRecord)


def q(text: str = EN_QUERY, qid: str = "q1", language: str = "en") -> Query:
    return Query(id=qid, text=text, language=language)
