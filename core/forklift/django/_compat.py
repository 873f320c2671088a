"""Django's task API: ``django.tasks`` (Django 6+) or its reference backport ``django_tasks``.

Both ship the same classes under the same names (DEP 14); only the exception names differ.
"""

from __future__ import annotations

from typing import Any

try:  # Django >= 6.0
    from django.tasks import TaskContext, TaskResult, TaskResultStatus, task_backends
    from django.tasks.backends.base import BaseTaskBackend
    from django.tasks.base import Task, TaskError
    from django.tasks.exceptions import InvalidTask as InvalidTaskError
    from django.tasks.exceptions import TaskResultDoesNotExist
    from django.tasks.signals import task_enqueued

    SOURCE = "django.tasks"
except ImportError:  # Django 5.2 (Python < 3.12): the django-tasks package
    from django_tasks import TaskContext, TaskResult, TaskResultStatus, task_backends
    from django_tasks.backends.base import BaseTaskBackend
    from django_tasks.base import Task, TaskError
    from django_tasks.exceptions import InvalidTaskError, TaskResultDoesNotExist
    from django_tasks.signals import task_enqueued

    SOURCE = "django_tasks"


def normalize_json(value: Any) -> Any:
    """What Django stores of a task's arguments and return value (its own normaliser)."""
    if SOURCE == "django.tasks":
        from django.tasks.utils import normalize_json as normalize
    else:
        from django_tasks.utils import normalize_json as normalize
    return normalize(value)


__all__ = [
    "SOURCE",
    "BaseTaskBackend",
    "InvalidTaskError",
    "Task",
    "TaskContext",
    "TaskError",
    "TaskResult",
    "TaskResultDoesNotExist",
    "TaskResultStatus",
    "normalize_json",
    "task_backends",
    "task_enqueued",
]
