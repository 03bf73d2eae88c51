"""lifesearch-local: the LifeSearch deep-research benchmark on self-hosted models."""

__version__ = "0.1.0"
