"""forklift's pytest plugin, loaded through the ``pytest11`` entry point when forklift is installed.

Fixtures (all prefixed ``forklift_``, so they sit beside a suite's own):

``forklift_admin_dsn`` (session)
    conninfo of the test server's maintenance database: ``FORKLIFT_TEST_DSN``, or the embedded
    server (``forklift[embedded]``) under ``FORKLIFT_TEST_HOME``, stopped by the last pytest
    process that used it. Override it to reuse a server your suite already runs.
``forklift_dsn``
    a fresh database at the current schema, cloned from a migrated template, dropped after.
``forklift_app``
    your app (the ``forklift_app = module:attr`` ini option, or ``FORKLIFT_APP``) pointed at
    ``forklift_dsn``. Override it to build the app yourself.
``forklift_drain``
    ``forklift_drain(queue=None, *, timeout=30, retries=False)``: a real worker in this
    process runs every due job to its end (see :func:`forklift.testing.drain`).
``forklift_inline``
    inline mode: enqueue runs the job at once and stores nothing (it bypasses the queue; see
    :func:`forklift.testing.inline`). Needs no database.
``forklift_faults``
    ``forklift_faults.fail(kind, times=n)`` / ``.lose_lease(kind, times=n)`` for the next
    attempts run in this process.

Nothing is imported or started until a fixture asks for it.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from forklift._app.app import Forklift
    from forklift.testing._databases import Databases
    from forklift.testing._drain import DrainReport
    from forklift.testing._faults import Faults
    from forklift.testing._inline import InlineRuns


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini("forklift_app", "module:attr of the forklift app the forklift_* fixtures use",
                  default="")


def _app(request: pytest.FixtureRequest) -> Forklift:
    from forklift._app.loader import load_app

    spec = str(request.config.getini("forklift_app") or os.environ.get("FORKLIFT_APP") or "")
    if not spec:
        raise pytest.UsageError(
            "forklift's fixtures need your app: set `forklift_app = myapp.jobs:app` in the pytest"
            " ini file (or FORKLIFT_APP), or override the forklift_app fixture"
        )
    return load_app(spec)


@pytest.fixture(scope="session")
def forklift_admin_dsn() -> Iterator[str]:
    from forklift.testing._databases import acquire_server, release_server

    dsn = acquire_server()
    try:
        yield dsn
    finally:
        release_server()


@pytest.fixture(scope="session")
def forklift_databases(forklift_admin_dsn: str) -> Iterator[Databases]:
    from forklift._db.config import schema_from_env
    from forklift.testing._databases import Databases

    dbs = Databases(forklift_admin_dsn, schema_from_env())
    try:
        yield dbs
    finally:
        dbs.close()


@pytest.fixture
def forklift_dsn(forklift_databases: Databases) -> Iterator[str]:
    dsn = forklift_databases.create()
    try:
        yield dsn
    finally:
        forklift_databases.drop(dsn)


@pytest.fixture
def forklift_app(request: pytest.FixtureRequest, forklift_dsn: str) -> Iterator[Forklift]:
    import asyncio

    app = _app(request)
    app.use(forklift_dsn)
    try:
        yield app
    finally:
        app.close()
        with contextlib.suppress(Exception):
            asyncio.run(app.aclose())


@pytest.fixture
def forklift_drain(forklift_app: Forklift) -> Callable[..., DrainReport]:
    from forklift.testing._drain import drain

    def run(queue: Any = None, **options: Any) -> DrainReport:
        return drain(forklift_app, queue, **options)

    return run


@pytest.fixture
def forklift_inline(request: pytest.FixtureRequest) -> Iterator[InlineRuns]:
    from forklift.testing._inline import inline

    # The app as a test module sees it (its own override of forklift_app, if any), without
    # a database when nobody asked for one.
    if "forklift_app" in request.fixturenames:
        app = request.getfixturevalue("forklift_app")
    else:
        app = _app(request)
    with inline(app) as runs:
        yield runs


@pytest.fixture
def forklift_faults(forklift_app: Forklift) -> Iterator[Faults]:
    from forklift.testing._faults import Faults

    faults = Faults(forklift_app)
    try:
        yield faults
    finally:
        faults.close()
