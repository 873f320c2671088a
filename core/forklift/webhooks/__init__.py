"""Outbound webhooks signed as Standard Webhooks describes, and an inbound receiver."""
