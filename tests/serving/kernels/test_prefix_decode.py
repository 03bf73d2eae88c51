"""Generate mode over a shared prefix: same text as decoding each request alone, memory within the budget, stops."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

from lifesearch_local.judge.rubric import judge_prompt  # noqa: E402
from lifesearch_local.llm.models import engine_config  # noqa: E402
from lifesearch_local.resources import resource_path  # noqa: E402
from lifesearch_local.tasks import load_tasks  # noqa: E402
from serving.config import model_config  # noqa: E402
from serving.decoding import JsonObjectEnd, json_object_end  # noqa: E402
from serving.engines.hf import HFEngine  # noqa: E402
from serving.kernels import prefix_decode  # noqa: E402
from serving.kernels.prefix_decode import Decoded, Row, plan_chunks, plan_groups  # noqa: E402
from serving.protocol import ChatRequest, Generation  # noqa: E402


def judge_requests(n_rubrics: int = 3, **kw) -> list[ChatRequest]:
    """Rubric prompts of two reports (of different lengths), interleaved as a caller may send them."""
    tasks = load_tasks(resource_path("data", "sample", "tasks.jsonl"))
    out = []
    for k in range(n_rubrics):
        for t, answer in ((tasks[0], "A short report. " * 30), (tasks[1], "Another, longer report text. " * 45)):
            text = judge_prompt(t, t.rubrics[k], answer)[0]
            out.append(ChatRequest(messages=[{"role": "user", "content": text}], **kw))
    return out


@pytest.fixture(scope="module", params=["tiny-qwen3", "tiny-llama"])
def backends(request):
    shared = HFEngine(engine_config(model_config(model=request.param, kernel="single")))
    padded = HFEngine(engine_config(model_config(model=request.param, kernel="single", generate_form="padded")))
    assert shared.decoder is not None and padded.decoder is None
    return shared, padded


def alone(backend: HFEngine, reqs: list[ChatRequest]) -> list[Generation]:
    return [backend.generate([r])[0] for r in reqs]


def test_greedy_batch_equals_each_request_decoded_alone(backends):
    shared, padded = backends
    reqs = judge_requests(max_tokens=20)
    before = dict(shared.decoder.stats)
    got = shared.generate(reqs)
    ref = alone(padded, reqs)  # the former path, one request at a time: no padding at all
    assert [g.text for g in got] == [g.text for g in ref]
    assert [(g.output_tokens, g.prompt_tokens, g.finish_reason) for g in got] == \
        [(g.output_tokens, g.prompt_tokens, g.finish_reason) for g in ref]
    # two reports: two prefixes, each prefilled once (not once per rubric)
    ids = [shared.tokenizer.apply_chat_template(r.messages, tokenize=False, add_generation_prompt=True) for r in reqs]
    assert len(ids) == 6 and shared.decoder.stats["batches"] - before["batches"] == 2
    assert shared.decoder.stats["prefix_tokens"] - before["prefix_tokens"] < sum(g.prompt_tokens for g in got) / 2


def test_a_small_token_budget_splits_rows_and_keeps_the_text(backends, monkeypatch):
    shared, _ = backends
    reqs = judge_requests(max_tokens=12)
    want = [g.text for g in shared.generate(reqs)]
    held = []
    real_init = prefix_decode.SharedPrefixKV.__init__

    def record(self, prefix, rows, length, budget):
        held.append((rows, prefix[0][0].shape[1] + rows * length))
        real_init(self, prefix, rows, length, budget)

    monkeypatch.setattr(prefix_decode.SharedPrefixKV, "__init__", record)
    budget = min(g.prompt_tokens for g in shared.generate(reqs[:2])) + 60
    held.clear()
    monkeypatch.setattr(shared.decoder, "budget", budget)
    assert [g.text for g in shared.generate(reqs)] == want
    assert len(held) > 2 and sum(r for r, _ in held) == 6  # more batches than prefixes, every row once
    assert all(tokens <= budget for rows, tokens in held if rows > 1)  # only a lone row may exceed it


def test_sampling_is_seeded(backends):
    shared, _ = backends
    reqs = judge_requests(1, max_tokens=16, temperature=0.9, top_p=0.9, seed=7)
    a, b = shared.generate(reqs), shared.generate(reqs)
    c = shared.generate([r.model_copy(update={"seed": 8}) for r in reqs])
    assert [g.text for g in a] == [g.text for g in b]
    assert [g.text for g in a] != [g.text for g in c]
    greedy = shared.generate([r.model_copy(update={"temperature": 0.0}) for r in reqs])
    assert [g.text for g in a] != [g.text for g in greedy]


def test_a_stop_string_ends_the_row_early(backends):
    shared, _ = backends
    req = judge_requests(1, max_tokens=24)[0]
    full = shared.generate([req])[0]
    cut = full.text[len(full.text) // 3 :][:3]
    got = shared.generate([req.model_copy(update={"stop": [cut]})])[0]
    assert got.text == full.text[: full.text.index(cut)] and got.finish_reason == "stop"
    assert got.output_tokens < full.output_tokens


def test_json_stop_in_the_decoder(backends):
    shared, _ = backends
    tok = shared.tokenizer
    answer = '{"satisfied": true, "reason": "a } and \\" {"} and then more text'
    ids = tok(answer, add_special_tokens=False)["input_ids"]
    row, res, tracker = Row(ids=[1], max_new=100, json_stop=True), Decoded(), JsonObjectEnd()
    n = next(k for k, t in enumerate(ids, 1) if shared.decoder._advance(row, res, tracker, t))
    assert res.finish == "stop" and tok.decode(ids[:n]).startswith(answer[: answer.index(" and then")])
    assert json_object_end(tok.decode(ids[: n - 1])) is None  # not one token earlier


def test_plan_groups_follows_shared_prefixes():
    a, b = list(range(100, 160)), list(range(200, 260))
    prompts = [a + [1, 2], b + [3], a + [4], b + [5, 6], [7]]
    assert plan_groups(prompts) == [[4], [0, 2], [1, 3]]
    assert plan_groups([[1, 2, 3]]) == [[0]]


def test_plan_chunks_keeps_each_batch_within_the_budget():
    rows = [Row(ids=list(range(10 + k)), max_new=5) for k in range(4)]  # suffixes 2..5 after a prefix of 8
    assert plan_chunks(rows, 8, 8 + 2 * (4 + 5)) == [[0, 1], [2], [3]]
    assert plan_chunks(rows, 8, 10) == [[0], [1], [2], [3]]  # a row over the budget runs alone
    assert plan_chunks(rows, 8, 1000) == [[0, 1, 2, 3]]


def test_models_without_plain_attention_take_the_padded_path():
    from types import SimpleNamespace

    windowed = SimpleNamespace(config=SimpleNamespace(model_type="mistral", sliding_window=4096, layer_types=None))
    hybrid = SimpleNamespace(config=SimpleNamespace(model_type="jamba", sliding_window=None, layer_types=None))
    plain = SimpleNamespace(config=SimpleNamespace(model_type="llama", sliding_window=None, layer_types=None))
    assert [prefix_decode.supported(m) for m in (windowed, hybrid, plain)] == [False, False, True]
