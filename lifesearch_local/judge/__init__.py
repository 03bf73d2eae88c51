"""The rubric judge: its prompts and verdicts (rubric.py), and its resumable stage (stage.py)."""
