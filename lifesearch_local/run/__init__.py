"""What commands call: the pipeline, the stand-alone stages, preflight, repair, rejudge, and RunConfig."""
