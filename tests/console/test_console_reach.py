"""What k9s and Oban Web users reach for: jump to a job by id, search by a payload field, pick
the sort column, copy a dialog's CLI line, saved filters, time-window charts. Driven with Pilot
against a real, seeded PostgreSQL."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import psycopg
import pytest
from console_seed import Seeded, drive, loaded, make_app, on_screen, seed
from helpers import wait_until_async
from rich.console import Console
from test_console_snapshots import frozen  # noqa: F401  (the fixture)
from textual.pilot import Pilot
from textual.widgets import Input, OptionList, Static

from forklift.ops import Sort
from forklift.ops.args_match import ArgsMatch
from forklift_console.app import ConsoleApp
from forklift_console.screens.help import HelpScreen
from forklift_console.screens.job import JobScreen
from forklift_console.screens.jobs import JobsScreen
from forklift_console.screens.jump import JobIdError, JumpScreen, parse_job_id
from forklift_console.screens.modals import ConfirmScreen, GotoScreen
from forklift_console.screens.queues import QueuesScreen
from forklift_console.screens.saved import SavedFiltersScreen
from forklift_console.widgets.clipboard import osc52_reaches
from forklift_console.widgets.saved_filters import SavedFilters, SavedFiltersError
from forklift_console.widgets.sort_pick import SortPicker
from forklift_console.widgets.table import LiveTable
from forklift_console.widgets.text import SPARK_BLOCKS
from forklift_console.widgets.window_chart import WINDOWS, bars, fit, next_window


@pytest.fixture
def seeded(conn: psycopg.Connection[Any]) -> Seeded:
    return seed(conn)


def text_of(widget: Static) -> str:
    """What a Static holds, as plain text (a Rich group or grid included)."""
    out = Console(width=200, record=True, file=io.StringIO())
    out.print(widget.content)
    return out.export_text().rstrip("\n")


def palette_titles(app: ConsoleApp) -> list[str]:
    return [c.title for c in app.get_system_commands(app.screen)]


# -- jump to a job by id -------------------------------------------------------------------
def test_a_job_id_is_read_as_typed_and_refused_with_the_reason() -> None:
    assert parse_job_id(" 1234 ") == 1234
    assert parse_job_id("#1,234") == 1234
    for bad, words in (("", "type a job id"), ("12a", "not a job id"), ("-5", "not a job id"),
                       ("0", "out of range"), (str(2**63), "out of range")):
        with pytest.raises(JobIdError, match=words):
            parse_job_id(bad)


def test_J_jumps_to_a_job_from_any_screen_and_an_unknown_id_says_so(
    dsn: str, seeded: Seeded
) -> None:
    job = seeded.ids["dead_smtp"]

    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        await loaded(app)
        await pilot.press("J")
        jump: JumpScreen = await on_screen(app, JumpScreen)
        await pilot.press(*"12x", "enter")
        why = jump.query_one("#why", Static)
        assert "'12x' is not a job id" in text_of(why)
        assert app.screen is jump  # the dialog stays, with the reason beside the field
        jump.query_one("#job-id", Input).value = "999999"
        await pilot.press("enter")
        await wait_until_async(lambda: jump.refused is not None, timeout=10)
        assert "no job 999999" in text_of(why)
        assert app.screen is jump
        jump.query_one("#job-id", Input).value = str(job)
        await pilot.press("enter")
        shown: JobScreen = await on_screen(app, JobScreen)
        assert shown.job_id == job
        await loaded(app, shown)
        assert f"job {job}" in text_of(shown.query_one("#head", Static))
        await pilot.press("escape")
        assert app.current_mode == "overview" and not isinstance(app.screen, JobScreen)

    drive(make_app(dsn), scenario)


def test_colon_job_id_opens_the_job_and_the_key_is_in_help_and_palette(
    dsn: str, seeded: Seeded
) -> None:
    job = seeded.ids["hostile"]

    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        await loaded(app)
        assert "Jump to job id" in palette_titles(app)
        await pilot.press("question_mark")
        help_screen = await on_screen(app, HelpScreen)
        assert "Jump to job id" in text_of(help_screen.query_one("#help", Static))
        await pilot.press("escape")
        await pilot.press("colon")
        await on_screen(app, GotoScreen)
        await pilot.press(*f"job {job}", "enter")
        shown: JobScreen = await on_screen(app, JobScreen)
        assert shown.job_id == job
        await pilot.press("escape")
        await pilot.press("colon")
        await on_screen(app, GotoScreen)
        await pilot.press(*"job 77777777", "enter")
        jump: JumpScreen = await on_screen(app, JumpScreen)
        await wait_until_async(lambda: jump.refused is not None, timeout=10)
        assert "no job 77777777" in text_of(jump.query_one("#why", Static))

    drive(make_app(dsn), scenario)


# -- search by a payload field -------------------------------------------------------------
def test_the_jobs_filter_takes_a_payload_field_checked_as_typed(
    dsn: str, seeded: Seeded
) -> None:
    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        await pilot.press("3")
        jobs: JobsScreen = await on_screen(app, JobsScreen)
        await loaded(app, jobs)
        await pilot.press("slash")
        await pilot.press(*"args.to:")
        why = jobs.query_one("#filter-why", Static)
        assert why.display and "args.to: needs a value" in text_of(why)  # before enter
        await pilot.press(*"ops4@example.com")
        assert not why.display
        await pilot.press("enter")
        await loaded(app, jobs)
        assert jobs.filter.args == (ArgsMatch(("to",), "ops4@example.com"),)
        assert jobs.table.keys == [str(seeded.ids["dead_smtp"])]
        # A number matches the JSON number: n is 2*i+1 for the mailbox_full dead jobs.
        assert jobs.set_filter_text("state:dead args.n:17")
        await loaded(app, jobs)
        assert jobs.table.keys == [str(seeded.ids["dead_mailbox"])]
        assert jobs.filter_text == "state:dead args.n:17"
        # A refused filter leaves the rows as they were and says why beside the field.
        jobs.query_one("#filter", Input).focus()
        jobs.query_one("#filter", Input).value = "args..n:1"
        await pilot.press("enter")
        await wait_until_async(lambda: "not applied" in text_of(why), timeout=5)
        assert why.display and "empty field name" in text_of(why)
        assert jobs.filter_text == "state:dead args.n:17"

    drive(make_app(dsn), scenario)


# -- pick the sort column ------------------------------------------------------------------
def test_o_picks_the_sort_column_and_direction_on_every_list(dsn: str, seeded: Seeded) -> None:
    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        assert "Sort by… (pick a column and direction)" in palette_titles(app)
        await pilot.press("2")
        queues: QueuesScreen = await on_screen(app, QueuesScreen)
        await loaded(app, queues)
        table = queues.query_one("#queues", LiveTable)
        table.focus()
        await pilot.press("question_mark")
        help_screen = await on_screen(app, HelpScreen)
        assert "Sort by…" in text_of(help_screen.query_one("#help", Static))
        await pilot.press("escape")
        await pilot.press("o")
        picker: SortPicker = await on_screen(app, SortPicker)
        box = picker.query_one(OptionList)
        labels = [str(box.get_option_at_index(i).prompt) for i in range(box.option_count)]
        assert "Avail ▼ descending" in labels and "the screen's own order" in labels
        box.highlighted = labels.index("Avail ▲ ascending")
        await pilot.press("enter")
        await wait_until_async(lambda: table.sort_by == ("available", False), timeout=5)
        assert table.keys == ["slow", "reports", "default", "mail"]  # 0, 6, 14, 23
        header = table.columns[next(c for c in table.columns if c.value == "available")]
        assert header.label.plain == "Avail▲"  # the header says it in text
        await pilot.press("o")
        picker = await on_screen(app, SortPicker)
        await pilot.press("escape")  # esc keeps the sort
        assert table.sort_by == ("available", False)
        # The jobs list sorts on the server: the pick becomes the operator API's sort.
        await pilot.press("3")
        jobs: JobsScreen = await on_screen(app, JobsScreen)
        await loaded(app, jobs)
        jobs.table.focus()
        await pilot.press("o")
        picker = await on_screen(app, SortPicker)
        box = picker.query_one(OptionList)
        labels = [str(box.get_option_at_index(i).prompt) for i in range(box.option_count)]
        assert "the screen's own order" not in labels
        box.highlighted = labels.index("Kind ▲ ascending")
        await pilot.press("enter")
        await wait_until_async(lambda: jobs.sort == Sort("kind", False), timeout=5)
        await loaded(app, jobs)
        assert "sorted by Kind ▲" in text_of(jobs.query_one("#info", Static))

    drive(make_app(dsn), scenario)


# -- copy the CLI line ---------------------------------------------------------------------
def messages(app: ConsoleApp) -> list[str]:
    return [n.message for n in app._notifications]


def test_osc52_is_used_where_the_terminal_takes_it() -> None:
    def reaches(**env: str) -> bool:
        return osc52_reaches(env)

    assert reaches(TERM="xterm-256color")
    assert reaches(TERM="tmux-256color", VTE_VERSION="7200", TMUX="/tmp/t")
    assert not reaches(TERM="linux")
    assert reaches()  # nothing known against it: the sequence is sent
    assert not reaches(TERM="xterm-256color", TERM_PROGRAM="Apple_Terminal")
    assert not reaches(TERM="xterm-256color", VTE_VERSION="7200")
    assert reaches(TERM="linux", FORKLIFT_CLIPBOARD="osc52")
    assert not reaches(TERM="xterm-256color", FORKLIFT_CLIPBOARD="file")


def test_ctrl_y_copies_the_dialogs_cli_line_and_says_where_it_went(
    dsn: str, seeded: Seeded, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    monkeypatch.delenv("FORKLIFT_CLIPBOARD_FILE", raising=False)
    monkeypatch.setenv("TERM", "linux")  # a terminal that drops OSC 52
    dead = seeded.ids["dead_smtp"]
    saved = tmp_path / "forklift" / "clipboard.txt"

    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        assert "Copy the CLI line" in palette_titles(app)
        await loaded(app)
        await pilot.press("ctrl+y")  # nothing done yet, no dialog: says so
        assert any("no CLI line to copy" in m for m in messages(app))
        app.show_jobs(f"id:{dead}")
        jobs: JobsScreen = await on_screen(app, JobsScreen)
        await loaded(app, jobs)
        jobs.table.focus()
        await pilot.press("D")
        dialog = await on_screen(app, ConfirmScreen)
        shown = text_of(dialog.query_one("#cli", Static))
        assert shown == f"cli $ forklift jobs delete --yes {dead}"
        await pilot.press("ctrl+y")  # the Linux console: the file, named
        await wait_until_async(lambda: saved.exists(), timeout=5,
                               message=lambda: f"{messages(app)} {app.screen}")
        assert saved.read_text() == f"forklift jobs delete --yes {dead}\n"
        assert any(m.startswith("copied the dialog's CLI line to the file")
                   and str(saved) in m and "cannot take a clipboard write (OSC 52)" in m
                   for m in messages(app))
        monkeypatch.setenv("FORKLIFT_CLIPBOARD", "osc52")
        saved.unlink()
        await pilot.press("ctrl+y")
        assert app.clipboard == f"forklift jobs delete --yes {dead}"
        assert any("copied the dialog's CLI line to the clipboard (OSC 52)" in m
                   for m in messages(app))
        assert not saved.exists()
        await pilot.press("escape")

    drive(make_app(dsn), scenario)


# -- saved filters -------------------------------------------------------------------------
def test_saved_filters_live_in_the_config_dir_and_a_bad_file_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    store = SavedFilters()
    assert store.path == tmp_path / "forklift" / "filters.json"
    assert store.load() == []
    store.save("  stuck   mail ", "queue:mail state:dead")
    store.save("vip", "args.plan:gold")
    store.save("stuck mail", "queue:mail state:retryable")  # the same name: replaced
    assert [(f.name, f.text) for f in SavedFilters().load()] == [
        ("vip", "args.plan:gold"), ("stuck mail", "queue:mail state:retryable")]
    for name, words in (("", "name the filter"), ("a\x1bb", "control characters"),
                        ("x" * 61, "at most 60")):
        with pytest.raises(SavedFiltersError, match=words):
            store.save(name, "queue:mail")
    with pytest.raises(SavedFiltersError, match="no filter to save"):
        store.save("empty", "  ")
    assert store.delete("vip") and not store.delete("vip")
    store.path.write_text("{not json")
    with pytest.raises(SavedFiltersError, match="does not hold saved filters"):
        store.save("new", "queue:x")
    assert store.path.read_text() == "{not json"  # never overwritten


def test_F_saves_the_current_filter_lists_and_applies_saved_ones(
    dsn: str, seeded: Seeded, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    dead = seeded.ids["dead_smtp"]

    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        await pilot.press("3")
        jobs: JobsScreen = await on_screen(app, JobsScreen)
        await loaded(app, jobs)
        assert "Jobs: Saved filters" in palette_titles(app)
        jobs.table.focus()
        await pilot.press("question_mark")
        help_screen = await on_screen(app, HelpScreen)
        assert "Saved filters" in text_of(help_screen.query_one("#help", Static))
        await pilot.press("escape")
        assert jobs.set_filter_text("state:dead args.to:ops4@example.com")
        await loaded(app, jobs)
        jobs.table.focus()
        await pilot.press("F")
        dialog: SavedFiltersScreen = await on_screen(app, SavedFiltersScreen)
        dialog.query_one("#name", Input).focus()
        await pilot.press(*"smtp ops4", "enter")
        assert [f.name for f in dialog.filters] == ["smtp ops4"]
        await pilot.press("escape")
        stored = json.loads((tmp_path / "forklift" / "filters.json").read_text())
        assert stored["filters"] == [{"name": "smtp ops4",
                                      "text": "state:dead args.to:ops4@example.com"}]
        assert jobs.set_filter_text("")  # another filter, then the saved one again
        await loaded(app, jobs)
        jobs.table.focus()
        await pilot.press("F")
        dialog = await on_screen(app, SavedFiltersScreen)
        await pilot.press("enter")  # the list has the focus: apply the highlighted one
        await wait_until_async(
            lambda: jobs.filter_text == "state:dead args.to:ops4@example.com", timeout=5)
        await loaded(app, jobs)
        assert jobs.table.keys == [str(dead)]

    drive(make_app(dsn), scenario)


# -- time-window charts --------------------------------------------------------------------
def test_a_chart_fits_its_window_in_the_columns_and_zero_draws_no_bars() -> None:
    assert fit([1, 2, 3, 4, 5], 10) == [1, 2, 3, 4, 5]
    assert fit([1, 2, 3, 4, 5], 2) == [3, 12]  # whole groups end at now; the rest leads
    assert sum(fit(list(range(96)), 40)) == sum(range(96))
    assert bars([0, 0, 0], 10) is None
    assert bars([0, 4, 8], 10) == " ▅█"
    assert next_window(None) == WINDOWS[0] and next_window(WINDOWS[-1]) is None


def rates_of(app: ConsoleApp) -> str:
    return text_of(app.screen.query_one("#rates", Static))


def test_w_charts_the_overview_over_5_min_1_h_and_24_h(
    dsn: str, frozen: tuple[str, Seeded]  # noqa: F811  (the fixture imported above)
) -> None:
    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        overview = app.screen
        await loaded(app)
        assert rates_of(app).startswith("Throughput, last 30 min")
        hour_completed = 0
        for label, per in (("5 min", "10 s"), ("1 h", "1 min"), ("24 h", "30 min")):
            await pilot.press("w")
            await loaded(app, overview)
            shown = rates_of(app)
            assert shown.startswith(f"Throughput, the last {label} · a bar per {per}"), shown
            lines = shown.splitlines()
            completed = next(line for line in lines if "completed" in line)
            total = int(completed.split()[-1].replace(",", ""))
            assert total > 0 and any(b in completed for b in SPARK_BLOCKS)
            if label == "1 h":
                hour_completed = total
            if label == "24 h":
                assert total >= hour_completed  # a wider window holds at least as many
        await pilot.press("w")  # back to the stats' own half hour
        await loaded(app, overview)
        assert rates_of(app).startswith("Throughput, last 30 min")

    drive(make_app(frozen[0]), scenario)


def test_an_empty_window_draws_no_bars_and_queues_chart_the_highlighted_queue(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    conn.execute("INSERT INTO forklift.queues (name) VALUES ('idle')")

    async def scenario(app: ConsoleApp, pilot: Pilot[None]) -> None:
        overview = app.screen
        await loaded(app)
        await pilot.press("w")
        await loaded(app, overview)
        lines = rates_of(app).splitlines()[1:]
        assert len(lines) == 3
        for line in lines:
            assert "none in the last 5 min" in line and line.split()[-1] == "0"
            assert not any(b in line for b in SPARK_BLOCKS)  # no bars at all
        await pilot.press("2")
        queues: QueuesScreen = await on_screen(app, QueuesScreen)
        await loaded(app, queues)
        detail = queues.query_one("#detail", Static)
        assert "Throughput" not in text_of(detail)  # no window chosen: no chart, no read
        queues.query_one("#queues", LiveTable).focus()
        await pilot.press("w")
        await loaded(app, queues)
        assert "Throughput, queue idle, the last 5 min" in text_of(detail)
        assert "none in the last 5 min" in text_of(detail)

    drive(make_app(dsn), scenario)
