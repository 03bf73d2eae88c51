"""Task curation (LifeSearch §3.1, stages 1–3): filter, classify and rewrite query seeds with a local model."""
