"""What every stage uses: the stage skeleton, signals, concurrency, progress."""
