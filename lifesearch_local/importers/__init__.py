"""Importers that convert other deep-research benchmarks into LifeSearch task and report files."""
