"""The packed judge kernel equals scoring each prompt alone (within fp32's reordered sums), for every tiny architecture."""

from __future__ import annotations

import math
import random

import pytest

torch = pytest.importorskip("torch")

from serving.chat import Item  # noqa: E402
from serving.kernels import plan as K  # noqa: E402
from serving.kernels.kernel import PackedScorer  # noqa: E402
from serving.kernels.plan import common_prefix_len  # noqa: E402
from serving.protocol import UnsupportedModelError  # noqa: E402
from tests.helpers.tolerances import ACTIVATION_TOL, LOGP_TOL, P_TOL  # noqa: E402

ARCHS = ["tiny-llama", "tiny-qwen2", "tiny-qwen3", "tiny-mistral"]


def load(name: str, **overrides):
    from transformers import AutoModelForCausalLM

    from lifesearch_local.llm.models import tiny_model_dir
    from serving.engines.hf import attn_implementation

    path = tiny_model_dir(name)
    kw = {"attn_implementation": attn_implementation("cpu"), "dtype": torch.float32}
    if overrides:
        from transformers import AutoConfig

        kw["config"] = AutoConfig.from_pretrained(path, **overrides)
    return AutoModelForCausalLM.from_pretrained(path, **kw).eval()


@pytest.fixture(scope="module", params=ARCHS)
def model(request):
    return load(request.param)


def make_groups(seed: int, n_groups: int = 3, vocab: int = 600) -> list[list[Item]]:
    """Reports of different prefix lengths; rubric suffixes of different lengths; a group of one."""
    rng = random.Random(seed)
    groups = []
    for g in range(n_groups):
        prefix = [rng.randrange(20, vocab) for _ in range(rng.randrange(60, 220))]
        n = 1 if g == 0 else rng.randrange(2, 7)
        groups.append([
            Item(prefix + [rng.randrange(20, vocab) for _ in range(rng.randrange(1, 45))],
                 [rng.randrange(20, vocab), rng.randrange(20, vocab)])
            for _ in range(n)
        ])
    return groups


def p_true(lps):
    return [1 / (1 + math.exp(b - a)) for g in lps for a, b in g]


def max_diff(a, b):
    return max(abs(x - y) for x, y in zip(p_true(a), p_true(b)))


@pytest.mark.parametrize("form", ["two_stage", "shared", "shared-transformers"])
def test_packed_equals_each_prompt_alone(model, form):
    """`shared-transformers`: the shared form on the transformers forward, what models the packed-rows loop
    does not cover run (serving.kernels.packed_rows.supported)."""
    groups = make_groups(1)
    ref = PackedScorer(model, form="single").score(groups)
    scorer = PackedScorer(model, form=form.split("-")[0], token_budget=700)
    assert (scorer.rows is not None) == form.startswith("shared")  # every tiny architecture takes the loop
    if form == "shared-transformers":
        scorer.rows = None
    got = scorer.score(groups)
    assert [len(g) for g in got] == [len(g) for g in groups]
    assert max_diff(ref, got) <= P_TOL
    # raw log-probs too, not only the renormalised p_true
    assert max(abs(x - y) for ga, gb in zip(ref, got) for ia, ib in zip(ga, gb) for x, y in zip(ia, ib)) <= LOGP_TOL
    # the comparison is meaningful: the random model's p_true vary across prompts
    assert max(p_true(ref)) - min(p_true(ref)) > 0.2


def test_two_stage_batches_count_each_rows_copy_of_the_prefix_in_the_budget(monkeypatch):
    """Every row of a two_stage batch carries the prefix's KV: rows × (prefix + suffix width) stays
    within the token budget, and the split changes no result."""
    model = load("tiny-llama")
    groups = make_groups(3)
    seen = []
    batch = PackedScorer._batch

    def spy(self, rows, items, *, offset, cache):
        seen.append((len(rows), offset + max(len(r) for r in rows)))
        return batch(self, rows, items, offset=offset, cache=cache)

    ref = PackedScorer(model, form="two_stage", token_budget=100_000).score(groups)
    monkeypatch.setattr(PackedScorer, "_batch", spy)
    got = PackedScorer(model, form="two_stage", token_budget=500).score(groups)
    assert max_diff(ref, got) <= P_TOL  # other batch shapes: the same sums in another order
    assert all(rows * tokens <= 500 for rows, tokens in seen if rows > 1), seen
    assert len(seen) > len(groups) and max(rows for rows, _ in seen) > 1  # split, yet still batched


@pytest.mark.parametrize("form", ["two_stage", "shared"])
def test_a_prefix_one_token_too_long_is_detected(monkeypatch, form):
    """Negative control: were a rubric's first token taken into the shared prefix, the equivalence test would fail."""
    model = load("tiny-llama")
    groups = make_groups(3)
    ref = PackedScorer(model, form="single").score(groups)
    real = K.common_prefix_len

    def one_too_long(seqs):
        return min(real(seqs) + 1, min(len(s) for s in seqs) - 1)

    monkeypatch.setattr(K, "common_prefix_len", one_too_long)
    got = PackedScorer(model, form=form, token_budget=700).score(groups)
    assert max_diff(ref, got) > 1e-2


def test_sliding_window_model():
    """A windowed model (window smaller than the prompts) still matches each prompt alone."""
    model = load("tiny-mistral", sliding_window=48)
    assert K.sliding_window(model.config) == 48
    groups = make_groups(5)
    ref = PackedScorer(model, form="single").score(groups)
    assert max_diff(ref, PackedScorer(model, form="two_stage", token_budget=800).score(groups)) <= P_TOL


def test_shared_holds_one_prefix_kv_and_keeps_every_rubric_in_one_batch(monkeypatch):
    """A long prefix and many rubrics: `shared` runs them as one batch (the budget counts the prefix once and
    each rubric's own tokens, no padding), never copies the prefix's KV per row, and holds it once."""
    from transformers import DynamicCache

    from serving.kernels import packed_rows

    model = load("tiny-llama")
    rng = random.Random(7)
    prefix = [rng.randrange(20, 600) for _ in range(1500)]
    items = [Item(prefix + [rng.randrange(20, 600) for _ in range(rng.randrange(8, 24))], [21, 22]) for _ in range(24)]
    ref = PackedScorer(model, form="two_stage", token_budget=100_000).score([items])

    def no_copy(*a, **k):
        raise AssertionError("the prefix KV was repeated per row")

    monkeypatch.setattr(K, "copy", no_copy, raising=False)
    monkeypatch.setattr(DynamicCache, "batch_repeat_interleave", no_copy)
    batches, held = [], []
    rows, prefill = packed_rows.RowsForward.rows, packed_rows.RowsForward.prefix

    def spy_rows(self, suffixes, offset, past):
        batches.append(sum(len(s) for s in suffixes))
        return rows(self, suffixes, offset, past)

    def spy_prefix(self, ids, chunk):
        held.append(prefill(self, ids, chunk))
        return held[-1]

    monkeypatch.setattr(packed_rows.RowsForward, "rows", spy_rows)
    monkeypatch.setattr(packed_rows.RowsForward, "prefix", spy_prefix)
    scorer = PackedScorer(model, form="shared", token_budget=2100)  # 1500 + 24 rubrics of < 24 tokens ≤ 2100
    got = scorer.score([items])
    assert max_diff(ref, got) <= P_TOL
    p = common_prefix_len([it.ids for it in items])
    assert batches == [sum(len(it.ids) - p for it in items)]  # one batch, each rubric's own tokens, no padding
    kvh, hd = model.config.num_key_value_heads, model.config.hidden_size // model.config.num_attention_heads
    assert len(held) == 1 and tuple(held[0][0][0].shape) == (kvh, p, hd)  # one layer's keys: the prefix once
    assert scorer.stats.forward_tokens == p + batches[0]
    assert 2100 // (p + 24) == 1  # what two_stage, a prefix copy per row, would fit in one batch
    # a smaller budget splits the rubrics into batches of prefix + their tokens ≤ budget, same answers
    batches.clear()
    assert max_diff(ref, PackedScorer(model, form="shared", token_budget=1700).score([items])) <= P_TOL
    assert len(batches) > 1 and all(p + n <= 1700 for n in batches)


def test_shared_refuses_sliding_windows_and_auto_picks_it_on_cpu():
    assert PackedScorer(load("tiny-llama"), form="auto").form == "shared"
    windowed = load("tiny-mistral", sliding_window=48)
    assert PackedScorer(windowed, form="auto").form == "two_stage"
    with pytest.raises(UnsupportedModelError, match="shared"):
        PackedScorer(windowed, form="shared")


def test_chunk_after_a_cache_takes_the_fused_path_and_equals_the_masked_attention():
    """A prefill chunk over a cache: flash over the earlier keys + causal flash over the chunk, merged,
    equals SDPA with the boolean mask (GQA, with and without earlier keys); other masks are left to SDPA."""
    import torch.nn.functional as F

    from serving.kernels.attention import _causal_chunk

    g = torch.Generator().manual_seed(0)
    for past in (0, 37):
        q, k, v = torch.randn(1, 6, 20, 16, generator=g), torch.randn(1, 2, past + 20, 16, generator=g), \
            torch.randn(1, 2, past + 20, 16, generator=g)
        mask = torch.ones(20, past + 20, dtype=torch.bool).tril(diagonal=past)[None, None]
        want = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True).transpose(1, 2)
        got = _causal_chunk(q, k, v, mask, None)
        assert got is not None and (got - want).abs().max() <= ACTIVATION_TOL
        assert _causal_chunk(q, k, v, mask & (torch.rand(mask.shape, generator=g) > 0.1), None) is None


STOP_SCRIPT = r"""
import json, sys
from lifesearch_local.judge.config import JudgeConfig
from lifesearch_local.judge.stage import judge_stage
from lifesearch_local.llm.models import engine_config
from lifesearch_local.records import Report, Task
from lifesearch_local.rundir.directory import RunDir
from serving.config import model_config
from serving.engines.hf import HFEngine

task = Task.model_validate({"id": "t1", "language": "en", "domain": "company", "question": "Q?", "rubrics": [
    {"id": f"R{i}", "criterion": f"States {i}.", "type": "Objective", "necessity": "Explicit",
     "priority": "Must Have", "weight": 1.0} for i in range(2)]})
text = " ".join(f"Finding {i}: revenue grew in region {i % 7}." for i in range(2300))
backend = HFEngine(engine_config(model_config(model="tiny-llama", kernel="two_stage")))
backend.scorer.prefill_chunk = 256
forward = backend.model.forward
calls = [0]
def counted(*a, **kw):
    calls[0] += 1
    return forward(*a, **kw)
def announce(*a, **kw):
    print("FORWARD", flush=True)
    backend.model.forward = counted
    return counted(*a, **kw)
backend.model.forward = announce
stats = judge_stage(RunDir(sys.argv[1]), [task], [Report(task_id="t1", agent="a", text=text)],
                    JudgeConfig(id="j"), backend, show=False)
chunks = len(backend.tokenizer(text, add_special_tokens=False)["input_ids"]) // 256
print("STATS " + json.dumps(stats), flush=True)
print(f"CHUNKS {calls[0]} of at least {chunks}", flush=True)
"""


def test_sigterm_during_a_long_prefill_stops_at_a_chunk_boundary(tmp_path):
    """A ~31k-token report: one whole-prefix forward takes tens of seconds on CPU; chunked, SIGTERM
    is honoured at the next chunk boundary and the stage exits 0 with nothing half-written."""
    import signal
    import subprocess
    import sys
    import time

    proc = subprocess.Popen([sys.executable, "-c", STOP_SCRIPT, str(tmp_path)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "FORWARD", proc.stderr.read()[-2000:]
        time.sleep(0.5)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=110)
    finally:
        proc.kill()
    assert proc.returncode == 0, err[-2000:]
    # stopped at a chunk boundary inside the prefill, whatever the machine's speed: fewer forward calls than chunks
    done, _, _, _, total = next(line for line in out.splitlines() if line.startswith("CHUNKS ")).split()[1:]
    assert int(done) < int(total), out
    stats = next(line for line in out.splitlines() if line.startswith("STATS "))
    assert '"stopped_early": true' in stats and '"decisions": 0' in stats
    judgments = tmp_path / "judgments.jsonl"
    assert not judgments.exists() or judgments.read_text().strip() == ""


def test_chunked_prefill_equals_one_forward():
    """Prefix chunks that end anywhere (7 tokens here) give the same scores as scoring each prompt alone."""

    rng = random.Random(3)
    prefix = [rng.randrange(20, 600) for _ in range(150)]
    model = load("tiny-llama")
    items = [Item(prefix + [rng.randrange(20, 600) for _ in range(rng.randrange(1, 30))], [11, 12]) for _ in range(4)]
    chunked = PackedScorer(model, form="two_stage", prefill_chunk=7).score([items])
    alone = PackedScorer(model, form="single").score([items])
    assert max(abs(a - b) for x, y in zip(chunked[0], alone[0]) for a, b in zip(x, y)) <= LOGP_TOL
