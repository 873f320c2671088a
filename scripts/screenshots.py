"""Regenerate screenshots/ : the README's console screenshots, taken of the real demo.

    python scripts/screenshots.py [--out screenshots] [--only NAME ...]

What ``forklift demo`` runs, on a throwaway embedded server in a temporary home: its two real
workers running the demo kinds, its producer (jobs, a batch every minute), its cron schedule and
paced backfill, and the console as the demo opens it (the same header, refreshed every second).
Screen by screen the script waits, with a deadline, until the screen shows what its screenshot
is about (dead letters grouped, a worker draining with jobs in flight, a backfill under way),
saves an SVG with Textual's own screenshot and converts it to PNG with ``rsvg-convert``
(Debian: librsvg2-bin and a monospace font such as fonts-dejavu-core). The server is stopped
and its data deleted afterwards, whatever happened.

The snapshot tests (tests/console/test_console_snapshots.py) check the same screens on a seeded,
frozen database; these pictures are of live traffic, so they differ from run to run.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SIZE = (120, 36)
#: The longest a screen may take to show what its screenshot is about.
DEADLINE = 150.0


@contextmanager
def throwaway_server() -> Iterator[str]:
    """An embedded server in a temporary home, stopped and deleted on the way out; it says
    so if anything of it is left (its processes, data kept outside the home as root)."""
    from forklift import embedded

    home = Path(tempfile.mkdtemp(prefix="forklift-screenshots-")).resolve()
    home.chmod(0o755)  # a root-run server's own account must reach it (no copy elsewhere)
    # Where a root-run server keeps the data of a home it cannot reach (forklift.embedded).
    outside = EMBEDDED / hashlib.sha256(str(home).encode()).hexdigest()[:16]
    try:
        yield embedded.ensure_server(home)
    finally:
        embedded.remove_server(home)
        shutil.rmtree(home, ignore_errors=True)
        left = [str(p) for p in (home, outside) if p.exists()] + [
            f"process {pid}" for pid in server_processes(home)]
        if left:
            raise SystemExit(f"screenshots: the demo server left {', '.join(left)}")


EMBEDDED = Path("/var/lib/forklift/embedded")


def server_processes(home: Path) -> list[int]:
    """PostgreSQL processes still running on data under ``home``."""
    pids = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            if str(home).encode() in (proc / "cmdline").read_bytes():
                pids.append(int(proc.name))
        except OSError:
            continue
    return pids


async def until(pilot: Any, what: str, check: Callable[[], bool]) -> None:
    """Wait for ``check`` with a deadline, letting the console refresh meanwhile."""
    deadline = time.monotonic() + DEADLINE
    while not check():
        if time.monotonic() > deadline:
            raise SystemExit(f"screenshots: {what} did not happen within {DEADLINE:g}s")
        await pilot.pause(0.25)


def table(app: Any, table_id: str) -> Any:
    from forklift_console.widgets.table import LiveTable

    return app.screen.query_one(f"#{table_id}", LiveTable)


def rendered(app: Any, selector: str) -> str:
    return str(app.screen.query_one(selector).render())


async def screen(pilot: Any, key: str, mode: str) -> Any:
    await pilot.press(key)
    app = pilot.app
    await until(pilot, f"the {mode} screen", lambda: app.current_mode == mode
                and getattr(app.screen, "loads", 0) > 0)
    return app.screen


async def rows(pilot: Any, table_id: str, n: int, what: str) -> Any:
    t = table(pilot.app, table_id)
    t.focus()
    await until(pilot, what, lambda: len(t.keys) >= n)
    return t


# -- the shots, in the order they are taken (later ones build on earlier ones) ---------------
async def overview(pilot: Any, engine: Any) -> None:
    app = await screen(pilot, "1", "overview")
    await until(pilot, "an alert on the overview",
                lambda: app.query_one("#alerts").option_count > 0
                and "2 live" in rendered(pilot.app, "#totals"))


async def queues(pilot: Any, engine: Any) -> None:
    await screen(pilot, "2", "queues")
    t = await rows(pilot, "queues", 4, "four queues")
    t.move_to_key("mail")


async def jobs(pilot: Any, engine: Any) -> None:
    await screen(pilot, "3", "jobs")
    await rows(pilot, "jobs", 20, "a page of jobs")


async def job(pilot: Any, engine: Any) -> None:
    from textual.widgets import Input

    from forklift_console.screens.job import JobScreen

    await screen(pilot, "3", "jobs")
    await pilot.press("slash")
    pilot.app.screen.query_one("#filter", Input).value = "kind:demo.export state:running"
    await pilot.press("enter")
    await rows(pilot, "jobs", 1, "a running export")
    await pilot.press("enter")
    await until(pilot, "the job's detail", lambda: isinstance(pilot.app.screen, JobScreen)
                and pilot.app.screen.loads > 0 and "running on worker" in rendered(pilot.app,
                                                                                  "#why"))


async def back_to_jobs(pilot: Any) -> None:
    from textual.widgets import Input

    await pilot.press("escape")
    await screen(pilot, "3", "jobs")
    await pilot.press("slash")
    pilot.app.screen.query_one("#filter", Input).value = ""
    await pilot.press("enter")


async def dead(pilot: Any, engine: Any) -> None:
    await back_to_jobs(pilot)
    await screen(pilot, "4", "dead")
    await rows(pilot, "groups", 2, "two dead-letter groups")


async def dead_requeue(pilot: Any, engine: Any) -> None:
    from forklift_console.screens.modals import ConfirmScreen

    await screen(pilot, "4", "dead")
    await rows(pilot, "groups", 2, "two dead-letter groups")
    await pilot.press("r")
    await until(pilot, "the requeue dialog", lambda: isinstance(pilot.app.screen, ConfirmScreen))


async def workers(pilot: Any, engine: Any) -> None:
    from forklift_console import demo_app
    from forklift_console.demo import EXPORT, EXPORT_SECONDS

    app = pilot.app
    if hasattr(app.screen, "plan"):  # the requeue dialog: type the count, requeue (audited)
        await pilot.press(*str(app.screen.plan.count), "enter")
    await screen(pilot, "5", "workers")
    t = table(app, "workers")
    t.focus()
    await until(pilot, "the demo's two workers", lambda: len(
        [k for k in t.keys if engine.owns(k)]) == 2)
    worker = next(k for k in t.keys if engine.owns(k))
    # Long exports on every slot, so the drained worker has jobs in flight to show.
    export = demo_app.app.kind(EXPORT)
    for n in [n for n in range(500) if random.Random(n).uniform(*EXPORT_SECONDS) > 30][:10]:
        export.enqueue({"n": n})
    t.move_to_key(worker)
    await until(pilot, "an export on the worker", lambda: t.move_to_key(worker)
                and EXPORT in rendered(app, "#inflight"))
    await pilot.press("d")
    await until(pilot, "the drain", lambda: "DRAINING: cutoff in" in rendered(app, "#inflight")
                and "interrupted" in rendered(app, "#inflight"))


async def audit(pilot: Any, engine: Any) -> None:
    await screen(pilot, "6", "audit")
    await rows(pilot, "audit", 2, "two audited actions")


async def batches(pilot: Any, engine: Any) -> None:
    app = await screen(pilot, "7", "batches")
    await rows(pilot, "batches", 1, "a batch")
    await until(pilot, "a batch under way", lambda: any(
        b.settled > 0 and not b.is_terminal for b in app._batches.values()))
    live = next(b for b in app._batches.values() if b.settled > 0 and not b.is_terminal)
    t = table(pilot.app, "batches")
    t.move_to_key(str(live.id))
    await until(pilot, "its targets", lambda: "in flight" in rendered(pilot.app, "#detail")
                and t.current_key == str(live.id))


async def schedules(pilot: Any, engine: Any) -> None:
    app = await screen(pilot, "8", "schedules")
    await rows(pilot, "schedules", 1, "a schedule")
    await until(pilot, "a schedule's last run", lambda: any(
        s.last_outcome is not None for s in app._by_name.values()))


async def backfills(pilot: Any, engine: Any) -> None:
    app = await screen(pilot, "9", "backfills")
    t = await rows(pilot, "backfills", 1, "a backfill")
    await until(pilot, "a backfill under way", lambda: any(
        b.state == "running" and b.items_per_s > 0 for b in app._by_name.values()))
    t.move_to_key(next(b.name for b in app._by_name.values() if b.state == "running"))


async def help_screen(pilot: Any, engine: Any) -> None:
    from forklift_console.screens.help import HelpScreen

    await screen(pilot, "3", "jobs")
    await pilot.press("question_mark")
    await until(pilot, "the help", lambda: isinstance(pilot.app.screen, HelpScreen))


@dataclass(frozen=True)
class Shot:
    name: str
    take: Callable[[Any, Any], Awaitable[None]]


SHOTS: tuple[Shot, ...] = (
    Shot("overview", overview),
    Shot("queues", queues),
    Shot("jobs", jobs),
    Shot("job", job),
    Shot("dead", dead),
    Shot("dead-requeue", dead_requeue),
    Shot("workers", workers),
    Shot("audit", audit),
    Shot("batches", batches),
    Shot("schedules", schedules),
    Shot("backfills", backfills),
    Shot("help", help_screen),
)


async def capture(console: Any, engine: Any, shots: tuple[Shot, ...], out: Path) -> None:
    from textual.widgets import Input

    async with console.run_test(size=SIZE) as pilot:
        for shot in shots:
            await shot.take(pilot, engine)
            for field in pilot.app.screen.query(Input):
                field.cursor_blink = False  # no half-drawn cursor in a picture
            await pilot.pause(1.2)  # one more refresh, so "updated" reads as it does live
            # Each refresh redraws the footer's keys (bindings may change with the data): take
            # the picture when they are there.
            await until(pilot, "the footer's keys", lambda: "Quit" in bottom_line(pilot.app))
            save(out, shot.name, console.export_screenshot(title=f"forklift demo — {shot.name}"))


def bottom_line(app: Any) -> str:
    """The screen's last line as it is drawn now (under a dialog: the screen behind it)."""
    strips = app.screen._compositor.render_strips()
    return "".join(segment.text for segment in strips[-1]) if strips else ""


def save(out: Path, name: str, svg: str) -> None:
    path = out / f"{name}.svg"
    path.write_text(svg)
    png = to_png(path)
    print(f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}"
          + (f" + {png.name}" if png else " (no rsvg-convert: SVG only)"), flush=True)


def to_png(svg_path: Path) -> Path | None:
    """librsvg renders the SVG faithfully once whitespace is preserved (Rich pads cells with
    spaces that SVG would otherwise collapse); cairosvg misaligns the columns."""
    tool = shutil.which("rsvg-convert")
    if tool is None:
        return None
    png = svg_path.with_suffix(".png")
    with tempfile.NamedTemporaryFile("w", suffix=".svg", delete=False) as tmp:
        tmp.write(svg_path.read_text().replace("<svg ", '<svg xml:space="preserve" ', 1))
    try:
        subprocess.run([tool, tmp.name, "-o", str(png)], check=True)
    finally:
        os.unlink(tmp.name)
    return png


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "screenshots")
    parser.add_argument("--only", nargs="*", help="take only these (and what they build on)")
    parser.add_argument("--concurrency", type=int, default=20, help="as forklift demo's")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    shots = SHOTS
    if args.only:
        last = max(i for i, s in enumerate(SHOTS) if s.name in args.only)
        shots = SHOTS[: last + 1]
    from forklift._db.migrate import migrate
    from forklift_console import demo_app
    from forklift_console.demo import DemoEngine, console_app

    with throwaway_server() as dsn:
        app = demo_app.app
        app.use(dsn)
        migrate(dsn, app.schema)
        engine = DemoEngine(app, concurrency=args.concurrency)
        engine.start()
        try:
            asyncio.run(capture(console_app(app, engine), engine, shots, args.out))
            os.environ["NO_COLOR"] = "1"  # the console reads it when it starts
            asyncio.run(capture(console_app(app, engine), engine,
                                (Shot("no-color", overview),), args.out))
        finally:
            os.environ.pop("NO_COLOR", None)
            engine.stop()
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT / "console"))
    raise SystemExit(main())
