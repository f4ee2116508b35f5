"""Failure-acceptance reports (Markdown, HTML, JSON, JUnit XML) and shard merging."""
