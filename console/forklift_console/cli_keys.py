"""`forklift keys list|show|limit|rate|reset` and `forklift queues rate|fair`: per-key
concurrency, rate limits and fair share, read and changed through the operator API.

Registered by console/cli.py (keys) and console/cli_ops.py (the queues verbs); shares options
and errors with the other operator commands (console/opskit.py): exit 0 done, 1 refused or
failed, 2 usage error. Every change is audited and in force from each worker's next claim.
"""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from forklift.ops.keys import KeyInfo, ValueInfo
from forklift.ops.queues import QueueInfo
from forklift.ops.rates import Bucket, RateInfo
from forklift_console.opskit import (
    Actor,
    Dsn,
    Json,
    ReadOnlyOpt,
    Reason,
    Schema,
    emit_json,
    handled,
    operator,
    out,
    safe,
    seconds,
    usage,
)

keys_app = typer.Typer(help="Keys: per-key concurrency limits and rates across the fleet.",
                       no_args_is_help=True)

Name = Annotated[str, typer.Argument(help="The key's name (forklift keys list).")]
Burst = Annotated[int | None, typer.Option(
    "--burst", min=1, help="Most starts at once after a quiet spell (default: the rate's N).")]
Create = Annotated[bool, typer.Option("--create", help="Set up a queue not seen yet.")]


def rate_text(rate: RateInfo | None) -> str:
    if rate is None:
        return "–"
    return rate.text + (f" burst {rate.burst}" if rate.burst != rate.limit else "")


def bucket_text(b: Bucket | None) -> str:
    if b is None:
        return ""
    if b.next_slot_seconds <= 0:
        return f"{b.tokens:.0f} token(s)"
    return f"next slot in {seconds(b.next_slot_seconds)}"


def _limit_text(k: KeyInfo) -> str:
    text = str(k.concurrency) if k.concurrency is not None else "–"
    return text + (f" [yellow](set by {safe(k.set_by or '?')})[/]" if k.overridden else "")


def _print_key(k: KeyInfo) -> None:
    over = f"; set by {safe(k.set_by or '?')} (code: {k.declared})" if k.overridden else ""
    out.print(f"key {safe(k.name)}: concurrency {k.concurrency or 'unlimited'}, rate"
              f" {rate_text(k.rate)}{over}")


@keys_app.command("list")
def keys_list(read_only: ReadOnlyOpt = False, dsn: Dsn = None, schema: Schema = None,
              as_json: Json = False) -> None:
    """Every key workers recorded: limits in force, running and waiting jobs over its values."""
    with handled(as_json), operator(dsn, schema, None, read_only) as op:
        rows = op.keys()
    if as_json:
        emit_json([r.to_json() for r in rows])
        return
    if not rows:
        out.print("no keys recorded (a worker records the keys its kinds declare when it starts)")
        return
    t = Table(box=None, header_style="bold", pad_edge=False)
    for col in ("key", "kinds", "limit", "rate", "running", "waiting", "oldest", "values",
                "at limit"):
        t.add_column(col, overflow="fold")
    for k in rows:
        waiting = f"{k.queued:,}{'+' if k.queued_capped else ''}"
        t.add_row(safe(k.name), safe(", ".join(k.kinds)), _limit_text(k), rate_text(k.rate),
                  f"{k.running:,}", waiting, seconds(k.oldest_waiting_seconds), f"{k.values:,}",
                  f"{k.at_limit:,}")
    out.print(t)


def _value_row(v: ValueInfo) -> list[str]:
    limit = f"/{v.limit}" if v.limit is not None else ""
    holders = ", ".join(f"{h.job_id} on {safe(h.worker_id or '?')}" for h in v.holders[:3])
    if len(v.holders) > 3:
        holders += f" (+{len(v.holders) - 3})"
    return [safe(v.value), f"{v.running}{limit}", f"{v.queued:,}",
            seconds(v.oldest_waiting_seconds), holders, bucket_text(v.bucket)]


@keys_app.command("show")
def keys_show(
    name: Name,
    limit: Annotated[int, typer.Option(min=1, max=200, help="Most values shown.")] = 50,
    read_only: ReadOnlyOpt = False, dsn: Dsn = None, schema: Schema = None, as_json: Json = False,
) -> None:
    """One key, value by value: running against the limit, holders, waiting jobs, bucket."""
    with handled(as_json), operator(dsn, schema, None, read_only) as op:
        d = op.key(name, limit=limit)
    if as_json:
        emit_json(d.to_json())
        return
    _print_key(d.key)
    t = Table(box=None, header_style="bold", pad_edge=False)
    for col in ("value", "running", "waiting", "oldest", "holders (job on worker)", "rate"):
        t.add_column(col, overflow="fold")
    for v in d.values:
        t.add_row(*_value_row(v))
    out.print(t)
    if d.more_values:
        out.print(f"[dim]{d.more_values:,} more value(s): --limit shows more[/]")


def _limit_value(text: str, as_json: bool) -> int | None:
    if text.strip().lower() in ("none", "off", "unlimited"):
        return None
    try:
        return int(text)
    except ValueError:
        raise usage(f"limit {text!r} is not a whole number or 'none'", as_json) from None


@keys_app.command("limit")
def keys_limit(
    name: Name,
    limit: Annotated[str, typer.Argument(help="Most jobs per value running at once, or 'none'.")],
    reason: Reason = None, actor: Actor = None, read_only: ReadOnlyOpt = False, dsn: Dsn = None,
    schema: Schema = None, as_json: Json = False,
) -> None:
    """Set (or with 'none' lift) a key's concurrency limit; kept until `keys reset`."""
    with handled(as_json):
        value = _limit_value(limit, as_json)
        with operator(dsn, schema, actor, read_only) as op:
            k = op.set_key_limit(name, value, reason=reason)
    _emit(k, as_json)


@keys_app.command("rate")
def keys_rate(
    name: Name,
    rate: Annotated[str, typer.Argument(help="N per period: 100/s, 10/5s, 600/m, or 'none'.")],
    burst: Burst = None, reason: Reason = None, actor: Actor = None,
    read_only: ReadOnlyOpt = False, dsn: Dsn = None, schema: Schema = None,
    as_json: Json = False,
) -> None:
    """Set (or lift) a key's rate: at most N starts per period per value, fleet-wide."""
    with handled(as_json), operator(dsn, schema, actor, read_only) as op:
        k = op.set_key_rate(name, None if rate.strip().lower() == "none" else rate,
                            burst=burst, reason=reason)
    _emit(k, as_json)


@keys_app.command("reset")
def keys_reset(name: Name, reason: Reason = None, actor: Actor = None,
               read_only: ReadOnlyOpt = False, dsn: Dsn = None, schema: Schema = None,
               as_json: Json = False) -> None:
    """Back to the limits the code declares."""
    with handled(as_json), operator(dsn, schema, actor, read_only) as op:
        k = op.reset_key(name, reason=reason)
    _emit(k, as_json)


def _emit(k: KeyInfo, as_json: bool) -> None:
    if as_json:
        emit_json(k.to_json())
    else:
        _print_key(k)


# -- queues rate|fair (registered on the queues app by cli_ops) -------------------------------
def _emit_queue(q: QueueInfo, as_json: bool, what: str) -> None:
    if as_json:
        emit_json(q.to_json())
    else:
        out.print(f"queue {safe(q.name)}: {what}")


def queues_rate(
    name: Annotated[str, typer.Argument(help="The queue.")],
    rate: Annotated[str, typer.Argument(help="N per period: 100/s, 10/5s, 600/m, or 'none'.")],
    burst: Burst = None, reason: Reason = None, create: Create = False, actor: Actor = None,
    read_only: ReadOnlyOpt = False, dsn: Dsn = None, schema: Schema = None,
    as_json: Json = False,
) -> None:
    """At most N starts of the queue's jobs per period over all workers (token bucket)."""
    with handled(as_json), operator(dsn, schema, actor, read_only) as op:
        lifted = rate.strip().lower() in ("none", "off", "unlimited")
        q = op.set_queue_rate(name, None if lifted else rate, burst=burst, reason=reason,
                              create=create)
        flow = op.queue_flow(q.name)
    _emit_queue(q, as_json, f"rate {rate_text(flow.rate)}")


def queues_fair(
    name: Annotated[str, typer.Argument(help="The queue.")],
    fair: Annotated[str, typer.Argument(help="on: claims take turns across key values; off.")],
    reason: Reason = None, create: Create = False, actor: Actor = None,
    read_only: ReadOnlyOpt = False, dsn: Dsn = None, schema: Schema = None,
    as_json: Json = False,
) -> None:
    """Fair share: claims take turns across the values of the jobs' first key (e.g. tenants)."""
    with handled(as_json):
        word = fair.strip().lower()
        if word not in ("on", "off", "true", "false", "yes", "no"):
            raise usage(f"fair share is 'on' or 'off', not {fair!r}", as_json)
        with operator(dsn, schema, actor, read_only) as op:
            q = op.set_fair(name, word in ("on", "true", "yes"), reason=reason, create=create)
    _emit_queue(q, as_json, f"fair share {'on' if word in ('on', 'true', 'yes') else 'off'}")
