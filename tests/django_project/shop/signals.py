"""Receivers of Django's task signals: each records what it was sent (shop.models.TaskEvent)."""

from typing import Any

try:
    from django.tasks import TaskResultStatus
    from django.tasks.signals import task_finished, task_started
except ImportError:  # Django 5.2
    from django_tasks import TaskResultStatus
    from django_tasks.signals import task_finished, task_started

from shop.models import TaskEvent


def _record(signal: str, task_result: Any) -> None:
    TaskEvent.objects.create(
        result_id=task_result.id, signal=signal, backend=task_result.backend,
        status=task_result.status, attempts=task_result.attempts,
        errors=[[e.exception_class_path, e.traceback] for e in task_result.errors],
        return_value=(task_result.return_value
                      if task_result.status == TaskResultStatus.SUCCESSFUL else None),
    )


def on_started(sender: type, task_result: Any, **kwargs: Any) -> None:
    _record("started", task_result)
    if task_result.task.module_path == "shop.tasks.unlucky":
        raise RuntimeError("this receiver fails for shop.tasks.unlucky")


def on_finished(sender: type, task_result: Any, **kwargs: Any) -> None:
    _record("finished", task_result)


def connect() -> None:
    task_started.connect(on_started, dispatch_uid="shop.started")
    task_finished.connect(on_finished, dispatch_uid="shop.finished")
