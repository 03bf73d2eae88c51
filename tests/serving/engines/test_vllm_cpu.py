"""vLLM's CPU build set up before its engine starts: thread binding and KV-cache sizing (pure parts, no vLLM)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from serving.config import model_config
from serving.engines.vllm_cpu import (
    BIND,
    GIB,
    RESERVED,
    CPUSetupError,
    bound_threads,
    cpu_list,
    cpu_setup,
    kv_bytes_per_token,
    kv_cache_plan,
    parse_cpu_list,
    thread_binding,
)

# smollm2-135m's shape: 30 layers, 9 heads of 64, 3 KV heads; 8192 positions.
SMOLLM2 = SimpleNamespace(num_hidden_layers=30, num_attention_heads=9, num_key_value_heads=3, hidden_size=576,
                          max_position_embeddings=8192)


def test_cpu_lists_round_trip_in_vllms_syntax():
    assert cpu_list([0, 1, 2, 5, 7, 8]) == "0-2,5,7-8"
    assert cpu_list([1]) == "1"
    assert parse_cpu_list("0-2,5,7-8") == [0, 1, 2, 5, 7, 8]


def test_default_binding_is_every_allowed_core_with_none_reserved():
    # vLLM's own default on 2 cores: core ids=[0], reserved_cpus=[1] (half the machine idle)
    env: dict[str, str] = {}
    assert thread_binding(None, [0, 1], env) == {BIND: "0-1", RESERVED: "0"}
    assert thread_binding(None, [2, 3, 6], env) == {BIND: "2-3,6", RESERVED: "0"}
    assert bound_threads({BIND: "2-3,6"}) == 3 and bound_threads({}) is None


def test_the_configs_cores_and_then_the_users_environment_win():
    assert thread_binding("4-5", [0, 1, 2, 3, 4, 5], {})[BIND] == "4-5"
    assert thread_binding(None, [0, 1], {BIND: "1"}) == {}  # the user's own binding is left alone
    assert thread_binding(None, [0, 1], {RESERVED: "1"}) == {BIND: "0-1", RESERVED: "1"}


def test_cpu_cores_is_checked_in_the_config():
    assert model_config(backend="vllm", cpu_cores="0-3,6").cpu_cores == "0-3,6"
    with pytest.raises(ValueError, match="cpu_cores"):
        model_config(backend="vllm", cpu_cores="all")


def test_kv_cache_is_sized_from_max_model_len_within_half_the_free_memory():
    per_token = kv_bytes_per_token(SMOLLM2, 4)
    assert per_token == 2 * 30 * 3 * 64 * 4  # 46 KB a token in fp32
    size, line = kv_cache_plan(per_token, 8192, free=8 * GIB)
    assert size == 4 * 8192 * per_token  # four full-length sequences
    assert "kv_cache_gib not set" in line and "8192" in line
    size, _ = kv_cache_plan(per_token, 8192, free=2 * 8192 * per_token)  # tight: half the free memory
    assert size == 8192 * per_token


def test_kv_cache_that_cannot_hold_one_sequence_is_refused_in_one_line_naming_kv_cache_gib():
    per_token = kv_bytes_per_token(SMOLLM2, 4)
    with pytest.raises(CPUSetupError, match="set kv_cache_gib") as e:
        kv_cache_plan(per_token, 131072, free=8 * GIB)
    assert "\n" not in str(e.value) and "131072" in str(e.value)


def test_cpu_setup_sets_the_binding_and_sizes_only_an_unset_kv_cache(capsys):
    env: dict[str, str] = {}
    size = cpu_setup(model_config(backend="vllm", max_model_len=4096), SMOLLM2, environ=env, allowed=[0, 1],
                     free=8 * GIB)
    assert env == {BIND: "0-1", RESERVED: "0"}
    assert size == 4 * 4096 * kv_bytes_per_token(SMOLLM2, 4)
    err = capsys.readouterr().err
    assert "bound to cores 0-1" in err and "kv_cache_gib not set" in err
    assert cpu_setup(model_config(backend="vllm", kv_cache_gib=1.0), SMOLLM2, environ={}, allowed=[0], free=0) is None
    bf16 = cpu_setup(model_config(backend="vllm", dtype="bfloat16"), SMOLLM2, environ={}, allowed=[0], free=8 * GIB)
    assert bf16 == 4 * 8192 * kv_bytes_per_token(SMOLLM2, 2)
