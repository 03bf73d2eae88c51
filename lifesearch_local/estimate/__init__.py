"""What a run or a `judge` invocation will cost before it runs: plan (counts) → work (tokens, passes, FLOPs,
counted from the kernel's own plan) → cost (seconds, memory, GPU-hours), the engine calibrations it rests on,
and the dry runs that assemble them (`estimate`, `run --dry-run`, `judge --dry-run`)."""
