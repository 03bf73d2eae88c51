"""The run directory: its layout, its lock, the manifest and the resume guard, JSONL records."""
