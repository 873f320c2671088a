"""The Django tasks backend, on a real Django site (tests/django_project) and the real database.

The test process is the web side: Django is set up once, pointed at each test's database, and
enqueues through ``@task``. Tasks run on a real ``forklift worker --app
forklift.django.worker:app`` subprocess, and results are read back through Django's API.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from eco_procs import Procs, procs
from helpers import wait_until
from psycopg.conninfo import conninfo_to_dict

PROJECT = Path(__file__).resolve().parents[1] / "django_project"
__all__ = ["procs"]

pytest.importorskip("django")


@pytest.fixture(scope="module")
def django_site() -> None:
    """Django, set up once per test process, on the test site's settings."""
    if str(PROJECT) not in sys.path:
        sys.path.insert(0, str(PROJECT))
    os.environ["DJANGO_SETTINGS_MODULE"] = "tdsite.settings"
    import django

    django.setup()


def _point_django_at(dsn: str) -> None:
    from django.db import connections

    connections.close_all()
    params = conninfo_to_dict(dsn)
    connections.settings["default"].update(
        NAME=params.get("dbname", ""), USER=params.get("user", ""),
        PASSWORD=params.get("password", ""), HOST=params.get("host", ""),
        PORT=params.get("port", ""),
    )


def _tasks_setting(**options: Any) -> dict[str, Any]:
    """The site's two backends (tdsite.settings), with ``options`` for the default one."""
    return {"default": {"BACKEND": "forklift.django.ForkliftBackend",
                        "QUEUES": ["default", "emails"], "OPTIONS": options},
            "reports": {"BACKEND": "forklift.django.ForkliftBackend",
                        "QUEUES": ["default"], "OPTIONS": {"max_attempts": 1}}}


@pytest.fixture
def site(django_site: None, dsn: str) -> Iterator[str]:
    """Django on this test's database (Django's tables migrated), with a fresh task backend."""
    from django.core.management import call_command
    from django.test.utils import override_settings

    _point_django_at(dsn)
    call_command("migrate", verbosity=0)
    with override_settings(TASKS=_tasks_setting(max_attempts=1)):
        try:
            yield dsn
        finally:
            _close_backends()
    _close_backends()
    from django.db import connections

    connections.close_all()


def _close_backends() -> None:
    from forklift.django import ForkliftBackend
    from forklift.django._compat import task_backends

    for backend in task_backends.all():
        if isinstance(backend, ForkliftBackend):
            backend.close()


def _worker(procs: Procs, dsn: str, backend: str = "default") -> None:
    procs.start(
        "--app", "forklift.django.worker:app",
        "--queues", "default,emails" if backend == "default" else "default",
        "--concurrency", "2", "--lease", "5",
        env={"DJANGO_SETTINGS_MODULE": "tdsite.settings", "FORKLIFT_DJANGO_TEST_DSN": dsn,
             "SHOP_MAX_ATTEMPTS": "1", "FORKLIFT_DJANGO_BACKEND": backend,
             "PYTHONPATH": os.pathsep.join(filter(None, [str(PROJECT), os.environ.get("PYTHONPATH")]))},
        cwd=PROJECT,
    )


def _finished(result: Any) -> Any:
    """``result`` read back (through its backend) once it is SUCCESSFUL or FAILED."""
    from forklift.django._compat import task_backends

    backend = task_backends[result.backend]

    def done() -> Any:
        got = backend.get_result(result.id)
        return got if got.is_finished else None

    return wait_until(done, timeout=60, interval=0.05,
                      message=lambda: f"task {result.id} did not finish")


def _row(conn: psycopg.Connection[Any], job_id: str) -> dict[str, Any] | None:
    cur = conn.execute("SELECT kind, queue, priority, state, args FROM forklift.jobs WHERE id = %s",
                       (int(job_id),))
    row = cur.fetchone()
    return dict(zip(["kind", "queue", "priority", "state", "args"], row, strict=True)) if row else None


def test_tasks_enqueue_run_on_a_forklift_worker_and_report_results(
    site: str, conn: psycopg.Connection[Any], procs: Procs
) -> None:
    from shop import tasks
    from shop.models import Order

    from forklift.django._compat import TaskResultStatus

    order = Order.objects.create()
    enqueued = {
        "add": tasks.add.enqueue(2, 3),
        "add_later": tasks.add_later.enqueue(a=4, b=5),
        "receipt": tasks.send_receipt.enqueue("ada@example.com"),
        "order": tasks.process_order.enqueue(order.pk),
        "context": tasks.which_attempt.enqueue("x"),
    }
    r = enqueued["add"]
    assert r.status == TaskResultStatus.READY and r.id.isdigit() and r.enqueued_at is not None
    assert _row(conn, r.id) == {"kind": "django.task", "queue": "default", "priority": 0,
                                "state": "available",
                                "args": {"task": "shop.tasks.add", "args": [2, 3], "kwargs": {},
                                         "backend": "default"}}
    receipt = _row(conn, enqueued["receipt"].id)
    assert receipt is not None and (receipt["queue"], receipt["priority"]) == ("emails", -10)
    later = _row(conn, enqueued["add_later"].id)
    assert later is not None and later["kind"] == "django.atask"

    _worker(procs, site)
    done = {name: _finished(result) for name, result in enqueued.items()}
    assert {n: d.status for n, d in done.items()} == dict.fromkeys(done, TaskResultStatus.SUCCESSFUL)
    assert done["add"].return_value == 5
    assert done["add_later"].return_value == 9
    assert done["receipt"].return_value == "sent to ada@example.com"
    assert done["order"].return_value == "processed"
    order.refresh_from_db()
    assert order.status == "processed"  # the task ran Django's ORM on the worker
    assert done["context"].return_value == {"tag": "x", "attempt": 1, "id": enqueued["context"].id}
    d = done["add"]
    assert d.errors == [] and d.attempts == 1 and d.finished_at is not None
    assert d.started_at is not None and d.args == [2, 3] and d.kwargs == {}
    # A result enqueued earlier catches up with refresh().
    r.refresh()
    assert r.status == TaskResultStatus.SUCCESSFUL and r.return_value == 5


def test_a_failing_task_reports_its_error_scrubbed(site: str, procs: Procs) -> None:
    from shop import tasks

    from forklift.django._compat import TaskResultStatus

    boom = tasks.explode.enqueue("boom: password=hunter2")
    _worker(procs, site)
    failed = _finished(boom)
    assert failed.status == TaskResultStatus.FAILED
    [error] = failed.errors
    assert error.exception_class is ValueError
    assert "boom" in error.traceback and "hunter2" not in error.traceback  # scrubbed once, stored
    assert "shop/tasks.py" in error.traceback
    with pytest.raises(ValueError, match="failed"):
        _ = failed.return_value


def test_enqueue_joins_djangos_transaction(site: str, conn: psycopg.Connection[Any]) -> None:
    from django.db import transaction
    from shop import tasks
    from shop.models import Order

    def visible(job_id: str) -> bool:
        return _row(conn, job_id) is not None

    with transaction.atomic():
        order = Order.objects.create()
        kept = tasks.process_order.enqueue(order.pk)
        assert not visible(kept.id)  # another session sees nothing before the commit
    assert visible(kept.id)

    class Abort(Exception):
        pass

    with pytest.raises(Abort), transaction.atomic():
        dropped = tasks.add.enqueue(1, 1)
        raise Abort
    assert not visible(dropped.id)  # rolled back with the transaction that enqueued it


def test_without_enqueue_on_commit_a_task_outlives_a_rollback(
    site: str, conn: psycopg.Connection[Any]
) -> None:
    from django.db import transaction
    from django.test.utils import override_settings
    from shop import tasks

    with override_settings(TASKS=_tasks_setting(enqueue_on_commit=False, dsn=site)):
        with pytest.raises(RuntimeError), transaction.atomic():
            result = tasks.add.enqueue(1, 2)
            raise RuntimeError
        _close_backends()
    assert _row(conn, result.id) is not None


def test_get_result_of_an_unknown_id_says_so(site: str) -> None:
    from shop import tasks

    from forklift.django._compat import TaskResultDoesNotExist

    for missing in ("999999", "not-a-number"):
        with pytest.raises(TaskResultDoesNotExist):
            tasks.add.get_result(missing)


@pytest.mark.parametrize(
    ("options", "queues", "names"),
    [
        ({"bogus": 1}, None, "TASKS['default']['OPTIONS']['bogus']"),
        ({"database": "other"}, None, "TASKS['default']['OPTIONS']['database']"),
        ({"max_attempts": 0}, None, "TASKS['default']['OPTIONS']['max_attempts']"),
        ({"enqueue_on_commit": "yes"}, None, "TASKS['default']['OPTIONS']['enqueue_on_commit']"),
        ({"schema": "Bad-Name"}, None, "TASKS['default']['OPTIONS']['schema']"),
        ({"app": "nowhere.at_all:app"}, None, "TASKS['default']['OPTIONS']['app']"),
        ({}, ["default", ""], "TASKS['default']['QUEUES']"),
    ],
)
def test_misconfiguration_fails_when_the_backend_starts_naming_the_setting(
    django_site: None, options: dict[str, Any], queues: list[str] | None, names: str
) -> None:
    from django.test.utils import override_settings

    from forklift.django import DjangoConfigError
    from forklift.django._compat import task_backends

    setting = _tasks_setting(**options)
    if queues is not None:
        setting["default"]["QUEUES"] = queues
    with override_settings(TASKS=setting), pytest.raises(DjangoConfigError) as caught:
        task_backends["default"]  # Django creates the backend on first use
    assert caught.value.message.startswith(names), caught.value.message
    assert caught.value.code == "django_config"


def test_a_task_on_a_queue_the_backend_does_not_list_is_refused_at_declaration(
    django_site: None,
) -> None:
    from django.test.utils import override_settings

    from forklift.django._compat import InvalidTaskError

    with override_settings(TASKS=_tasks_setting()), pytest.raises(InvalidTaskError) as caught:
        from shop.tasks import add

        add.using(queue_name="reports")
    assert str(caught.value) == "Queue 'reports' is not valid for backend."  # Django's words
    _close_backends()


def test_a_forklift_database_other_than_djangos_cannot_join_its_transaction(
    site: str, empty_dsn: str
) -> None:
    from django.test.utils import override_settings
    from shop import tasks

    from forklift import migrate
    from forklift.django import DjangoConfigError

    migrate(empty_dsn)
    with override_settings(TASKS=_tasks_setting(dsn=empty_dsn)):
        try:
            with pytest.raises(DjangoConfigError, match=r"\['enqueue_on_commit'\]"):
                tasks.add.enqueue(1, 2)
        finally:
            _close_backends()


def test_the_middleware_names_the_signed_in_user_as_enqueued_by(
    site: str, conn: psycopg.Connection[Any]
) -> None:
    """A request served for a signed-in user: the tasks it enqueues, on every forklift backend,
    name ``user:<pk>``; an anonymous request's, and one outside any request, name nobody."""
    from types import SimpleNamespace

    from django.test import RequestFactory
    from shop import tasks

    from forklift.django.middleware import EnqueuedByMiddleware

    def view(request: Any) -> list[str]:
        return [tasks.add.enqueue(1, 2).id, tasks.add.using(backend="reports").enqueue(3, 4).id]

    def served(user: Any) -> list[str]:
        request = RequestFactory().get("/orders")
        request.user = user
        ids: list[str] = EnqueuedByMiddleware(view)(request)
        return ids

    signed_in = served(SimpleNamespace(is_authenticated=True, pk=42))
    anonymous = served(SimpleNamespace(is_authenticated=False, pk=None))
    outside = view(None)
    rows = dict(conn.execute("SELECT id::text, enqueued_by FROM forklift.jobs").fetchall())
    assert [rows[i] for i in signed_in] == ["user:42", "user:42"]
    assert [rows[i] for i in anonymous + outside] == [None] * 4
