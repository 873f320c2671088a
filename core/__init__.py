"""forklift: durable background jobs for Python on PostgreSQL."""
