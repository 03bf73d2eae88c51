"""The model-facing helpers: generate-and-parse, the tiny models, prompt files."""
