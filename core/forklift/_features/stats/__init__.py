"""Job statistics: the SQL the stats read and the rollup share, and the rollup itself."""
