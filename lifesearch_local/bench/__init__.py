"""Benchmarks of the judge engines (what `lifesearch bench` runs)."""
