"""A two-phase search reindex over an application table."""
