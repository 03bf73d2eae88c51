"""The local web layer: guarded fetching, search backends, a replay cache and as-of enforcement.

Import from the modules (`web.fetcher`, `web.search`, `web.cache`, `web.config`, `web.records`):
this package imports nothing, so `lifesearch --help` stays light.
"""
