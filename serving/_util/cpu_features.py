"""What this CPU computes natively: bf16 matrix instructions or not (from /proc/cpuinfo's flags)."""

from __future__ import annotations

import functools
from pathlib import Path

BF16_FLAGS = ("avx512_bf16", "amx_bf16")
"""Flags under which a CPU multiplies bf16 matrices natively (AVX512-BF16, AMX); without them torch emulates
bf16 matmuls, tens of times slower than fp32 (measured: docs/history.md)."""


@functools.lru_cache(maxsize=4)
def cpu_flags(path: str = "/proc/cpuinfo") -> frozenset[str]:
    """The CPU's feature flags (empty where /proc/cpuinfo is not there)."""
    try:
        text = Path(path).read_text()
    except OSError:
        return frozenset()
    line = next((x for x in text.splitlines() if x.startswith("flags")), "")
    return frozenset(line.partition(":")[2].split())


def bf16_native(flags: frozenset[str] | set[str] | None = None) -> bool | None:
    """Whether this CPU has bf16 matrix instructions; None where its flags cannot be read."""
    flags = cpu_flags() if flags is None else flags
    return bool(set(BF16_FLAGS) & set(flags)) if flags else None
