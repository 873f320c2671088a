"""The operator API: what the CLI, the console and scripts call. No SQL lives outside core."""
