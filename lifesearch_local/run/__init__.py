"""What commands call: the pipeline, the stand-alone stages, preflight, repair."""
