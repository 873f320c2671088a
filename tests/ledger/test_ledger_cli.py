"""`forklift ledger create|check` against a real book: the DDL shown and run, the sums per
currency, exit 1 and the code when a currency does not sum to zero."""

from __future__ import annotations

import json
from typing import Any

import psycopg
from typer.testing import CliRunner

from forklift.cli.main import app as cli


def forklift(dsn: str, *argv: str) -> Any:
    return CliRunner().invoke(cli, [*argv, "--dsn", dsn])


def test_create_shows_its_statement_and_a_dry_run_changes_nothing(
        dsn: str, conn: psycopg.Connection[Any]) -> None:
    dry = forklift(dsn, "ledger", "create", "--table", "public.book", "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert 'CREATE TABLE IF NOT EXISTS "public"."book"' in dry.stdout
    assert conn.execute("SELECT to_regclass('public.book')").fetchone() == (None,)
    done = forklift(dsn, "ledger", "create", "--table", "public.book", "--json")
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["dry_run"] is False
    assert conn.execute("SELECT to_regclass('public.book')::text").fetchone() == ("book",)
    assert conn.execute("SELECT action, target->>'table' FROM forklift.audit").fetchall() == [
        ("ledger.create", "public.book")]


def test_check_sums_each_currency_and_fails_on_an_unbalanced_book(
        dsn: str, conn: psycopg.Connection[Any]) -> None:
    assert forklift(dsn, "ledger", "create").exit_code == 0
    conn.execute("INSERT INTO ledger_lines (posting_key, line, account, currency, amount_minor)"
                 " VALUES ('a', 0, 'cash', 'EUR', 500), ('a', 1, 'sales', 'EUR', -500),"
                 " ('b', 0, 'cash', 'USD', 70), ('b', 1, 'sales', 'USD', -70)")
    good = forklift(dsn, "ledger", "check", "--json")
    assert good.exit_code == 0, good.output
    assert json.loads(good.stdout) == {
        "table": "ledger_lines", "tenant": None, "balanced": True, "currencies": [
            {"currency": "EUR", "total": 0, "lines": 2, "postings": 1},
            {"currency": "USD", "total": 0, "lines": 2, "postings": 1}]}
    assert "balanced" in forklift(dsn, "ledger", "check").stdout
    # A line written around the kind: the check is what finds it.
    conn.execute("INSERT INTO ledger_lines (posting_key, line, account, currency, amount_minor)"
                 " VALUES ('c', 0, 'cash', 'USD', 1)")
    bad = forklift(dsn, "ledger", "check")
    assert bad.exit_code == 1
    assert "the book ledger_lines does not balance: USD +1 (ledger_unbalanced)" in bad.stderr
