"""The bench's scenarios: each module registers its own (:mod:`forklift_console.bench.registry`)."""
