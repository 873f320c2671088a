"""A Django tasks backend: ``@task`` functions enqueue into forklift and run on ``forklift worker``.

Settings::

    TASKS = {
        "default": {
            "BACKEND": "forklift.django.ForkliftBackend",
            "QUEUES": ["default", "emails"],
            "OPTIONS": {"enqueue_on_commit": True, "max_attempts": 3},
        }
    }

Works with Django's own ``django.tasks`` (Django 6) and with the ``django-tasks`` package that
backports it to Django 5.2 (same classes, same API). forklift's tables live in Django's
PostgreSQL database by default, and with ``enqueue_on_commit`` (the default) a task is inserted
on Django's own connection, inside whatever transaction is open: it exists exactly when that
transaction commits, and workers are woken at commit. Workers run
``forklift worker --app forklift.django.worker:app`` (see :mod:`forklift.django.worker`).

Results read back as Django's own backends record them (statuses, ``TaskError`` class paths
and tracebacks), for every recorded task, and the worker sends ``task_started`` and
``task_finished``. Each backend has forklift kinds of its own, so backends sharing a database
and queue names never run each other's tasks.
"""

from __future__ import annotations

from inspect import iscoroutinefunction
from typing import Any, TypeVar

from forklift._app.app import Forklift
from forklift._base.errors import ConfigError
from forklift._base.retry import Fail
from forklift._db.connections import describe_target
from forklift.django._compat import (
    BaseTaskBackend,
    Task,
    TaskResult,
    TaskResultDoesNotExist,
    normalize_json,
    task_enqueued,
)
from forklift.django._kinds import TaskCall, kinds_of
from forklift.django._missing import missing_task
from forklift.django._options import DjangoConfigError, Options, dsn_of, parse
from forklift.django._results import TaskFailed, to_result
from forklift.django._runner import declare, resolve

__all__ = ["DjangoConfigError", "ForkliftBackend", "TaskCall", "TaskFailed"]

T = TypeVar("T")

# The server a session is on, wherever it connected from (socket or TCP, any host name).
_SERVER_SQL = ("SELECT current_database(), current_setting('port'), pg_postmaster_start_time(),"
               " to_regclass(%s) IS NOT NULL")


class ForkliftBackend(BaseTaskBackend):  # type: ignore[misc]  # Django ships no type hints
    supports_defer = True
    supports_async_task = True
    supports_get_result = True
    supports_priority = True

    def __init__(self, alias: str, params: dict[str, Any]) -> None:
        super().__init__(alias, params)
        self.settings: Options = parse(alias, params)
        self.app = self._make_app()
        self.kinds = kinds_of(alias)
        declare(self.app, self, self.settings.default_queue)
        # Whether Django's database is forklift's: true by construction unless OPTIONS gave
        # forklift a database of its own; then checked once, at the first enqueue.
        self._shared: bool | None = None if (self.settings.dsn or self.settings.app) else True

    def _make_app(self) -> Forklift:
        o = self.settings
        if o.app is not None:
            from forklift._app.loader import load_app

            try:
                return load_app(o.app)
            except ConfigError as exc:
                raise DjangoConfigError(f"{o.setting('app')}: {exc.message}",
                                        setting=o.setting("app")) from None
        return Forklift(o.dsn or dsn_of(o), schema=o.schema)

    def close(self) -> None:
        """Close forklift's connection pool (Django closes its own connections)."""
        self.app.close()

    # -- Django's API -------------------------------------------------------------------------
    def enqueue(self, task: Task[Any, T], args: Any, kwargs: Any) -> TaskResult[T]:
        self.validate_task(task)
        call = {
            "task": task.module_path,
            "args": normalize_json(list(args)),  # Django's own rule for what may be passed
            "kwargs": normalize_json(dict(kwargs)),
            "backend": self.alias,
        }
        kind = self.app.kind(self.kinds.async_ if iscoroutinefunction(task.func)
                             else self.kinds.sync)
        options: dict[str, Any] = {
            "queue": task.queue_name,
            "priority": -task.priority,  # Django: higher runs first; forklift: lower
            "max_attempts": self.settings.max_attempts,
        }
        if task.run_after is not None:
            options["at"] = _aware(task.run_after)
        if self.settings.enqueue_on_commit:
            job = kind.enqueue(call, conn=self._django_connection(), **options)
        else:
            job = kind.enqueue(call, **options)
        result: TaskResult[T] = to_result(job, task, self.alias)
        task_enqueued.send(type(self), task_result=result)
        return result

    def get_result(self, result_id: str) -> TaskResult[Any]:
        """The task's result as forklift has it now (committed state, read on forklift's pool)."""
        try:
            job_id = int(result_id)
        except (TypeError, ValueError):
            raise TaskResultDoesNotExist(result_id) from None
        job = self.app.get_job(job_id)
        # Another backend's jobs (its own kinds) are not this backend's results.
        if job is None or job.kind not in self.kinds or not isinstance(job.args, dict):
            raise TaskResultDoesNotExist(result_id)
        path = str(job.args.get("task"))
        try:
            task = resolve(path)
        except Fail:  # renamed or removed since: the result is still there to read
            task = missing_task(self, path, job.queue, -job.priority)
        return to_result(job, task, self.alias)

    # -- the shared transaction ---------------------------------------------------------------
    def _django_connection(self) -> Any:
        """Django's psycopg connection, in whatever transaction Django has open on it."""
        from django.db import connections

        wrapper = connections[self.settings.database]
        wrapper.ensure_connection()
        raw = wrapper.connection
        if self._shared is None:
            self._shared = self._same_server(raw)
        return raw

    def _same_server(self, raw: Any) -> bool:
        o = self.settings
        table = f"{self.app.schema}.jobs"
        theirs = raw.execute(_SERVER_SQL, (table,)).fetchone()
        with self.app.pool().connection() as own:
            ours = own.execute(_SERVER_SQL, (table,)).fetchone()
        if theirs is None or ours is None or tuple(theirs)[:3] != tuple(ours)[:3]:
            where = o.setting("enqueue_on_commit")
            raise DjangoConfigError(
                f"{where}: forklift's database ({describe_target(self.app.dsn)}) is not"
                f" DATABASES[{o.database!r}], so a task cannot join Django's transaction; set it"
                " False, or drop OPTIONS['dsn'] / ['app'] to keep forklift in Django's database",
                setting=where,
            )
        return True


def _aware(when: Any) -> Any:
    from django.utils import timezone

    return when if timezone.is_aware(when) else timezone.make_aware(when)
