"""The HTML run report's entry point under its announced name; the code is in `lifesearch_local.report`."""

from __future__ import annotations

from .report import render_report, write_report

__all__ = ["render_report", "write_report"]
