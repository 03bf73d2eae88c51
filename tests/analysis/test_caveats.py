"""The caveats themselves: random weights from configs, manifests and derived ids; a near-constant judge."""

from __future__ import annotations

from lifesearch_local.analysis.caveats import (
    MIN_DECISIONS,
    NEAR_CONSTANT_SHARE,
    NEAR_CONSTANT_SPREAD,
    caveats,
    caveats_html,
)
from lifesearch_local.judge.config import JudgeConfig
from lifesearch_local.records import Judgment
from serving.config import model_config

RANDOM, CONSTANT = "WARNING: random weights", "WARNING: near-constant judge"


def verdicts(judge: str, satisfied: list[bool | None], p_true: list[float] | None = None) -> list[Judgment]:
    p_true = p_true or [None] * len(satisfied)
    return [Judgment(task_id="t", agent="a", rubric_id=f"r{i}", judge=judge, satisfied=s, p_true=p)
            for i, (s, p) in enumerate(zip(satisfied, p_true))]


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


def test_an_agent_whose_reports_made_no_tool_call_did_no_research():
    """Found in use: the demo's tiny agents answered at iteration 1 with 0 tool calls and one ranked first."""
    from lifesearch_local.records import Report

    def reports(agent, calls):
        return [Report(task_id=f"t{i}", agent=agent, text="x", tool_calls=c) for i, c in enumerate(calls)]

    [line] = caveats(reports=reports("lazy", [0, 0]) + reports("busy", [0, 3]) + reports("imported", [None, None]))
    assert line.startswith("WARNING: no research: agent lazy made no tool call in any of its 2 report(s)")
    assert "its report is not research" in line
    # only the agents behind the numbers shown
    shown = [j.model_copy(update={"agent": "busy"}) for j in verdicts("j", [True, False])]
    assert caveats(judgments=shown, reports=reports("lazy", [0])) == []
    html = caveats_html([line])
    assert '<p class="warn caveat no-research">No research: agent lazy' in html
