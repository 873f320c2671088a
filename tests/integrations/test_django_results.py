"""The Django backend held to what Django's task API documents for every backend.

Errors read as Django's own backends record them (the same class path, a traceback formatted as
``traceback.format_exception`` formats it, starting at the task), every recorded task has a
result, ``task_started``/``task_finished`` are sent on the worker (the site's receivers record
them, shop.signals), and two backends on one database keep to their own tasks. The site, the
worker and the harness are test_django's.
"""

from __future__ import annotations

import inspect
from typing import Any

import psycopg
import pytest
from eco_procs import Procs, procs
from helpers import wait_until
from test_django import (
    _close_backends,
    _finished,
    _row,
    _tasks_setting,
    _worker,
    django_site,
    site,
)

__all__ = ["django_site", "procs", "site"]

pytest.importorskip("django")


def _immediately(task: Any, *args: Any) -> Any:
    """``task`` run by Django's own ImmediateBackend: the error Django records for it."""
    from django.test.utils import override_settings

    from forklift.django._compat import SOURCE

    backends = {**_tasks_setting(max_attempts=1),
                "immediate": {"BACKEND": f"{SOURCE}.backends.immediate.ImmediateBackend"}}
    with override_settings(TASKS=backends):
        return task.using(backend="immediate").enqueue(*args)


def _line_of(func: Any, text: str) -> int:
    lines, first = inspect.getsourcelines(func)
    return first + next(i for i, line in enumerate(lines) if text in line)


def test_an_error_reads_as_djangos_own_backend_records_it(site: str, procs: Procs) -> None:
    from shop import tasks

    from forklift.django._compat import TaskResultStatus

    sync = tasks.charge.enqueue(5)
    coro = tasks.charge_later.enqueue(7)
    _worker(procs, site)
    for result, task, amount in ((sync, tasks.charge, 5), (coro, tasks.charge_later, 7)):
        got = _finished(result)
        assert got.status == TaskResultStatus.FAILED
        [error] = got.errors
        assert error.exception_class_path == "shop.tasks.PaymentDeclined"
        assert error.exception_class is tasks.PaymentDeclined
        line = _line_of(task.func, "raise PaymentDeclined")
        # The task's frame first (not the worker's), its source line, then the exception as
        # Python writes it: no failure code in the message.
        assert error.traceback == (
            "Traceback (most recent call last):\n"
            f'  File "{tasks.__file__}", line {line}, in {task.func.__name__}\n'
            '    raise PaymentDeclined(f"card declined for {amount}")\n'
            f"shop.tasks.PaymentDeclined: card declined for {amount}\n"
        )
        django = _immediately(task, amount).errors[0]
        assert error.exception_class_path == django.exception_class_path
        assert django.traceback.endswith(error.traceback.split("\n", 1)[1])


def test_a_return_value_that_is_not_json_fails_with_djangos_type_error(
    site: str, procs: Procs
) -> None:
    from shop import tasks

    from forklift.django._compat import TaskResultStatus

    odd = tasks.returns_a_set.enqueue()
    _worker(procs, site)
    bad = _finished(odd)
    assert bad.status == TaskResultStatus.FAILED and bad.attempts == 1
    [error] = bad.errors
    django = _immediately(tasks.returns_a_set).errors[0]
    assert error.exception_class is TypeError
    assert error.exception_class_path == django.exception_class_path == "builtins.TypeError"
    assert error.traceback.splitlines()[-1] == django.traceback.splitlines()[-1]
    assert "forklift" not in error.traceback


def test_a_task_renamed_since_it_was_enqueued_still_has_a_result(
    site: str, conn: psycopg.Connection[Any], procs: Procs
) -> None:
    from shop import tasks

    from forklift.django._compat import TaskResultStatus, task_backends

    result = tasks.add.enqueue(1, 2)
    conn.execute("UPDATE forklift.jobs SET args = jsonb_set(args, '{task}', '\"shop.tasks.gone\"')"
                 " WHERE id = %s", (int(result.id),))
    backend = task_backends["default"]
    waiting = backend.get_result(result.id)
    assert waiting.status == TaskResultStatus.READY
    assert waiting.task.module_path == "shop.tasks.gone" and waiting.args == [1, 2]
    _worker(procs, site)
    failed = _finished(result)
    assert failed.status == TaskResultStatus.FAILED and failed.task.module_path == "shop.tasks.gone"
    [error] = failed.errors
    assert error.exception_class is ImportError
    assert "shop.tasks.gone" in error.traceback.splitlines()[-1]
    with pytest.raises(ImportError):
        failed.task.func()


def test_djangos_signals_are_sent_on_enqueue_start_and_finish(site: str, procs: Procs) -> None:
    from shop import tasks
    from shop.models import TaskEvent

    from forklift.django._compat import TaskResultStatus, task_enqueued

    enqueued: list[Any] = []

    def on_enqueued(sender: type, task_result: Any, **kwargs: Any) -> None:
        enqueued.append((sender, task_result))

    task_enqueued.connect(on_enqueued)
    try:
        ok = tasks.add.enqueue(2, 2)
        later = tasks.add_later.enqueue(3, 3)
        boom = tasks.charge.enqueue(9)
    finally:
        task_enqueued.disconnect(on_enqueued)
    assert [(s.__name__, r.id, r.status) for s, r in enqueued] == [
        ("ForkliftBackend", r.id, TaskResultStatus.READY) for r in (ok, later, boom)]

    _worker(procs, site)
    for r in (ok, later, boom):
        _finished(r)

    def events(result: Any) -> list[tuple[Any, ...]]:
        return list(TaskEvent.objects.filter(result_id=result.id).order_by("id").values_list(
            "signal", "backend", "status", "attempts", "errors", "return_value"))

    # task_finished is sent after the attempt's outcome is known; wait for the last receiver.
    wait_until(lambda: all(len(events(r)) == 2 for r in (ok, later, boom)), timeout=30,
               message=lambda: f"signals: {[events(r) for r in (ok, later, boom)]}")
    for r, value in ((ok, 4), (later, 6)):
        assert events(r) == [("started", "default", TaskResultStatus.RUNNING, 1, [], None),
                             ("finished", "default", TaskResultStatus.SUCCESSFUL, 1, [], value)]
    started, finished = events(boom)
    assert started == ("started", "default", TaskResultStatus.RUNNING, 1, [], None)
    assert finished[:4] == ("finished", "default", TaskResultStatus.FAILED, 1)
    [[path, traceback]] = finished[4]
    assert path == "shop.tasks.PaymentDeclined"
    assert traceback.startswith("Traceback (most recent call last):\n")
    assert traceback.endswith("shop.tasks.PaymentDeclined: card declined for 9\n")
    assert "forklift" not in traceback


def test_two_backends_on_one_database_run_only_their_own_tasks(
    site: str, conn: psycopg.Connection[Any], procs: Procs
) -> None:
    from shop import tasks

    from forklift.django._compat import TaskResultDoesNotExist, TaskResultStatus, task_backends

    theirs = tasks.tally.enqueue(7)  # backend "reports", queue "default" as the other's
    ours = tasks.add.enqueue(1, 1)
    assert theirs.backend == "reports" and ours.backend == "default"
    _worker(procs, site, backend="default")
    assert _finished(ours).return_value == 2
    row = _row(conn, theirs.id)
    assert row is not None and (row["queue"], row["state"]) == ("default", "available")
    with pytest.raises(TaskResultDoesNotExist):
        task_backends["default"].get_result(theirs.id)
    with pytest.raises(TaskResultDoesNotExist):
        task_backends["reports"].get_result(ours.id)

    _worker(procs, site, backend="reports")
    done = _finished(theirs)
    assert (done.status, done.return_value, done.backend) == (TaskResultStatus.SUCCESSFUL, 70,
                                                              "reports")


def _events(result: Any) -> list[tuple[Any, ...]]:
    from shop.models import TaskEvent

    return list(TaskEvent.objects.filter(result_id=result.id).order_by("id").values_list(
        "signal", "status", "attempts", "errors"))


def test_a_retried_task_sends_task_started_per_attempt_and_task_finished_once(
    site: str, procs: Procs
) -> None:
    from django.test.utils import override_settings
    from shop import tasks

    from forklift.django._compat import TaskResultStatus

    with override_settings(TASKS=_tasks_setting(max_attempts=2)):
        try:
            twice = tasks.charge.enqueue(3)
        finally:
            _close_backends()
    _worker(procs, site)
    assert _finished(twice).attempts == 2
    wait_until(lambda: len(_events(twice)) == 3, timeout=30,
               message=lambda: f"signals: {_events(twice)}")
    first, second, finished = _events(twice)
    assert first[:3] == ("started", TaskResultStatus.RUNNING, 1) and first[3] == []
    assert second[:3] == ("started", TaskResultStatus.RUNNING, 2)
    assert [path for path, _ in second[3]] == ["shop.tasks.PaymentDeclined"]  # the first try's
    assert finished[:3] == ("finished", TaskResultStatus.FAILED, 2)
    assert [path for path, _ in finished[3]] == ["shop.tasks.PaymentDeclined"] * 2


def test_a_receiver_that_raises_is_logged_and_the_task_still_runs(
    site: str, procs: Procs
) -> None:
    from shop import tasks

    from forklift.django._compat import TaskResultStatus

    result = tasks.unlucky.enqueue()
    _worker(procs, site)
    done = _finished(result)
    assert (done.status, done.return_value) == (TaskResultStatus.SUCCESSFUL, "ran anyway")
    wait_until(lambda: "this receiver fails for shop.tasks.unlucky" in procs.logs(), timeout=30,
               message=lambda: f"the receiver's failure was not logged: {procs.logs()}")
    assert "a receiver of Django's task_started failed" in procs.logs()


def test_the_worker_runs_every_attempt_on_its_one_backend(
    site: str, conn: psycopg.Connection[Any], procs: Procs
) -> None:
    """Django's ``task_backends`` is context-local and the worker runs each attempt in a copy
    of its context: a runner asking it would make a backend, with a forklift app and a pool of
    its own, for every attempt, and the worker's connections would grow with the tasks run."""
    from shop import tasks

    def connections() -> int:
        row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname ="
                           " current_database() AND pid <> pg_backend_pid()").fetchone()
        return int(row[0]) if row else 0

    def run(n: int) -> int:
        results = [tasks.add.enqueue(i, 1) for i in range(n)]
        assert [_finished(r).return_value for r in results] == [i + 1 for i in range(n)]
        return connections()

    _worker(procs, site)
    warm = run(10)  # the worker's pools, the test's own connections
    after = run(40)
    assert after - warm <= 2, (warm, after)
