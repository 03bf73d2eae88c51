"""How far two fp32 computations of the same numbers may drift apart when their sums run in another order.

Why any drift at all: fp32 rounds every operation to about 6e-8 of its value, and a dot product,
softmax or norm adds thousands of terms. Another engine (vLLM against torch), another kernel (the
packed forms against one prompt at a time, a chunked prefill, flash attention against masked
SDPA), another batch shape, another thread count (a reduction split in two halves at 2 threads,
not at 1) or another process (a 1-CPU Ray actor against this process at 2 threads) adds the same
terms in another order, so each sum can land a few units in the last place elsewhere, and the
differences grow through the model's layers. None of these is exact, on any machine.

Measured: smollm2-135m (30 layers) in fp32, vLLM's CPU engine against the hf backend over 18
sample judge prompts, max |Δ log p| 4.6e-5 and max |Δ p_true| 2.9e-6 (the 2-core CI machine); the
same vLLM engine at 2 threads in process against a 1-CPU Ray actor, |Δ p_true| 2.87e-6 (another
2-core machine, AMD EPYC, 2026-12-02, where a bound of 1e-6 failed). The bounds below leave 20-35×
over those, for other CPUs' instruction sets, and stay far below what a real mistake costs: a
decision read one token early moves p_true by more than 1e-2 (tests/vllm_cpu/test_engine.py), a
mask that lets suffixes see each other too (tests/serving/kernels/test_kernel.py).

Where a computation is the same by construction (one process, one kernel, one batch, one thread
count), tests compare exactly instead.
"""

from __future__ import annotations

P_TOL = 1e-4
"""A probability (p_true, a choice's probability, a score made of them) computed twice.
|Δp| ≤ p(1 − p)·|Δ logit| ≤ |Δ logit| / 4."""

LOGP_TOL = 1e-3
"""A log-probability computed twice: log p moves by Δp / p, so small probabilities move the most."""

ACTIVATION_TOL = 1e-5
"""One attention layer's output on O(1) inputs over a few dozen keys, fused against unfused: a few
units in the last place of sums of that many terms, nothing grown through layers."""
