"""`forklift bench`: forklift against a plain-SQL reference, in one run, on one server.

The measuring lives in core (:mod:`forklift.cli.bench`, importable for scripts); this module is the
command's options and its table. Figures are printed, never judged by the exit code: it is 0
when every scenario ran and 1 when one failed to run.
"""

from __future__ import annotations

import dataclasses
import signal
from typing import Annotated

import typer

from forklift.cli.kit import Call, Dsn, command, emit_json, err, out, safe

Quick = Annotated[
    bool, typer.Option("--quick", help="Smaller runs (about a minute) for a first look.")
]
Only = Annotated[
    str | None,
    typer.Option("--only", help="Comma-separated scenarios: e2e, c1, enqueue, enqueue_16, bulk,"
                                " latency, e2e_4w, e2e_2w, e2e_8w, stats, claim_backlog, memory,"
                                " flow_keyed, flow_fair, wake, unused (default: all of these); fleet"
                                " (1-16 worker processes), sustained (steady rates), horizon"
                                " (steady rate, horizon held): run only when named."),
]
Sustain = Annotated[
    float | None,
    typer.Option("--sustain", min=1.0, help="Seconds of each steady run (sustained) and of the"
                                            " stretches before and after the hold (horizon);"
                                            " default 60."),
]
Hold = Annotated[
    float | None,
    typer.Option("--hold", min=1.0, help="Seconds the horizon scenario holds the xmin horizon;"
                                         " default 300."),
]
Rate = Annotated[
    int | None,
    typer.Option("--rate", min=1, help="Jobs a second of the steady producer (sustained's low"
                                       " rate, horizon); default 800."),
]


@command(database=False)
def bench(cx: Call, dsn: Dsn = None, quick: Quick = False, only: Only = None,
          sustain: Sustain = None, hold: Hold = None, rate: Rate = None) -> None:
    """Measure forklift against plain SQL on the same server: throughput, latency, memory, CPU.

    Each scenario runs in a fresh database it creates on the server and drops afterwards (the
    role needs CREATEDB). The server: --dsn, FORKLIFT_DSN or DATABASE_URL; else a throwaway
    embedded server, removed with its data when the bench ends.
    """
    from rich.table import Table

    from forklift.cli import bench as b

    names = ([n.strip() for n in only.split(",") if n.strip()] if only
             else [s.name for s in b.registry.scenarios() if s.default])
    unknown = sorted(set(names) - set(b.SCENARIOS))
    if unknown or not names:
        what = (f"unknown scenario{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}"
                if unknown else "no scenario given")
        raise cx.usage(f"{what}: choose from {', '.join(b.SCENARIOS)}")
    sizes = b.QUICK if quick else b.FULL
    sizes = dataclasses.replace(
        sizes, sustained_seconds=sustain or sizes.sustained_seconds,
        horizon_seconds=hold or sizes.horizon_seconds, sustained_rate=rate or sizes.sustained_rate)
    # SIGTERM ends the bench as Ctrl-C does: its subprocesses stopped, its scratch databases
    # and a throwaway server removed (by default Python would exit on the spot, leaving them).
    previous = signal.signal(signal.SIGTERM, _interrupted)
    try:
        report = b.run_bench(
            dsn, scenarios=names, quick=quick, sizes=sizes,
            progress=None if cx.as_json else (lambda m: err.print(f"[dim]{safe(m)}[/]")),
        )
    finally:
        signal.signal(signal.SIGTERM, previous)
    if cx.as_json:
        emit_json(report.to_json())
    else:
        for line in b.header_lines(report):
            out.print(safe(line))
        table = Table(show_edge=False, pad_edge=False)
        for name, justify in (("figure", "left"), ("forklift", "right"),
                              ("reference (same run)", "right"), ("ratio", "right"),
                              ("target", "left"), ("", "left")):
            table.add_column(name, justify=justify)  # type: ignore[arg-type]
        for row in b.table_rows(report):
            verdict = row[5]
            style = "green" if verdict == "PASS" else "bold red" if verdict else ""
            table.add_row(*(safe(c) for c in row[:5]), f"[{style}]{verdict}[/]" if style else "")
        out.print(table)
        for name, problem in report.errors.items():
            err.print(f"[bold red]scenario {safe(name)} failed:[/] {safe(problem)}")
    if report.errors:
        raise typer.Exit(1)


def _interrupted(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")
