"""The console's pure parts: the filter language, message shapes, text helpers, CLI spelling."""

from __future__ import annotations

from typing import Any

import pytest

from forklift.ops import JobFilter
from forklift.ops.runbook import cli, filter_flags
from forklift_console.widgets.filterbar import FilterError, parse, to_text
from forklift_console.widgets.text import duration, one_line, plain, pretty_json, spark


def test_qualifiers_and_free_text() -> None:
    flt = parse('queue:mail state:dead,retryable kind:send_email tag:vip batch:42 id:5..9 "a b"')
    assert flt == JobFilter.build(
        queues="mail", states="dead,retryable", kinds="send_email", tags="vip", batch_id=42,
        id_min=5, id_max=9, text="a b",
    )
    assert parse(to_text(flt)) == flt
    assert parse("id:7") == JobFilter(id_min=7, id_max=7)
    assert parse("") == JobFilter()
    assert parse("http://host/x") == JobFilter(text="http://host/x")  # a URL is text


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("state:zombie", "state:zombie is not a state"),
        ("colour:red", "unknown qualifier colour:"),
        ('"unbalanced', "unbalanced quotes"),
        ("batch:x", "batch: wants a whole number"),
        ("id:9..5", "id:9..5 is empty"),
        ("queue:", "queue: needs a value"),
        ("a\x00b", "NUL"),
    ],
)
def test_bad_filters_are_explained(text: str, says: str) -> None:
    with pytest.raises(FilterError, match=says):
        parse(text)


def test_hostile_filter_text_is_data() -> None:
    flt = parse("queue:'mail; DROP TABLE jobs' \"%_[red]x[/]\"")
    assert flt.queues == ("mail; DROP TABLE jobs",)
    assert flt.text == "%_[red]x[/]"
    assert cli("jobs", "retry", *filter_flags(flt), "--yes") == (
        "forklift jobs retry --queue 'mail; DROP TABLE jobs' --search '%_[red]x[/]' --yes"
    )


def test_a_dead_letter_group_is_a_filter_qualifier() -> None:
    """17.2: Dead letters' enter opens group:ID, exactly the group's jobs."""
    flt = parse("group:3F2A9C01B2E4D5F6 queue:mail")
    assert flt == JobFilter.build(dead_group="3f2a9c01b2e4d5f6", queues="mail")
    assert parse(to_text(flt)) == flt
    with pytest.raises(FilterError, match="not a dead-letter group id"):
        parse("group:nothex")


def test_text_from_jobs_is_never_markup() -> None:
    assert plain("[bold]x[/] \x1b[31mred\x1b[0m \u202eevil").plain == "[bold]x[/] red evil"
    assert one_line("a\n  b", limit=3).plain == "a b"
    assert pretty_json({"k": "[b]\u202e"}).plain == '{\n  "k": "[b]"\n}'


def test_durations_and_sparklines() -> None:
    assert [duration(s) for s in (0, 42, 185, 8040, 277200)] == ["0s", "42s", "3m05s",
                                                                    "2h14m", "3d5h"]
    assert spark([0, 1, 8]) == "▁▂█"
    assert spark([0, 0]) == "▁▁"
    assert spark([]) == ""


def test_a_screenshot_says_where_it_went_when_downloads_is_missing(
    dsn: str, tmp_path: Any, monkeypatch: Any
) -> None:
    """17.12: Textual's screenshot action failed without a word when ~/Downloads was missing."""
    import asyncio

    from console_seed import make_app

    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_DOWNLOAD_DIR", raising=False)
    monkeypatch.delenv("FORKLIFT_SCREENSHOT_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    app = make_app(dsn)

    async def main() -> None:
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause()
            app.action_screenshot()
            await pilot.pause()
            messages = [n.message for n in app._notifications]
            assert any(m.startswith("screenshot saved: ") for m in messages), messages

    asyncio.run(main())
    assert list(tmp_path.glob("*.svg")), "the SVG is in the current directory"


def test_a_table_given_rows_before_it_is_mounted_shows_them_once_mounted() -> None:
    """A screen's first load can finish before its table is mounted (seen on Retries under
    load: "More values provided than there are columns")."""
    import asyncio

    from textual.app import App, ComposeResult

    from forklift_console.widgets.table import Column, LiveTable

    table = LiveTable([Column("id", "Id", 6), Column("what", "What")], id="t")
    table.sync([("7", ["7", "a row"]), ("8", ["8", "another"])])  # no columns yet

    class Host(App[None]):
        def compose(self) -> ComposeResult:
            yield table

    async def main() -> None:
        async with Host().run_test(size=(60, 10)) as pilot:
            await pilot.pause()
            assert table.keys == ["7", "8"]
            assert [str(c) for c in table.get_row("8")] == ["8", "another"]

    asyncio.run(main())


def test_a_sort_order_orders_names_and_labels_its_column() -> None:
    from forklift_console.widgets.sort_order import SortOrder
    from forklift_console.widgets.table import Column

    cols = [Column("name", "Name", 10), Column("lag", "Lag", 3)]
    rows = [("a", ("mail", "9s")), ("b", ("audit", "70s")), ("c", ("zeta", "2s"))]
    assert SortOrder().apply(list(rows), cols) == rows  # the screen's own order
    by_lag = SortOrder(("lag", True))
    assert [k for k, _ in by_lag.apply(list(rows), cols)] == ["b", "a", "c"]
    assert [k for k, _ in SortOrder(("name", False)).apply(list(rows), cols)] == ["b", "a", "c"]
    assert by_lag.text(cols) == "sorted by Lag ▼"
    assert by_lag.label(cols[1]).plain == "La▼"  # too narrow for "Lag ▼": the glyph stays
    assert by_lag.label(cols[0]).plain == "Name"
    assert SortOrder.numeric("lag", cols, rows, server=False)
    assert not SortOrder.numeric("name", cols, rows, server=False)


def test_marks_say_whether_they_changed() -> None:
    from forklift_console.widgets.marks import Marks

    marks = Marks()
    assert not marks.clear()  # nothing marked: nothing to redraw
    marks.toggle("1")
    marks.add("2", "3")
    assert marks.keys == {"1", "2", "3"} and marks.cell("2") != " " and marks.cell("4") == " "
    assert not marks.keep({"1", "2", "3", "4"})
    assert marks.keep({"1", "2"}) and marks.keys == {"1", "2"}
    marks.all(True)
    assert marks.everything and not marks.keys and marks.cell("4") != " "
    marks.toggle("4")  # marking one row by hand ends "all matching"
    assert not marks.everything and marks.keys == {"4"}
    assert marks.clear() and not marks.keys
