"""The server under test: scratch databases cloned from one migrated template, all dropped."""

from __future__ import annotations

import contextlib
import secrets
from typing import Any

import psutil
import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from forklift.cli.bench.report import ServerInfo

SCHEMA = "forklift"

# The plain side: a table of the same shape (columns, indexes, storage settings) without
# forklift's trigger and constraints.
PLAIN_SQL = """
CREATE SCHEMA plain;
CREATE TABLE plain.jobs (LIKE forklift.jobs INCLUDING DEFAULTS INCLUDING IDENTITY INCLUDING INDEXES);
"""


def connect(dsn: str, name: str) -> psycopg.Connection[Any]:
    return psycopg.Connection.connect(
        make_conninfo(dsn, application_name=f"forklift:bench:{name}"), autocommit=True
    )


class Server:
    """The server under test: scratch databases cloned from one migrated template."""

    def __init__(self, dsn: str, origin: str) -> None:
        self.dsn = dsn
        self.origin = origin
        self.admin = connect(dsn, "admin")
        self.token = secrets.token_hex(3)
        self.created: list[str] = []
        self.template = self._create(f"forklift_bench_{self.token}_template")
        self._prepare_template()
        self.local = self._is_local()

    def info(self) -> ServerInfo:
        def show(name: str) -> str:
            row = self.admin.execute(sql.SQL("SHOW {}").format(sql.Identifier(name))).fetchone()
            return str(row[0]) if row else "?"

        return ServerInfo(
            version=show("server_version"),
            fsync=show("fsync"),
            synchronous_commit=show("synchronous_commit"),
            origin=self.origin,
            local=self.local,
        )

    def _is_local(self) -> bool:
        """True when the server's backends are processes on this machine (psutil can see them)."""
        row = self.admin.execute(
            "SELECT pg_backend_pid(), extract(epoch FROM backend_start)::float8"
            " FROM pg_stat_activity WHERE pid = pg_backend_pid()"
        ).fetchone()
        if row is None:
            return False
        try:
            proc = psutil.Process(int(row[0]))
            return abs(proc.create_time() - float(row[1])) < 2.0 and "postgres" in proc.name()
        except (psutil.Error, OSError):
            return False

    def dsn_for(self, dbname: str) -> str:
        return make_conninfo(self.dsn, dbname=dbname)

    def _create(self, name: str, template: str | None = None) -> str:
        query = sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name))
        if template is not None:
            query += sql.SQL(" TEMPLATE {}").format(sql.Identifier(template))
        self.admin.execute(query)
        self.created.append(name)
        return name

    def _prepare_template(self) -> None:
        from forklift import migrate

        target = self.dsn_for(self.template)
        migrate(target, SCHEMA)
        with connect(target, "template") as conn:
            conn.execute(PLAIN_SQL)
            row = conn.execute(
                "SELECT array_to_string(reloptions, ', ') FROM pg_class"
                " WHERE oid = 'forklift.jobs'::regclass"
            ).fetchone()
            if row and row[0]:
                # Same storage settings as forklift's table: the comparison is of the SQL.
                conn.execute(f"ALTER TABLE plain.jobs SET ({row[0]})")

    def fresh(self, label: str) -> str:
        name = self._create(f"forklift_bench_{self.token}_{label}", template=self.template)
        return self.dsn_for(name)

    def drop(self, dsn: str) -> None:
        name = conninfo_to_dict(dsn).get("dbname")
        if not name:
            return
        with contextlib.suppress(psycopg.Error):
            self.admin.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(str(name)))
            )
        if name in self.created:
            self.created.remove(str(name))

    def close(self) -> None:
        for name in reversed(list(self.created)):
            self.drop(self.dsn_for(name))
        self.admin.close()
