"""vLLM's CPU engine against the hf backend on the real smollm2-135m: choice scores, generation, the Ray pool.

Tolerance. Both engines run fp32 here (vLLM's CPU build supports it), so they differ only in
summation order inside their kernels (vLLM's paged attention and linear layers vs torch's
matmul and SDPA): ~1e-7 relative per operation, grown through 30 layers. Measured on the
2-core CI machine over 18 sample judge prompts: max |Δ log p| 4.6e-5, max |Δ p_true| 2.9e-6.
The bounds below leave a 20-30× margin for other CPUs' instruction sets, and stay far below
what a real mistake costs: reading the decision one token early moves p_true by more than
1e-2 (asserted in the test, so the bound is known to catch it).
"""

from __future__ import annotations

import math

import pytest

from lifesearch_local.judge.rubric import CHOICES, Pending, choice_group, judged_rubrics
from lifesearch_local.records import Report
from lifesearch_local.resources import resource_path
from lifesearch_local.rundir.jsonl import read_records
from lifesearch_local.tasks import load_tasks
from serving.chat import Item
from serving.protocol import ChatRequest, ChoiceGroup

from .conftest import vllm_config

MAX_DP = 1e-4
MAX_DLOGP = 1e-3
MIN_SHIFT_DP = 1e-2
QUESTION = "What is the capital of France? Answer in one word."


def judge_groups(reports: int = 2, rubrics: int = 3, chars: int = 2500) -> list[ChoiceGroup]:
    """Real judge prompts for the first sample reports (cut to `chars` to keep CI short)."""
    tasks = {t.id: t for t in load_tasks(resource_path("data", "sample", "tasks.jsonl"))}
    out = []
    for rep in read_records(resource_path("data", "sample", "reports.jsonl"), Report)[:reports]:
        task = tasks[rep.task_id]
        short = rep.model_copy(update={"text": rep.text[:chars]})
        out.append(choice_group(Pending(task, short, judged_rubrics(task)[:rubrics]))[0])
    return out


def sigmoid(lp: list[float]) -> float:
    """p_true from the two candidates' log-probs."""
    return 1 / (1 + math.exp(lp[1] - lp[0]))


def p_true(groups) -> list[float]:
    return [r.probs[0] for g in groups for r in g]


def test_choice_scores_match_hf_in_fp32_and_read_the_prefix_cache(engine, hf):
    groups = judge_groups()
    want = hf.score_choices(groups, CHOICES)
    before = engine.stats()
    got = engine.score_choices(groups, CHOICES)
    assert [len(g) for g in got] == [len(g.requests) for g in groups] == [3, 3]
    dp = max(abs(a - b) for a, b in zip(p_true(want), p_true(got)))
    dlogp = max(abs(x - y) for ga, gb in zip(want, got) for a, b in zip(ga, gb) for x, y in zip(a.logprobs, b.logprobs))
    assert dp <= MAX_DP and dlogp <= MAX_DLOGP, (dp, dlogp)
    assert all(abs(sum(r.probs) - 1) < 1e-6 and r.truncated_tokens == 0 for g in got for r in g)
    # Prefix caching did its job: after a report's first prompt, the others read the shared
    # prefix (the template head, question and report) from the cache, in whole blocks.
    from serving.chat import choice_group_items
    from serving.engines.kernel import common_prefix_len

    block = engine.llm.llm_engine.vllm_config.cache_config.block_size
    items = [choice_group_items(engine.tokenizer, g, CHOICES, engine.max_positions)[0] for g in groups]
    least = sum((len(its) - 1) * (common_prefix_len([it.ids for it in its]) // block * block) for its in items)
    cached = engine.stats()["choice_cached_tokens"] - before["choice_cached_tokens"]
    assert least > 0 and cached >= least, (cached, least)
    assert engine.stats()["choice_prompts"] - before["choice_prompts"] == 6


def test_the_bound_catches_a_decision_read_one_token_early(engine, hf):
    """Scoring each prompt without its last token (the position before the decision) must move
    p_true by far more than MAX_DP: the agreement above is not a loose bound passing anything."""
    from serving.chat import choice_group_items

    (group,) = judge_groups(reports=1)
    items, _ = choice_group_items(engine.tokenizer, group, CHOICES, engine.max_positions)
    early = [[Item(ids=it.ids[:-1], candidates=it.candidates) for it in items]]
    right = [sigmoid(lp) for lp in hf.scorer.score([items])[0]]
    moved = [sigmoid(lp) for lp in engine.score_items(early)[0]]
    assert max(abs(a - b) for a, b in zip(right, moved)) >= MIN_SHIFT_DP


def test_generate_matches_hf_greedy_and_honours_stop_and_length(engine, hf):
    ask = ChatRequest(messages=[{"role": "user", "content": QUESTION}], max_tokens=20)
    (g,) = engine.generate([ask])
    (h,) = hf.generate([ask])
    assert "Paris" in g.text and g.finish_reason == "stop", g
    assert (g.text, g.prompt_tokens, g.output_tokens) == (h.text, h.prompt_tokens, h.output_tokens)
    stopped, short = engine.generate([ask.model_copy(update={"stop": ["Paris"]}), ask.model_copy(update={"max_tokens": 3})])
    assert stopped.finish_reason == "stop" and "Paris" not in stopped.text and g.text.startswith(stopped.text.rstrip())
    assert short.finish_reason == "length" and short.output_tokens == 3 and g.text.startswith(short.text)


def test_ray_pool_hosts_the_vllm_engine_on_cpu(engine):
    """One Ray actor hosting vLLM (no GPU reserved): same answers as the in-process engine."""
    pytest.importorskip("ray")
    from serving.config import RayConfig
    from serving.ray.pool import RayPool

    groups = judge_groups()
    want = engine.score_choices(groups, CHOICES)
    ray_cfg = RayConfig(replicas=1, num_cpus=2, num_cpus_per_replica=1, num_gpus_per_replica=0,
                        namespace="lifesearch-vllm-test", object_store_memory_mb=200, startup_timeout_s=600)
    with RayPool(vllm_config(), ray_cfg, phase="vllm-cpu") as pool:
        assert pool.replicas[0].info["model_hash"] == engine.model_hash()
        got = pool.score_choices(groups, CHOICES)
        (g,) = pool.generate([ChatRequest(messages=[{"role": "user", "content": QUESTION}], max_tokens=20)])
    assert max(abs(a - b) for a, b in zip(p_true(want), p_true(got))) <= 1e-6
    assert "Paris" in g.text
    assert pool.stats()["choice_prompts"] == 6 and pool.stats()["choice_cached_tokens"] > 0, pool.stats()
