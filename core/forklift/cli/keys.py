"""`forklift keys list|show|limit|rate|reset`: per-key concurrency limits and rates, read and
changed through the operator API (`forklift queues rate|fair` are in cli/queues.py).

Registered by cli/main.py; shares options and errors with the other operator commands
(cli/kit.py): exit 0 done, 1 refused or failed, 2 usage error. Every change is audited
and in force from each worker's next claim.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from forklift.cli.format import plural, seconds
from forklift.cli.kit import Call, command, ident, out

if TYPE_CHECKING:
    from forklift.ops.keys import KeyInfo, ValueInfo
    from forklift.ops.rates import Bucket, RateInfo

keys_app = typer.Typer(help="Keys: per-key concurrency limits and rates across the fleet.",
                       no_args_is_help=True)

Name = Annotated[str, typer.Argument(help="The key's name (forklift keys list).")]
Burst = Annotated[int | None, typer.Option(
    "--burst", min=1, help="Most starts at once after a quiet spell (default: the rate's N).")]
RateArg = Annotated[str, typer.Argument(help="N per period: 100/s, 10/5s, 600/m, or 'none'.")]
NONE_WORDS = ("none", "off", "unlimited")


def rate_text(rate: RateInfo | None) -> str:
    if rate is None:
        return "–"
    return rate.text + (f" burst {rate.burst}" if rate.burst != rate.limit else "")


def bucket_text(b: Bucket | None) -> str:
    if b is None:
        return ""
    if b.next_slot_seconds <= 0:
        return plural(int(b.tokens), "token")
    return f"next slot in {seconds(b.next_slot_seconds)}"


def rate_or_none(text: str) -> str | None:
    """A rate argument as the operator API takes it: None lifts the rate."""
    return None if text.strip().lower() in NONE_WORDS else text


def _limit_text(k: KeyInfo) -> str:
    text = str(k.concurrency) if k.concurrency is not None else "–"
    return text + (f" [yellow](set by {ident(k.set_by or '?')})[/]" if k.overridden else "")


def key_line(k: KeyInfo) -> str:
    over = f"; set by {ident(k.set_by or '?')} (code: {k.declared})" if k.overridden else ""
    return (f"key {ident(k.name)}: concurrency {k.concurrency or 'unlimited'}, rate"
            f" {rate_text(k.rate)}{over}")


@keys_app.command("list")
@command()
def keys_list(cx: Call) -> None:
    """Every key workers recorded: limits in force, running and waiting jobs over its values."""
    rows = cx.op.keys()
    if cx.as_json:
        cx.show([r.to_json() for r in rows])
        return
    if not rows:
        out.print("no keys recorded (a worker records the keys its kinds declare when it starts)")
        return
    from rich.table import Table

    t = Table(box=None, header_style="bold", pad_edge=False)
    for col in ("key", "kinds", "limit", "rate", "running", "waiting", "oldest", "values",
                "at limit"):
        t.add_column(col, overflow="fold")
    for k in rows:
        waiting = f"{k.queued:,}{'+' if k.queued_capped else ''}"
        t.add_row(ident(k.name), ", ".join(ident(x) for x in k.kinds), _limit_text(k),
                  rate_text(k.rate), f"{k.running:,}", waiting, seconds(k.oldest_waiting_seconds),
                  f"{k.values:,}", f"{k.at_limit:,}")
    out.print(t)


def _value_row(v: ValueInfo) -> list[str]:
    limit = f"/{v.limit}" if v.limit is not None else ""
    holders = ", ".join(f"{h.job_id} on {ident(h.worker_id or '?')}" for h in v.holders[:3])
    if len(v.holders) > 3:
        holders += f" (+{len(v.holders) - 3})"
    return [ident(v.value), f"{v.running}{limit}", f"{v.queued:,}",
            seconds(v.oldest_waiting_seconds), holders, bucket_text(v.bucket)]


@keys_app.command("show")
@command()
def keys_show(
    cx: Call,
    name: Name,
    limit: Annotated[int, typer.Option(min=1, max=200, help="Most values shown.")] = 50,
) -> None:
    """One key, value by value: running against the limit, holders, waiting jobs, bucket."""
    d = cx.op.key(name, limit=limit)
    if cx.as_json:
        cx.show(d)
        return
    from rich.table import Table

    out.print(key_line(d.key))
    t = Table(box=None, header_style="bold", pad_edge=False)
    for col in ("value", "running", "waiting", "oldest", "holders (job on worker)", "rate"):
        t.add_column(col, overflow="fold")
    for v in d.values:
        t.add_row(*_value_row(v))
    out.print(t)
    if d.more_values:
        out.print(f"[dim]{plural(d.more_values, 'more value')}: --limit shows more[/]")


@keys_app.command("limit")
@command(acts=True)
def keys_limit(
    cx: Call,
    name: Name,
    limit: Annotated[str, typer.Argument(help="Most jobs per value running at once, or 'none'.")],
) -> None:
    """Set (or with 'none' lift) a key's concurrency limit; kept until `keys reset`."""
    if limit.strip().lower() in NONE_WORDS:
        value: int | None = None
    else:
        try:
            value = int(limit)
        except ValueError:
            raise cx.usage(f"limit {limit!r} is not a whole number or 'none'") from None
    cx.done(cx.act(lambda op: op.set_key_limit(name, value, reason=cx.reason)), key_line)


@keys_app.command("rate")
@command(acts=True)
def keys_rate(cx: Call, name: Name, rate: RateArg, burst: Burst = None) -> None:
    """Set (or lift) a key's rate: at most N starts per period per value, fleet-wide."""
    k = cx.act(lambda op: op.set_key_rate(name, rate_or_none(rate), burst=burst,
                                          reason=cx.reason))
    cx.done(k, key_line)


@keys_app.command("reset")
@command(acts=True)
def keys_reset(cx: Call, name: Name) -> None:
    """Back to the limits the code declares."""
    cx.done(cx.act(lambda op: op.reset_key(name, reason=cx.reason)), key_line)
