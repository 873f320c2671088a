"""A newer release's migration, for tests of upgrades: one migration past forklift's own, whose
header says which workers keep working after it (``-- workers: N``).

``newer_release(monkeypatch, workers=N)`` makes this process see it as pending (the runner,
``forklift migrate`` run in-process, the status): the process acts as the new release, while
worker processes started by the test run the current one. The migration itself only adds a
table nothing reads, so whatever the header says, the workers really keep running.
"""

from __future__ import annotations

import pytest

import forklift._db.migrate as runner
from forklift._db.migrate import Migration

#: The probe's table: present once the probe migration was applied.
TABLE = "upgrade_probe"


def probe(workers: int | None) -> Migration:
    version = max(m.version for m in runner.migrations()) + 1
    return Migration(version, "upgrade_probe",
                     f"CREATE TABLE {{s}}.{TABLE} (id integer PRIMARY KEY);\n", workers=workers)


def newer_release(monkeypatch: pytest.MonkeyPatch, *, workers: int | None) -> Migration:
    """Make this process's migrations forklift's own plus the probe; the probe."""
    extra = probe(workers)
    own = runner.migrations

    def with_probe(source: object = None) -> list[Migration]:
        found = own(source)  # type: ignore[arg-type]
        return found if source is not None else [*found, extra]

    monkeypatch.setattr(runner, "migrations", with_probe)
    return extra
