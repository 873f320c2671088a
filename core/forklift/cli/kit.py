"""What every ``forklift`` command shares, declared once: its options, its run, its errors.

A command is a plain function decorated with :func:`command`; its first parameter is the
:class:`Call` (the common options, the operator opened on first use, the output helpers) and
the decorator adds the common options to what typer sees:

    @queues_app.command("pause")
    @command(acts=True)
    def pause(cx: Call, name: QueueName, for_: ... = None) -> None:
        cx.show(cx.op.pause(name, reason=cx.reason, for_=for_), _queue_line)

- every command that reads or acts: ``--read-only``, ``--dsn``, ``--schema``, ``--json``,
  ``--replica-dsn`` and ``--replica-max-lag``;
- every action (``acts=True``) also ``--reason``, ``--dry-run``, ``--actor`` (and ``--yes``
  where it asks first: ``confirms=True``).

Errors: one line on stderr, ``error: <what was wrong and what to do> (<code>)``; with ``--json``
also ``{"error": {"code": ..., "message": ...}}`` on stdout. Exit codes: 0 done, 1 refused or
failed, 2 usage error. Usage errors found while parsing the command line (``--limit 0``,
``jobs show abc``) take the same form: :class:`Group` is the top-level command's class.

Confirmations: a destructive command asks on a terminal; with stdin not a terminal and no
``--yes`` it refuses with exit code 1, so a script never acts by accident. ``--dry-run`` never
asks and changes nothing.

A replica (``--replica-dsn``, FORKLIFT_REPLICA_DSN) serves a reading command's reads; an action
(``acts=True``) reads and writes the primary only, so it acts on what is true now. A replica that
is not a standby is refused when a reading command starts; one that lags, or cannot be reached,
sends the reads to the primary with one ``warning:`` line on stderr. With ``--json``, an object
printed gets a ``replica`` key (:class:`forklift.ops.replica.ReplicaStatus`); a JSON array keeps
its shape.

Light on purpose: typer and forklift's small modules only. Rich (human output) and the
operator API load on first use, so ``forklift stats --json`` starts quickly.
"""

from __future__ import annotations

import functools
import inspect
import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, TypeVar

import typer
from typer.core import TyperGroup

# Text for Rich lives with the rest of the formatting; commands import it from here too.
from forklift.cli.format import ident as ident
from forklift.cli.format import safe as safe

if TYPE_CHECKING:
    from rich.console import Console

    from forklift.ops import Operator

# -- the options -----------------------------------------------------------------------------
Dsn = Annotated[
    str | None,
    typer.Option("--dsn", help="PostgreSQL DSN (default: FORKLIFT_DSN, DATABASE_URL, embedded)."),
]
Schema = Annotated[
    str | None,
    typer.Option("--schema", help="Schema holding forklift's tables [FORKLIFT_SCHEMA, else forklift]."),
]
Json = Annotated[bool, typer.Option("--json", help="Print JSON for scripts (documented shape).")]
Actor = Annotated[
    str | None,
    typer.Option("--actor", help="Who acts, for the audit trail [FORKLIFT_ACTOR, else the OS user]."),
]
ReadOnlyOpt = Annotated[
    bool, typer.Option("--read-only", help="Refuse every change (also FORKLIFT_READ_ONLY=1).")
]
Reason = Annotated[str | None, typer.Option("--reason", help="Why, for the audit trail.")]
Yes = Annotated[bool, typer.Option("--yes", "-y", help="Act without asking for confirmation.")]
DryRun = Annotated[
    bool, typer.Option("--dry-run", help="Show what would be done; change nothing.")
]
ReplicaDsn = Annotated[
    str | None,
    typer.Option("--replica-dsn", envvar="FORKLIFT_REPLICA_DSN", show_envvar=False,
                 help="A streaming replica for reads (lists, stats, charts, explain); changes"
                      " stay on the primary [FORKLIFT_REPLICA_DSN]."),
]
ReplicaMaxLag = Annotated[
    float,
    typer.Option("--replica-max-lag", envvar="FORKLIFT_REPLICA_MAX_LAG", show_envvar=False,
                 min=0, help="Seconds of replica lag past which reads go to the primary"
                             " [FORKLIFT_REPLICA_MAX_LAG, else 30]."),
]
AppOpt = Annotated[
    str | None, typer.Option("--app", help="Your app as module:attr [FORKLIFT_APP].")
]

_P = inspect.Parameter


def _opt(name: str, annotation: Any, default: Any) -> inspect.Parameter:
    return _P(name, _P.KEYWORD_ONLY, default=default, annotation=annotation)


_REASON = _opt("reason", Reason, None)
_DRY_RUN = _opt("dry_run", DryRun, False)
_YES = _opt("yes", Yes, False)
_ACTOR = _opt("actor", Actor, None)
_READ_ONLY = _opt("read_only", ReadOnlyOpt, False)
_DSN = _opt("dsn", Dsn, None)
_SCHEMA = _opt("schema", Schema, None)
_JSON = _opt("as_json", Json, False)
_REPLICA_DSN = _opt("replica_dsn", ReplicaDsn, None)
_REPLICA_MAX_LAG = _opt("replica_max_lag", ReplicaMaxLag, 30.0)


# -- output ----------------------------------------------------------------------------------
#: Piped (not a terminal) human output is laid out this wide: no wrapping, whatever fits.
PIPE_WIDTH = 4096


class _Lazy:
    """A Rich console made on first use, so the ``--json`` path never imports Rich."""

    def __init__(self, stderr: bool) -> None:
        self._stderr = stderr
        self._console: Console | None = None

    @property
    def console(self) -> Console:
        if self._console is None:
            from rich.console import Console

            c = Console(stderr=self._stderr, highlight=False, soft_wrap=True)
            if not c.is_terminal:
                c.width = PIPE_WIDTH  # COLUMNS too: it describes a terminal, not a pipe
            self._console = c
        return self._console

    def print(self, *objects: Any, **kwargs: Any) -> None:
        self.console.print(*objects, **kwargs)

    @property
    def width(self) -> int:
        return self.console.width

    @property
    def is_terminal(self) -> bool:
        return self.console.is_terminal


out = _Lazy(stderr=False)
err = _Lazy(stderr=True)


def emit_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, default=str, indent=2) + "\n")
    sys.stdout.flush()


# -- errors ----------------------------------------------------------------------------------
def say_error(message: str, code: str, *, as_json: bool, label: str = "error", **extra: Any) -> None:
    """The one stderr line (and with ``--json`` the error object on stdout)."""
    from forklift.ops.display import clean_text

    if as_json:
        emit_json({"error": {"code": code, "message": message, **extra}})
    sys.stderr.write(f"{label}: {clean_text(message)} ({code})\n")
    sys.stderr.flush()


def fail(message: str, code: str, *, as_json: bool = False, exit_code: int = 1,
         **extra: Any) -> NoReturn:
    say_error(message, code, as_json=as_json, **extra)
    raise typer.Exit(exit_code)


def usage(message: str, as_json: bool = False) -> typer.Exit:
    """A usage error (exit 2), for ``raise usage(...)``."""
    say_error(message, "usage_error", as_json=as_json)
    return typer.Exit(2)


@contextmanager
def handled(as_json: bool = False) -> Iterator[None]:
    """Refusals and failures: the one line (and JSON), exit 1, or 2 for a usage error."""
    import psycopg

    from forklift import ForkliftError

    try:
        yield
    except ForkliftError as exc:
        code = 2 if getattr(exc, "usage_error", False) else 1
        if as_json:
            emit_json({"error": exc.to_dict()})
        say_error(exc.message, exc.code, as_json=False)
        raise typer.Exit(code) from None
    except psycopg.Error as exc:
        from forklift.ops import roles

        refused = roles.refusal(exc)
        if refused is not None:  # a write this database role may not make (forklift roles)
            if as_json:
                emit_json({"error": refused.to_dict()})
            say_error(refused.message, refused.code, as_json=False)
            raise typer.Exit(1) from None
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        say_error(text, "database_error", as_json=as_json, label="database error")
        raise typer.Exit(1) from None


def interactive() -> bool:
    return sys.stdin.isatty()


def confirm(question: str, yes: bool, as_json: bool = False) -> None:
    """Ask on a terminal; refuse (exit 1) without --yes when stdin is not one."""
    if yes:
        return
    if not interactive():
        fail(
            f"refusing to {question.rstrip('?')} without confirmation: stdin is not a terminal;"
            " pass --yes to act (or --dry-run to see what would happen)",
            "confirmation_required",
            as_json=as_json,
        )
    if not typer.confirm(question, default=False, err=True):
        sys.stderr.write("aborted: nothing changed\n")
        raise typer.Exit(1)


# -- for command modules written against the kit before `command` ---------------------------
# (forklift's own are all on `command`; these keep a module that is not yet working.)
from forklift.cli.format import seconds, spark, stamp, state  # noqa: E402,F401


def operator(
    dsn: str | None, schema: str | None, actor: str | None = None, read_only: bool = False
) -> Operator:
    """An Operator from the common options (prefer ``@command`` and ``cx.op``)."""
    from forklift.ops import Operator

    return Operator(dsn, schema=schema, actor=actor, read_only=read_only or None)


# -- a command's run -------------------------------------------------------------------------
T = TypeVar("T")


@dataclass
class Call:
    """One run of a command: its common options, its operator, its output."""

    as_json: bool = False
    dsn: str | None = None
    schema: str | None = None
    actor: str | None = None
    read_only: bool = False
    reason: str | None = None
    dry_run: bool = False
    yes: bool = False
    replica_dsn: str | None = None
    replica_max_lag: float = 30.0
    #: An action: every read and write on the primary, whatever the replica options say.
    acts: bool = False
    _op: Operator | None = field(default=None, repr=False)

    @property
    def op(self) -> Operator:
        """The operator, opened on first use (and closed when the command ends)."""
        if self._op is None:
            from forklift.ops import Operator

            replica = None if self.acts else self.replica_dsn or None
            self._op = Operator(self.dsn, schema=self.schema, actor=self.actor,
                                read_only=self.read_only or None, replica_dsn=replica,
                                replica_max_lag=self.replica_max_lag)
            if replica is not None:
                try:
                    self._op.session.check_replica()  # a primary given as the replica: refused
                except BaseException:
                    self._op.close()
                    self._op = None
                    raise
        return self._op

    def close(self) -> None:
        if self._op is not None:
            status = self._op.session.replica
            self._op.close()
            if status is not None and not status.used and status.state != "not_asked":
                from forklift.ops.display import clean_text

                sys.stderr.write(f"warning: replica {status.target}: {clean_text(status.reason)}\n")
                sys.stderr.flush()

    def replica(self) -> dict[str, Any] | None:
        """The ``replica`` object for --json: where this command's reads went, and why (None
        without a replica)."""
        if not self.replica_dsn:
            return None
        from forklift.ops.replica import ReplicaStatus

        if self.acts:
            from forklift.ops.connect import describe_target

            return ReplicaStatus(
                target=describe_target(self.replica_dsn), state="not_asked",
                reason="an action reads and writes the primary only",
                max_lag_seconds=self.replica_max_lag,
            ).to_json()
        status = self._op.session.replica if self._op is not None else None
        return status.to_json() if status is not None else None

    def _with_replica(self, data: Any) -> Any:
        replica = self.replica() if isinstance(data, dict) else None
        return data if replica is None else {**data, "replica": replica}

    def show(self, result: Any, human: Callable[[Any], Any] | None = None) -> None:
        """``result.to_json()`` with --json, else ``human(result)`` printed (if given)."""
        if self.as_json:
            emit_json(self._with_replica(result.to_json() if hasattr(result, "to_json")
                                         else result))
        elif human is not None:
            text = human(result)
            if text is not None:
                out.print(text)

    def act(self, fn: Callable[[Operator], T]) -> T:
        """``fn(op)``; with --dry-run its rehearsal instead (see :meth:`Operator.dry_run`)."""
        return self.op.dry_run(fn) if self.dry_run else fn(self.op)

    def done(self, result: Any, line: Callable[[Any], str]) -> None:
        """An action's result: JSON (with ``"dry_run": true`` for a rehearsal) or its line."""
        if self.as_json:
            data = result.to_json() if hasattr(result, "to_json") else dict(result)
            emit_json(self._with_replica({**data, "dry_run": True} if self.dry_run else data))
        elif self.dry_run:
            out.print(f"dry run: {line(result)} [dim](nothing changed)[/]")
        else:
            out.print(line(result))

    def confirm(self, question: str) -> None:
        confirm(question, self.yes, self.as_json)

    def usage(self, message: str) -> typer.Exit:
        return usage(message, self.as_json)

    def fail(self, message: str, code: str, **extra: Any) -> NoReturn:
        fail(message, code, as_json=self.as_json, **extra)


def command(*, acts: bool = False, confirms: bool = False, database: bool = True,
            json: bool = True) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Give a command the common options and the error handling (see the module's docstring).

    ``database=False``: no --read-only/--dsn/--schema (``db``, ``bench`` bring their own).
    """

    def wrap(fn: Callable[..., None]) -> Callable[..., None]:
        sig = inspect.signature(fn, eval_str=True)
        own = list(sig.parameters.values())[1:]  # the first is the Call
        extra: list[inspect.Parameter] = []
        if acts:
            extra += [_REASON, _DRY_RUN]
        if confirms:
            extra.append(_YES)
        if acts:
            extra.append(_ACTOR)
        if database:
            extra += [_READ_ONLY, _DSN, _SCHEMA, _REPLICA_DSN, _REPLICA_MAX_LAG]
        if json:
            extra.append(_JSON)
        names = {p.name for p in extra}

        @functools.wraps(fn)
        def run(*args: Any, **kwargs: Any) -> None:
            cx = Call(**{k: kwargs.pop(k) for k in list(kwargs) if k in names}, acts=acts)
            try:
                with handled(cx.as_json):
                    fn(cx, *args, **kwargs)
            finally:
                cx.close()

        run.__signature__ = sig.replace(  # type: ignore[attr-defined]
            parameters=[*own, *extra], return_annotation=None
        )
        run.__annotations__ = {}  # typer reads the signature above, already evaluated
        return run

    return wrap


# -- the top-level command -------------------------------------------------------------------
def _wants_json(argv: list[str]) -> bool:
    return "--json" in (argv[: argv.index("--")] if "--" in argv else argv)


class Group(TyperGroup):
    """The ``forklift`` command: usage errors as one line (or the JSON error object), exit 2."""

    def main(  # type: ignore[override]
        self,
        args: list[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        from typer._click.exceptions import ClickException
        from typer.exceptions import Abort

        from forklift.cli import parse as cliparse

        cliparse.install()  # plain options parse without importing Pydantic
        argv = list(sys.argv[1:] if args is None else args)
        try:
            rv = super().main(argv, prog_name, complete_var, standalone_mode=False, **extra)
        except ClickException as exc:
            if type(exc).__name__ == "NoArgsIsHelpError":
                if exc.format_message().strip():
                    exc.show()
                rv = 2
            else:
                ctx = getattr(exc, "ctx", None)
                where = ctx.command_path if ctx is not None else (prog_name or "forklift")
                message = f"{exc.format_message()} (try: {where} --help)"
                say_error(message, "usage_error", as_json=_wants_json(argv))
                rv = exc.exit_code
        except Abort:
            sys.stderr.write("aborted: nothing changed\n")
            rv = 1
        if not standalone_mode:
            return rv
        sys.exit(rv if isinstance(rv, int) else 0)
