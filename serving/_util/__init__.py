"""Helpers the engines share and the front door re-exports: bounded JSON reading, secret redaction, the bounded
retry, stderr logging, the stop flag, CPU features. Private: import them from `serving`."""
