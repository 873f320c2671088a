"""The forklift app a worker runs Django tasks with.

    DJANGO_SETTINGS_MODULE=mysite.settings forklift worker --app forklift.django.worker:app

Importing this module sets Django up (``django.setup()``, from ``DJANGO_SETTINGS_MODULE``) and
takes the app of the ``TASKS`` backend named by ``FORKLIFT_DJANGO_BACKEND`` (default
``default``). With ``OPTIONS['app']`` that is your own forklift app, so one worker runs your
kinds and your Django tasks. Tasks are imported by module path when they first run; nothing
needs to be listed. The worker serves the backend's first queue unless ``--queues`` says more.
"""

from __future__ import annotations

import os

import django

from forklift._app.app import Forklift
from forklift._base.errors import ConfigError


def backend_app(alias: str | None = None) -> Forklift:
    """The forklift app of the ``TASKS`` backend ``alias`` (Django is set up first)."""
    django.setup()
    from forklift.django import ForkliftBackend
    from forklift.django._compat import task_backends

    name = alias or os.environ.get("FORKLIFT_DJANGO_BACKEND") or "default"
    backend = task_backends[name]
    if not isinstance(backend, ForkliftBackend):
        raise ConfigError(
            f"TASKS[{name!r}]['BACKEND'] is {type(backend).__module__}.{type(backend).__name__},"
            " not forklift.django.ForkliftBackend"
        )
    return backend.app


def __getattr__(name: str) -> Forklift:
    # ``app`` is made when first asked for (``--app forklift.django.worker:app``), so importing
    # the module sets nothing up.
    if name == "app":
        app = backend_app()
        globals()["app"] = app
        return app
    raise AttributeError(name)
