"""Model hosting: engines behind one small protocol, the packed judge kernel, Ray actors."""

from serving.threads import contention, fit_torch_threads, plan_process_threads, usable_cpus

__all__ = ["contention", "fit_torch_threads", "plan_process_threads", "usable_cpus"]
