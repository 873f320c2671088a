"""The bench's scenarios: each module registers its own (:mod:`forklift.cli.bench.registry`)."""
