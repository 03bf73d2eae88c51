"""vLLM's CPU engine against the hf backend on the real smollm2-135m: choice scores, generation, the Ray pool.

Tolerance. Both engines run fp32 here (vLLM's CPU build supports it), so they differ only in
summation order inside their kernels (vLLM's paged attention and linear layers vs torch's
matmul and SDPA), as the Ray actor (1 CPU) differs from the engine in this process (2 threads):
P_TOL and LOGP_TOL, whose reasons and measurements are in tests/helpers/tolerances.py. A real
mistake costs far more: reading the decision one token early moves p_true by more than
MIN_SHIFT_DP (asserted below, so the bound is known to catch it).
"""

from __future__ import annotations

import math

import pytest

from lifesearch_local.judge.rubric import CHOICES
from serving.chat import Item
from serving.protocol import ChatRequest
from tests.helpers.tolerances import LOGP_TOL, P_TOL
from tests.helpers.vllm_cpu import QUESTION, judge_groups, p_true, vllm_config

MIN_SHIFT_DP = 1e-2


def sigmoid(lp: list[float]) -> float:
    """p_true from the two candidates' log-probs."""
    return 1 / (1 + math.exp(lp[1] - lp[0]))


def test_choice_scores_match_hf_in_fp32_and_read_the_prefix_cache(engine, hf):
    groups = judge_groups()
    want = hf.score_choices(groups, CHOICES)
    before = engine.stats()
    got = engine.score_choices(groups, CHOICES)
    assert [len(g) for g in got] == [len(g.requests) for g in groups] == [3, 3]
    dp = max(abs(a - b) for a, b in zip(p_true(want), p_true(got)))
    dlogp = max(abs(x - y) for ga, gb in zip(want, got) for a, b in zip(ga, gb) for x, y in zip(a.logprobs, b.logprobs))
    assert dp <= P_TOL and dlogp <= LOGP_TOL, (dp, dlogp)
    assert all(abs(sum(r.probs) - 1) < 1e-6 and r.truncated_tokens == 0 for g in got for r in g)
    # Prefix caching did its job: after a report's first prompt, the others read the shared
    # prefix (the template head, question and report) from the cache, in whole blocks.
    from serving.chat import choice_group_items
    from serving.kernels.plan import common_prefix_len

    block = engine.llm.llm_engine.vllm_config.cache_config.block_size
    items = [choice_group_items(engine.tokenizer, g, CHOICES, engine.max_positions)[0] for g in groups]
    least = sum((len(its) - 1) * (common_prefix_len([it.ids for it in its]) // block * block) for its in items)
    cached = engine.stats()["choice_cached_tokens"] - before["choice_cached_tokens"]
    assert least > 0 and cached >= least, (cached, least)
    assert engine.stats()["choice_prompts"] - before["choice_prompts"] == 6


def test_the_bound_catches_a_decision_read_one_token_early(engine, hf):
    """Scoring each prompt without its last token (the position before the decision) must move
    p_true by far more than P_TOL: the agreement above is not a loose bound passing anything."""
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
    # another process at another thread count (1 CPU there, 2 here): fp32 sums in another order
    assert max(abs(a - b) for a, b in zip(p_true(want), p_true(got))) <= P_TOL
    assert "Paris" in g.text
    assert pool.stats()["choice_prompts"] == 6 and pool.stats()["choice_cached_tokens"] > 0, pool.stats()
