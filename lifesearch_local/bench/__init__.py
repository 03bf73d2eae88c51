"""Benchmarks (what `lifesearch bench` runs): the judge engines and their kernel forms (judge.py, columns.py,
rates.py, timed by timing.py), and the web layer's fetching (fetch.py)."""
