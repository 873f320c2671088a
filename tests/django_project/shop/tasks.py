"""The site's tasks, written as any Django project writes them."""

from typing import Any

try:
    from django.tasks import TaskContext, task
except ImportError:  # Django 5.2
    from django_tasks import TaskContext, task

from shop.models import Order


@task
def add(a: int, b: int) -> int:
    return a + b


@task
async def add_later(a: int, b: int) -> int:
    return a + b


@task(queue_name="emails", priority=10)
def send_receipt(to: str) -> str:
    return f"sent to {to}"


@task
def process_order(order_id: int) -> str:
    order = Order.objects.get(pk=order_id)
    order.status = "processed"
    order.save()
    return order.status


@task
def explode(message: str) -> None:
    raise ValueError(message)


@task(takes_context=True)
def which_attempt(context: TaskContext, tag: str) -> dict[str, Any]:
    return {"tag": tag, "attempt": context.attempt, "id": context.task_result.id}


@task
def returns_a_set() -> Any:
    return {1, 2}


@task
def unlucky() -> str:
    return "ran anyway"  # though a task_started receiver raised (shop.signals)


class PaymentDeclined(Exception):
    pass


@task
def charge(amount: int) -> None:
    raise PaymentDeclined(f"card declined for {amount}")


@task
async def charge_later(amount: int) -> None:
    raise PaymentDeclined(f"card declined for {amount}")


@task(backend="reports")
def tally(n: int) -> int:
    return n * 10
