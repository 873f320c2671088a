from django.db import models


class Order(models.Model):
    status = models.CharField(max_length=20, default="new")


class TaskEvent(models.Model):
    """A task_started or task_finished signal as the worker received it (shop.signals)."""

    result_id = models.CharField(max_length=64)
    signal = models.CharField(max_length=20)
    backend = models.CharField(max_length=64)
    status = models.CharField(max_length=20)
    attempts = models.IntegerField()
    errors = models.JSONField(default=list)  # [exception_class_path, traceback] per error
    return_value = models.JSONField(null=True)
