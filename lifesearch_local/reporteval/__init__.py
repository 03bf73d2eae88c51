"""DeepResearch-ReportEval metrics (quality, redundancy, factuality) on local judges and the web cache."""
