"""The packed rows loop's bf16 kernels for CPUs with AMX (csrc/bf16_cpu.c), built with the C compiler at first use.

- attention: torch's CPU flash kernel is bound by its softmax's exponentials in bf16 (docs/benchmarks.md);
  this one makes one pass over the report's keys and the row's own keys (no second call, no merge), its
  exponential a polynomial on AVX-512, both products on AMX tiles;
- RMSNorm and rotary: one pass each over the bf16 values (torch's take several, each converting to fp32
  and back).
They run in torch's own OpenMP threads. Where they cannot be had (a CPU without AMX and AVX512-BF16, no C
compiler, or LIFESEARCH_CPU_KERNELS=0) `ready()` is False and the loop keeps torch's ops.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._util.cpu_features import cpu_flags

log = logging.getLogger(__name__)

SOURCE = Path(__file__).parent / "csrc" / "bf16_cpu.c"
FLAGS = ("-O3", "-shared", "-fPIC", "-mavx512f", "-mavx512bw", "-mavx512vl", "-mavx512dq", "-mavx512bf16",
         "-mamx-tile", "-mamx-bf16", "-mfma", "-fopenmp")
NEEDED = ("amx_tile", "amx_bf16", "avx512_bf16", "avx512f")
BLOCK_KEYS = 128
"""Keys the kernel takes at a time: the packed keys and values are padded to a multiple of it."""


def cache_dir() -> Path:
    """Where the built library is kept: $LIFESEARCH_KERNEL_CACHE, else ~/.cache/lifesearch-local/kernels."""
    env = os.environ.get("LIFESEARCH_KERNEL_CACHE")
    base = Path(env) if env else Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "lifesearch-local"
    return base if env else base / "kernels"


def build(compiler: str | None = None) -> Path:
    """The library built from SOURCE (reused when the source, flags and compiler are unchanged) by `compiler`,
    else $CC, else gcc, else cc: GCC's OpenMP is the libgomp torch ships, so the kernels share torch's team
    (clang's would bring a second runtime). Raises OSError or CalledProcessError where it cannot be built."""
    cc = compiler or os.environ.get("CC") or ("gcc" if shutil.which("gcc") else "cc")
    exe = shutil.which(cc)
    if exe is None:
        raise OSError(f"no C compiler {cc!r} on PATH")
    version = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=30).stdout
    key = hashlib.sha256("\0".join([SOURCE.read_text(), *FLAGS, version]).encode()).hexdigest()[:16]
    target = cache_dir() / f"bf16_cpu-{key}.so"
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        out = Path(tmp) / target.name
        subprocess.run([exe, *FLAGS, "-o", str(out), str(SOURCE), "-lm"], check=True, capture_output=True,
                       text=True, timeout=300)
        os.replace(out, target)  # atomic: a second process building the same key finds a whole file
    return target


@functools.cache
def _library() -> Any:
    """The loaded library with AMX granted to this process, or None (logged once) where either fails."""
    import torch  # noqa: F401  (first: the library must bind to the libgomp torch loaded, so both share one team)

    if os.environ.get("LIFESEARCH_CPU_KERNELS", "1") == "0" or not set(NEEDED) <= cpu_flags():
        return None
    try:
        lib = ctypes.CDLL(str(build()))
    except (OSError, subprocess.SubprocessError) as exc:
        detail = getattr(exc, "stderr", "") or exc
        log.warning("bf16 CPU kernels not built, torch's ops are used instead: %s", str(detail).strip()[:500])
        return None
    if lib.ls_amx_request() != 0:
        log.warning("the OS refused this process AMX state; torch's ops are used instead")
        return None
    i64, i32, ptr = ctypes.c_int64, ctypes.c_int, ctypes.c_void_p
    lib.ls_attend.argtypes = [ptr, i64, ptr, ptr, i64, i64, ptr, ptr, i64, ptr, i64, i32, i32, i32, ctypes.c_float,
                              ptr]
    lib.ls_threads.argtypes = [i32]
    lib.ls_threads.restype = None
    lib.ls_attend.restype = ctypes.c_int
    for fn in (lib.ls_pack_k, lib.ls_pack_v):
        fn.argtypes = [ptr, i64, i64, i64, i32, i32, ptr, i64]
        fn.restype = None
    lib.ls_rms_norm.argtypes = [ptr, i64, i64, i64, ctypes.c_float, ptr, ptr]
    lib.ls_rotary.argtypes = [ptr, i64, i32, i32, i64, ptr, ptr]
    lib.ls_rms_norm.restype = lib.ls_rotary.restype = None
    return lib


def ready() -> bool:
    """Whether the kernels are built and loaded here."""
    return _library() is not None


def _lib() -> Any:
    """The library, its OpenMP team set to torch's thread count (which may have changed since the last call)."""
    import torch

    lib = _library()
    lib.ls_threads(torch.get_num_threads())
    return lib


def available(dtype: Any, head_dim: int) -> bool:
    """Whether `attend` and `rotary` run here for this dtype and head size."""
    import torch

    return dtype == torch.bfloat16 and head_dim % 32 == 0 and head_dim <= 256 and ready()


def rms_norm(x: Any, eps: float, weight: Any = None) -> Any | None:
    """packed_rows.rms_norm for bf16 rows in one pass; None where x's layout is not one it takes."""
    import torch

    n = x.shape[-1]
    if x.is_contiguous():
        rows, stride = x.numel() // n, n
    elif x.dim() == 2 and x.stride(1) == 1:
        rows, stride = x.shape[0], x.stride(0)
    else:
        return None
    if weight is not None and (weight.dtype != torch.bfloat16 or not weight.is_contiguous()):
        return None
    out = torch.empty(x.shape, dtype=x.dtype)
    _lib().ls_rms_norm(x.data_ptr(), rows, n, stride, eps, weight.data_ptr() if weight is not None else None,
                       out.data_ptr())
    return out


def rotary(x: Any, freqs: Any) -> Any | None:
    """packed_rows.rotary for bf16 (tokens, heads, dim) in one pass; None where the layout is not one it takes."""
    import torch

    t, heads, d = x.shape
    if x.stride(2) != 1 or x.stride(1) != d or d % 16:
        return None
    cs = torch.view_as_real(freqs).contiguous()
    out = torch.empty((t, heads, d), dtype=x.dtype)
    _lib().ls_rotary(x.data_ptr(), t, heads, d, x.stride(0), cs.data_ptr(), out.data_ptr())
    return out


@dataclass(frozen=True)
class Packed:
    """Keys and values of one layer in the kernel's tile layouts, padded with zeros to `n_pad` keys."""

    k: Any
    v: Any
    n: int
    n_pad: int


def pack(k: Any, v: Any, token_dim: int) -> Packed:
    """Keys and values, (tokens, kv_heads, dim) or (kv_heads, tokens, dim) as `token_dim` says (any strides,
    the last dim contiguous), packed for the kernel. The padding is zero, so no NaN reaches a product."""
    import torch

    n, kvh, d = k.shape[token_dim], k.shape[1 - token_dim], k.shape[2]
    n_pad = -(-n // BLOCK_KEYS) * BLOCK_KEYS
    lib = _lib()
    out = []
    for x, fn in ((k, lib.ls_pack_k), (v, lib.ls_pack_v)):
        if x.stride(2) != 1:
            x = x.contiguous()
        dst = torch.empty((kvh, n_pad, d), dtype=x.dtype)
        fn(x.data_ptr(), x.stride(token_dim), x.stride(1 - token_dim), n, kvh, d, dst.data_ptr(), n_pad)
        out.append(dst)
    return Packed(out[0], out[1], n, n_pad)


def row_starts(starts: Sequence[int], tokens: int) -> Any:
    """Per token of packed rows that begin at `starts`, the index of its row's first token (int32): what
    `attend` takes, made once per forward (every layer's rows are the same)."""
    import torch

    bounds = torch.tensor([*starts, tokens])
    return torch.repeat_interleave(bounds[:-1].to(torch.int32), bounds.diff())


def attend(q: Any, k: Any, v: Any, past: Packed | None, row_start: Any, scale: float) -> Any:
    """packed_rows.attend's contract (q, k, v: (tokens, heads, dim) bf16), the rows given by `row_start`
    (`row_starts`), with the past already packed (`pack(pk, pv, 1)`), all of it visible. Returns
    (tokens, heads × dim)."""
    import torch

    t, h, d = q.shape
    own = pack(k, v, 0)
    if q.stride(2) != 1 or q.stride(1) != d:  # the kernel reads a token's heads as one row
        q = q.contiguous()
    out = torch.empty((t, h * d), dtype=q.dtype)
    pk, pv, seen, pad = (past.k, past.v, past.n, past.n_pad) if past is not None else (own.k, own.v, 0, 0)
    if _lib().ls_attend(q.data_ptr(), q.stride(0), pk.data_ptr(), pv.data_ptr(), seen, pad, own.k.data_ptr(),
                        own.v.data_ptr(), own.n_pad, row_start.data_ptr(), t, h, k.shape[1], d, scale, out.data_ptr()):
        raise ValueError(f"AMX attention refused its shapes: tokens {t}, heads {h}/{k.shape[1]}, dim {d}")
    return out
