"""Upkeep of an application's range-partitioned tables."""
