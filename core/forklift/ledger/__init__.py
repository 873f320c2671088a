"""Balanced, idempotent double-entry postings written by jobs."""
