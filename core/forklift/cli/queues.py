"""`forklift queues list|show|explain|pause|resume|limit|rate|fair|aging|ceiling|scale` and
`forklift workers list`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from forklift.cli.format import stamp
from forklift.cli.keys import Burst, RateArg, rate_or_none
from forklift.cli.kit import Call, command, ident, out, safe

if TYPE_CHECKING:
    from forklift.ops import QueueInfo
    from forklift.ops.scale import QueueScale

queues_app = typer.Typer(
    help="Queues: list, show, explain, pause, resume, limit, rate, fair, aging, ceiling, scale.",
    no_args_is_help=True)
workers_app = typer.Typer(help="Workers: who runs what, heartbeats, drains.", no_args_is_help=True)

QueueName = Annotated[str, typer.Argument(help="The queue.")]
Create = Annotated[bool, typer.Option("--create", help="Set up a queue not seen yet.")]


def queue_line(q: QueueInfo) -> str:
    text = f"queue {ident(q.name)}: "
    if q.paused:
        text += f"[bold yellow]paused[/] by {ident(q.paused_by or '?')} since {stamp(q.paused_at)}"
        if q.pause_reason:
            text += f" ({safe(q.pause_reason)})"
        if q.pause_expires_at:
            text += f", until {stamp(q.pause_expires_at)}"
    else:
        text += "running"
    text += f"; concurrency {q.concurrency if q.concurrency is not None else 'unlimited'}"
    return text


def fullness(q: QueueInfo) -> str:
    """The ceiling state in words: ``full (depth)``, ``room``, or ``–`` without a ceiling."""
    if q.full_by is not None:
        return f"[bold red]full[/] ({q.full_by})"
    if q.ceiling_depth is None and q.ceiling_age is None:
        return "–"
    return "room"


@queues_app.command("list")
@command()
def queues_list(cx: Call) -> None:
    """Every queue with its pause, concurrency limit and retention (completed/cancelled/dead;
    depths: `forklift stats`)."""
    queues = cx.op.queues()
    kept = cx.op.retention()
    if cx.as_json:
        cx.show([{**q.to_json(), "retention": kept.for_queue(q.name)} for q in queues])
        return
    from rich.table import Table

    from forklift.cli.retention import window

    t = Table(box=None, header_style="bold", pad_edge=False)
    for col in ("queue", "paused", "by", "since", "until", "reason", "concurrency", "ceiling",
                "full", "retention"):
        t.add_column(col)
    for q in queues:
        expired = (not q.paused) and q.paused_flag
        t.add_row(
            ident(q.name),
            "[bold yellow]paused[/]" if q.paused else ("expired" if expired else "no"),
            ident(q.paused_by or "") if q.paused else "",
            stamp(q.paused_at) if q.paused else "",
            stamp(q.pause_expires_at) if q.paused and q.pause_expires_at else "",
            safe(q.pause_reason or "") if q.paused else "",
            str(q.concurrency) if q.concurrency is not None else "–",
            "–" if q.ceiling == "none" else q.ceiling,
            fullness(q),
            "/".join(window(v) for v in kept.for_queue(q.name).values()),
        )
    out.print(t)


def _ceiling_line(q: QueueInfo) -> str:
    if q.ceiling == "none":
        return f"queue {ident(q.name)}: no ceiling"
    return f"queue {ident(q.name)}: ceiling {q.ceiling}; now {_state_words(q)}"


def _state_words(q: QueueInfo) -> str:
    if q.measured_at is None:
        return "not measured yet (a running worker's leader measures it every second)"
    figures = []
    if q.measured_depth is not None:
        figures.append(f"depth {q.measured_depth}")
    if q.measured_age is not None:
        figures.append(f"oldest wait {q.measured_age:.1f}s")
    measured = f"{', '.join(figures) or 'nothing waiting'}, measured {stamp(q.measured_at)}"
    if q.full_by is not None:
        return (f"[bold red]full[/] (past its {q.full_by} ceiling; {measured}): enqueues are"
                " refused, wait or shed as their kind declares")
    return f"room ({measured})"


@queues_app.command("show")
@command()
def queues_show(cx: Call, name: QueueName) -> None:
    """One queue's settings and state: pause, limits, rate, aging, ceiling and whether it is
    full now."""
    q = cx.op.queues.get(name)
    if q is None:
        raise cx.usage(f"no queue named {name!r} has settings (forklift queues list shows"
                       " those that do)")
    if cx.as_json:
        cx.show(q.to_json())
        return
    out.print(queue_line(q))
    rate = _rate_line(q).split(": ", 1)[1]
    out.print(f"  {rate}; fair share {'on' if q.fair else 'off'}")
    out.print("  weighted: its jobs may take more than one slot (claimed only for slots free"
              " now; a heavy job waiting for room reserves it)" if q.weighted
              else "  not weighted (each job takes one slot)")
    out.print("  " + _aging_line(q).split(": ", 1)[1])
    out.print("  " + (f"ceiling {q.ceiling}; now {_state_words(q)}" if q.ceiling != "none"
                      else "no ceiling (enqueues are never refused for depth)"))


@queues_app.command("explain")
@command()
def queues_explain(cx: Call, name: QueueName) -> None:
    """Why is this queue not moving? Pause, limits, workers, backlog, in plain words."""
    from forklift.cli.jobs import print_explanation

    ex = cx.op.explain_queue(name)
    cx.show(ex, lambda e: print_explanation(f"[bold]queue {ident(e.queue)}[/]:", e))


@queues_app.command("pause")
@command(acts=True)
def queues_pause(
    cx: Call,
    name: QueueName,
    for_: Annotated[
        str | None, typer.Option("--for", help="Resume by itself after this long (e.g. 30m).")
    ] = None,
    until: Annotated[
        str | None, typer.Option("--until", help="Resume by itself at this time (ISO 8601).")
    ] = None,
    create: Annotated[
        bool, typer.Option("--create", help="Pause a queue that has no jobs or workers yet.")
    ] = False,
) -> None:
    """Pause a queue: no worker claims from it from its next claim on; running jobs go on."""
    q = cx.act(lambda op: op.pause(name, reason=cx.reason, for_=for_, until=until, create=create))
    cx.done(q, queue_line)


@queues_app.command("resume")
@command(acts=True)
def queues_resume(cx: Call, name: QueueName) -> None:
    """Resume a paused queue; its workers are woken at once."""
    cx.done(cx.act(lambda op: op.resume(name, reason=cx.reason)), queue_line)


@queues_app.command("limit")
@command(acts=True)
def queues_limit(
    cx: Call,
    name: QueueName,
    limit: Annotated[
        str, typer.Argument(help="Most jobs running at once over all workers, or 'none'.")
    ],
    create: Annotated[bool, typer.Option("--create", help="Set up a queue not seen yet.")] = False,
) -> None:
    """Set (or with 'none' lift) a queue's concurrency limit across all workers."""
    if limit.strip().lower() in ("none", "off", "unlimited"):
        value: int | None = None
    else:
        try:
            value = int(limit)
        except ValueError:
            raise cx.usage(f"limit {limit!r} is not a whole number or 'none'") from None
    q = cx.act(lambda op: op.set_concurrency(name, value, reason=cx.reason, create=create))
    cx.done(q, queue_line)


def _rate_line(q: QueueInfo) -> str:
    from forklift.cli.keys import rate_text
    from forklift.ops.rates import rate_info

    rate = rate_info(q.rate_limit, q.rate_per, q.rate_burst)
    return f"queue {ident(q.name)}: rate {rate_text(rate)}"


@queues_app.command("rate")
@command(acts=True)
def queues_rate(cx: Call, name: QueueName, rate: RateArg, burst: Burst = None,
                create: Create = False) -> None:
    """At most N starts of the queue's jobs per period over all workers (token bucket)."""
    q = cx.act(lambda op: op.set_queue_rate(name, rate_or_none(rate), burst=burst,
                                            reason=cx.reason, create=create))
    cx.done(q, _rate_line)


@queues_app.command("fair")
@command(acts=True)
def queues_fair(
    cx: Call,
    name: QueueName,
    fair: Annotated[str, typer.Argument(help="on: claims take turns across key values; off.")],
    create: Create = False,
) -> None:
    """Fair share: claims take turns across the values of the jobs' first key (e.g. tenants)."""
    word = fair.strip().lower()
    if word not in ("on", "off", "true", "false", "yes", "no"):
        raise cx.usage(f"fair share is 'on' or 'off', not {fair!r}")
    q = cx.act(lambda op: op.set_fair(name, word in ("on", "true", "yes"), reason=cx.reason,
                                      create=create))
    cx.done(q, lambda q: f"queue {ident(q.name)}: fair share {'on' if q.fair else 'off'}")


def _aging_line(q: QueueInfo) -> str:
    if q.priority_aging is None:
        return f"queue {ident(q.name)}: priority aging off"
    return (f"queue {ident(q.name)}: priority aging one step every {q.priority_aging:g}s,"
            f" up to priority {q.aging_top}")


@queues_app.command("aging")
@command(acts=True)
def queues_aging(
    cx: Call,
    name: QueueName,
    every: Annotated[str, typer.Argument(
        help="Raise a waiting job's priority one step per this much waiting (30s, 5m), or"
             " 'off'.")],
    top: Annotated[int, typer.Option(
        "--top", help="The highest priority aging raises a job to (lower runs first).")] = 0,
    create: Create = False,
) -> None:
    """Priority aging: a job's priority rises with its wait, so low priority never starves."""
    value = None if every.strip().lower() in ("off", "none") else every
    q = cx.act(lambda op: op.queues.set_aging(name, value, top=top, reason=cx.reason,
                                              create=create))
    cx.done(q, _aging_line)


@queues_app.command("ceiling")
@command(acts=True)
def queues_ceiling(
    cx: Call,
    name: QueueName,
    depth: Annotated[int | None, typer.Option(
        "--depth", help="Most jobs waiting to run; past it the queue is full.")] = None,
    age: Annotated[str | None, typer.Option(
        "--age", help="Longest the oldest waiting job may wait (30s, 5m); past it the queue"
        " is full.")] = None,
    off: Annotated[bool, typer.Option("--off", help="Lift the ceiling: the queue has room.")
                   ] = False,
    create: Create = False,
) -> None:
    """Backpressure: past a ceiling on depth and/or the oldest job's wait the queue is full,
    and enqueues are refused (QueueFull), wait or shed as their kind declares."""
    q = cx.act(lambda op: op.queues.set_ceiling(name, depth=depth, age=age, off=off,
                                                reason=cx.reason, create=create))
    cx.done(q, _ceiling_line)


@queues_app.command("scale")
@command()
def queues_scale(
    cx: Call,
    names: Annotated[list[str] | None, typer.Argument(
        metavar="[QUEUE]...", help="Queues (default: every queue with a row or a live worker).",
        show_default=False)] = None,
    per_worker: Annotated[int | None, typer.Option(
        "--per-worker", min=1, help="Slots one worker brings (default: the queue's live"
        " workers' --concurrency, else 10).")] = None,
    max_workers: Annotated[int, typer.Option(
        "--max", min=0, help="Most workers to ask for.")] = 100,
    target: Annotated[float, typer.Option(
        "--target", min=0.0, help="Seconds within which the waiting jobs should be cleared"
        " (above 0).")] = 30.0,
) -> None:
    """How many workers each queue needs now: the autoscaling signal (the same number the
    KEDA query and the forklift_queue_desired_workers gauge give), with its inputs."""
    if not target > 0:
        raise cx.usage(f"--target must be above 0 seconds, not {target:g}")
    found = cx.op.queues.scale(names or None, per_worker=per_worker, max_workers=max_workers,
                               target=target)
    if cx.as_json:
        cx.show([q.to_json() for q in found])
        return
    _print_scale(found, cx.op.schema, per_worker, max_workers, target)


def _print_scale(found: list[QueueScale], schema: str, per_worker: int | None,
                 max_workers: int, target: float) -> None:
    from rich.table import Table

    from forklift.ops.scale import scaler_query

    if not found:
        out.print("no queues: nothing has a row or a live worker yet")
        return
    t = Table(box=None, header_style="bold", pad_edge=False)
    for col in ("queue", "desired", "per_worker", "running", "waiting", "rate"):
        t.add_column(col, justify="left" if col == "queue" else "right")
    for q in found:
        t.add_row(ident(q.queue), str(q.desired), str(q.per_worker), str(q.running),
                  str(q.waiting), "–" if q.rate is None else f"{q.rate:.2f}/s")
    out.print(t)
    out.print("")
    out.print("KEDA postgresql trigger (targetQueryValue: 1), query per queue:")
    for q in found:
        out.print(safe(scaler_query(q.queue, schema=schema, per_worker=per_worker,
                                    max_workers=max_workers, target=target)), soft_wrap=True)


@workers_app.command("list")
@command()
def workers_list(cx: Call) -> None:
    """Registered workers: state, queues, slots in use, heartbeat age, drain cutoff, leader."""
    from forklift.cli.ops import workers_table

    workers = cx.op.workers()
    if cx.as_json:
        cx.show([w.to_json() for w in workers])
    else:
        out.print(workers_table(workers))
