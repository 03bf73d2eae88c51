"""Output for people and programs: terminal tables, CSV rows, the HTML report."""
