"""The backpressure tests' app: kinds of one queue that raise, wait or shed when it is full,
one of another queue, and a producer a test runs in several processes at once."""

from __future__ import annotations

from typing import Any

from forklift import Forklift, JobContext, QueueFull, Shed, Wait

app = Forklift(pool_size=2)

QUEUE = "bp"


@app.job(name="bp.refuse", queue=QUEUE)
def refuse(ctx: JobContext, payload: dict[str, Any]) -> None:
    pass


@app.job(name="bp.shed", queue=QUEUE, priority=5, on_full=Shed(at_or_below=5))
def shed(ctx: JobContext, payload: dict[str, Any]) -> None:
    pass


@app.job(name="bp.wait", queue=QUEUE, on_full=Wait(30))
def wait(ctx: JobContext, payload: dict[str, Any]) -> None:
    pass


@app.job(name="bp.elsewhere", queue="bp_other")
def elsewhere(ctx: JobContext, payload: dict[str, Any]) -> None:
    pass


def produce(dsn: str, producer: int, offered: int, out: Any) -> None:
    """Offer jobs one enqueue at a time until ``STOP_AFTER`` of them were refused (or
    ``offered`` in all); put (producer, taken ids, refused, taken after the first refusal) on
    ``out``. Run in a process of its own."""
    app.use(dsn)
    app.pool()  # opened before the first offer
    taken: list[int] = []
    refused = late = 0
    for n in range(offered):
        try:
            taken.append(refuse.enqueue({"p": producer, "n": n}).id)
            late += refused > 0
        except QueueFull:
            refused += 1
            if refused == STOP_AFTER:
                break
    app.close()
    out.put((producer, taken, refused, late))


#: A producer stops after this many refusals: enough to see that the news stays.
STOP_AFTER = 20


app.outbox.sink("bp.topic", refuse)
