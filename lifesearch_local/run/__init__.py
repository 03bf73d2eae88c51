"""What commands call: the pipeline, the stand-alone stages, preflight, repair, rejudge, RunConfig, the certify
study and its reference labels, and the leaderboard's sources (task_scores.py)."""
