"""Settings of the small Django site the Django backend's tests run (tests/integrations/test_django*.py).

The database comes from ``FORKLIFT_DJANGO_TEST_DSN`` (a conninfo): the test's own database in
a worker subprocess; the test process points Django at each test's database itself.
"""

import importlib.util
import os

from psycopg.conninfo import conninfo_to_dict

_db = conninfo_to_dict(os.environ.get("FORKLIFT_DJANGO_TEST_DSN", "dbname=unset"))

SECRET_KEY = "forklift tests"
USE_TZ = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
INSTALLED_APPS = ["shop"]
if importlib.util.find_spec("django.tasks") is None:  # Django 5.2: the django-tasks backport
    INSTALLED_APPS.append("django_tasks")

DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": _db.get("dbname", ""),
        "USER": _db.get("user", ""),
        "PASSWORD": _db.get("password", ""),
        "HOST": _db.get("host", ""),
        "PORT": _db.get("port", ""),
    }
}

_ATTEMPTS = int(os.environ.get("SHOP_MAX_ATTEMPTS", "3"))
# Two backends on one database, sharing the queue name "default": each runs only its own tasks
# (a worker picks its backend with FORKLIFT_DJANGO_BACKEND).
TASKS = {
    "default": {
        "BACKEND": "forklift.django.ForkliftBackend",
        "QUEUES": ["default", "emails"],
        "OPTIONS": {"max_attempts": _ATTEMPTS},
    },
    "reports": {
        "BACKEND": "forklift.django.ForkliftBackend",
        "QUEUES": ["default"],
        "OPTIONS": {"max_attempts": _ATTEMPTS},
    },
}
