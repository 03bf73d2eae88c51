"""Pure numbers: eq. 1 scores, resampling statistics, agreement and its intervals, caveats. No I/O."""
