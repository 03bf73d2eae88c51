"""Model hosting behind one front door: the Engine protocol, opening and hosting an engine, model configs, the kernel's plan.

`lifesearch_local` imports only the names below (`from serving import Engine`; an import-linter contract in
pyproject.toml holds it). Inside: engines/ (the adapters: hf, vllm, openai), kernels/ (the packed judge kernel
and its plan), models/ (tiny and real models), ray/ (session, pool, actors), _util/ (private helpers). Every
module here imports torch, transformers, vLLM and Ray inside the functions that need them, so importing this
package loads none of them.
"""

from ._util.cpu_features import bf16_native
from ._util.jsonread import JSONError, loads
from ._util.logs import log_to_stderr
from ._util.redact import install_log_redaction, redact, redact_obj, secret_from_env
from ._util.retry import RetryableError, RetryPolicy, aretry, retry, retryable_status
from ._util.stop import Stopped, honoured, until_stopped
from ._util.threads import contention, fit_torch_threads, plan_process_threads, usable_cpus
from .affects import ChoiceOnly, Execution, GenerateOnly, Result, result_settings
from .batching import BatchingBackend
from .chat import Item, chat_ids, choice_group_items, context_limit
from .config import (
    DEVICES,
    KERNEL_FORMS,
    HFConfig,
    ModelConfig,
    OpenAIConfig,
    RayConfig,
    VLLMConfig,
    model_config,
)
from .engines import open_engine
from .engines.vllm_cpu import kv_cache_problem as vllm_cpu_kv_cache_problem
from .errors import CONFIG_STATUSES, EndpointError
from .hosting import host_engine
from .kernels.plan import GroupPlan, choice_form, common_prefix_len, plan_group, rows_loop
from .models.real_models import REAL_MODELS, real_model_problem, resolve_model_path
from .models.tiny import TINY_MODELS, build_tiny, cache_root
from .progress_hook import reporting
from .protocol import (
    ChatRequest,
    ChoiceGroup,
    ChoiceRequest,
    ChoiceResult,
    Engine,
    EngineInfo,
    Generation,
    Span,
    UnsupportedModelError,
)
from .ray.pool import assign, group_cost, request_cost
from .ray.session import (
    ClusterGone,
    cluster_address,
    connect,
    gpus_held,
    node_resources,
    ray_session,
    replica_resources,
    wait_for_nodes,
)

__all__ = [
    # the protocol and its records
    "Engine", "EngineInfo", "ChatRequest", "Generation", "ChoiceRequest", "ChoiceGroup", "ChoiceResult", "Span",
    "UnsupportedModelError", "EndpointError", "CONFIG_STATUSES",
    # opening and hosting an engine
    "open_engine", "host_engine", "BatchingBackend", "reporting",
    # model configs and which of their fields change a result
    "ModelConfig", "HFConfig", "VLLMConfig", "OpenAIConfig", "RayConfig", "model_config", "DEVICES", "KERNEL_FORMS",
    "Result", "Execution", "ChoiceOnly", "GenerateOnly", "result_settings",
    # prompts as the engines tokenize them, and the kernel's plan
    "Item", "chat_ids", "choice_group_items", "context_limit",
    "GroupPlan", "plan_group", "choice_form", "rows_loop", "common_prefix_len",
    # the models by name
    "TINY_MODELS", "build_tiny", "cache_root", "REAL_MODELS", "real_model_problem", "resolve_model_path",
    "vllm_cpu_kv_cache_problem", "bf16_native",
    # Ray: the session and how a pool places work
    "ray_session", "connect", "cluster_address", "replica_resources", "gpus_held", "node_resources", "wait_for_nodes",
    "ClusterGone", "assign", "group_cost", "request_cost",
    # helpers both packages use: one JSON reader, one redaction, one bounded retry, one stop flag, one log setup
    "loads", "JSONError", "redact", "redact_obj", "secret_from_env", "install_log_redaction",
    "RetryPolicy", "RetryableError", "retry", "aretry", "retryable_status", "Stopped", "honoured", "until_stopped",
    "log_to_stderr",
    # compute threads that fit the CPUs a process may use, and how busy the machine is
    "usable_cpus", "fit_torch_threads", "plan_process_threads", "contention",
]
