"""The console shows weights: the Kinds screen puts a weighted kind's weight after its name
(``w3``: the most slots one of its jobs counted takes), and the job detail names a weighted
job's weight. Pilot against a real PostgreSQL."""

from __future__ import annotations

from typing import Any

from console_seed import drive, loaded, make_app, on_screen
from textual.pilot import Pilot
from textual.widgets import Static

from forklift import Forklift, JobContext
from forklift.ops.kinds import KindRow
from forklift_console.app import ConsoleApp
from forklift_console.screens.job import JobScreen
from forklift_console.screens.kinds import KindsScreen, kind_cell

app = Forklift()


@app.job(name="wcon.export", queue="wcon", weight=3)
def export(ctx: JobContext, payload: dict[str, Any]) -> None:
    return None


@app.job(name="wcon.mail", queue="wcon")
def mail(ctx: JobContext, payload: dict[str, Any]) -> None:
    return None


def test_kind_cell_keeps_the_figures_whole() -> None:
    assert kind_cell(KindRow(queue="q", kind="export", weight=3)).plain == "export w3"
    assert kind_cell(KindRow(queue="q", kind="send", batch=10, weight=2)).plain == "send ×10 w2"
    long = kind_cell(KindRow(queue="q", kind="a.very.long.kind.name.indeed", weight=12)).plain
    assert long.endswith(" w12") and len(long) <= 18
    assert kind_cell(KindRow(queue="q", kind="plain")).plain == "plain"


def test_kinds_screen_and_job_detail_name_the_weight(dsn: str) -> None:
    app.use(dsn)
    try:
        heavy = export.enqueue({})
        light = mail.enqueue({})
    finally:
        app.close()

    async def scenario(console: ConsoleApp, pilot: Pilot[Any]) -> None:
        screen = await on_screen(console, KindsScreen)
        await loaded(console, screen)
        rows = screen._rows
        assert kind_cell(rows["wcon\x1fwcon.export"]).plain == "wcon.export w3"
        assert kind_cell(rows["wcon\x1fwcon.mail"]).plain == "wcon.mail"
        assert "w3" in screen.HELP
        console.push_screen(JobScreen(heavy.id))
        detail = await on_screen(console, JobScreen)
        await loaded(console, detail)
        assert "weight 3" in str(detail.query_one("#head", Static).render())
        console.pop_screen()
        console.push_screen(JobScreen(light.id))
        plain = await on_screen(console, JobScreen)
        await loaded(console, plain)
        assert "weight" not in str(plain.query_one("#head", Static).render())

    drive(make_app(dsn, start="kinds"), scenario)
