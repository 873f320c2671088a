"""Regenerate screenshots/ : the console's README screenshots, as SVG, and PNG where
``rsvg-convert`` exists.

    python scripts/screenshots.py [--admin-dsn DSN] [--out screenshots]

The scenes are the snapshot tests' (tests/console_seed.py: SCENES with alt text): the same
seeded database, frozen clock and keys, so what the README shows is what the tests check. The
database: ``--admin-dsn`` (or FORKLIFT_TEST_DSN), a role that may CREATE DATABASE; else a
throwaway embedded server in a temporary home, removed afterwards. A database named
``forklift_screenshots`` is created, used and dropped.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from console_seed import SCENES, Scene, Seeded, freeze_db_clock, seed  # noqa: E402

from forklift._migrate import migrate  # noqa: E402

DBNAME = "forklift_screenshots"


@contextmanager
def admin_dsn(given: str | None) -> Iterator[str]:
    if given:
        yield given
        return
    from forklift import embedded

    home = Path(tempfile.mkdtemp(prefix="forklift-screenshots-"))
    home.chmod(0o755)  # a root-run server's own account must reach it
    try:
        yield make_conninfo(embedded.ensure_server(home), dbname="postgres")
    finally:
        embedded.stop_server(home)
        embedded.remove_server(home)
        shutil.rmtree(home, ignore_errors=True)


@contextmanager
def seeded_database(admin: str) -> Iterator[tuple[str, Seeded]]:
    with psycopg.connect(admin, autocommit=True) as c:
        c.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(DBNAME)))
        c.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(DBNAME)))
    dsn = make_conninfo(admin, dbname=DBNAME)
    try:
        migrate(dsn, "forklift")
        with psycopg.connect(dsn, autocommit=True) as c:
            seeded = seed(c)
            freeze_db_clock(c)
        yield dsn, seeded
    finally:
        with psycopg.connect(admin, autocommit=True) as c:
            c.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(DBNAME))
            )


async def capture(scene: Scene, dsn: str, seeded: Seeded) -> str:
    saved = os.environ.get("NO_COLOR")
    if scene.no_color:
        os.environ["NO_COLOR"] = "1"
    try:
        app = scene.app(dsn)
    finally:
        if scene.no_color and saved is None:
            os.environ.pop("NO_COLOR", None)
    async with app.run_test(size=scene.size) as pilot:
        await scene.before(seeded)(pilot)
        await pilot.pause()
        await pilot.wait_for_scheduled_animations()
        await pilot.pause()
        svg: str = app.export_screenshot(title=f"forklift console — {scene.name}")
    return svg


def to_png(svg_path: Path) -> Path | None:
    """librsvg renders the SVG faithfully once whitespace is preserved (Rich pads cells with
    spaces that SVG would otherwise collapse)."""
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
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--admin-dsn", default=os.environ.get("FORKLIFT_TEST_DSN"))
    parser.add_argument("--out", type=Path, default=ROOT / "screenshots")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    scenes = [s for s in SCENES if s.alt]
    with admin_dsn(args.admin_dsn) as admin, seeded_database(admin) as (dsn, seeded):
        for scene in scenes:
            svg = args.out / f"{scene.name}.svg"
            svg.write_text(asyncio.run(capture(scene, dsn, seeded)))
            png = to_png(svg)
            print(f"{svg.relative_to(ROOT) if svg.is_relative_to(ROOT) else svg}"
                  + (f" + {png.name}" if png else " (no rsvg-convert: SVG only)"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
