"""Every JSON shape the how-to guides show for a command's ``--json`` output, read against the
real output of that command on a seeded database: each key they show exists, with a value of the
type they show (values themselves are examples; null in the output stands for a figure that does
not exist yet, as the guides say).

The guides write shapes two ways: the fenced ```json block of ``stats --json``, and inline
sketches such as ``{"jobs": [{"id", "queue"}], "count": 42}`` where a bare key says only that
it exists, ``...`` stands for more, ``{...}`` for any object and ``a | b`` for either.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
from apps import batches as bapp
from apps.ops import error, insert_job, register_worker
from typer.testing import CliRunner

from forklift.cli.main import app as cli
from forklift.ops import Operator

#: The pages that show ``--json`` output: the how-to guides (the JSON reference is generated
#: from the code, so it cannot drift; the guides' examples can).
GUIDES = Path(__file__).resolve().parents[2] / "docs" / "how-to"


def guides_text() -> str:
    return "\n\n".join(p.read_text("utf-8") for p in sorted(GUIDES.rglob("*.md")))


# -- the guides' sketches, parsed ----------------------------------------------------------------
@dataclass(frozen=True)
class Anything:
    """A value whose type the guides do not show (``{...}``, ``[ids]``, ``null``)."""


@dataclass(frozen=True)
class Null:
    """``| null`` in a sketch: the value may be null."""


@dataclass(frozen=True)
class Either:
    choices: tuple[Any, ...]


@dataclass(frozen=True)
class Obj:
    #: key -> shown value (Anything for a bare key)
    keys: dict[str, Any]


class Sketch:
    """A recursive-descent reader of the guides' JSON sketches (JSON is one of them)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.at = 0

    def parse(self) -> Any:
        value = self.value()
        self.space()
        assert self.at == len(self.text), f"trailing text in sketch: {self.text[self.at:]!r}"
        return value

    def space(self) -> None:
        while self.at < len(self.text) and self.text[self.at].isspace():
            self.at += 1

    def peek(self, s: str) -> bool:
        self.space()
        return self.text.startswith(s, self.at)

    def take(self, s: str) -> None:
        assert self.peek(s), f"expected {s!r} at {self.text[self.at:self.at + 30]!r}"
        self.at += len(s)

    def value(self) -> Any:
        first = self.single()
        choices = [first]
        while self.peek("|"):
            self.take("|")
            choices.append(self.single())
        if len(choices) == 1:
            return Anything() if isinstance(first, Null) else first  # a lone null: any type
        return Either(tuple(choices))

    def single(self) -> Any:
        self.space()
        if self.peek("{...}"):
            self.take("{...}")
            return Anything()
        if self.peek("{"):
            return self.obj()
        if self.peek("["):
            return self.array()
        if self.peek('"'):
            return self.string()
        m = re.compile(r"-?\d+(\.\d+)?([eE][-+]?\d+)?|true|false|null|\w+").match(self.text,
                                                                                   self.at)
        assert m, f"unreadable sketch at {self.text[self.at:self.at + 30]!r}"
        self.at = m.end()
        word = m.group(0)
        if word in ("true", "false"):
            return word == "true"
        if word == "null":
            return Null()
        if re.fullmatch(r"-?\d.*", word):
            return json.loads(word)
        return Anything()  # a word standing for values: [paths], [ids]

    def string(self) -> str:
        m = re.compile(r'"((?:[^"\\]|\\.)*)"').match(self.text, self.at)
        assert m
        self.at = m.end()
        return str(json.loads(m.group(0)))

    def array(self) -> list[Any]:
        self.take("[")
        items = []
        while not self.peek("]"):
            items.append(self.value())
            if self.peek(","):
                self.take(",")
        self.take("]")
        return items

    def obj(self) -> Obj:
        self.take("{")
        keys: dict[str, Any] = {}
        while not self.peek("}"):
            if self.peek("..."):
                self.take("...")
                self.space()
                while self.at < len(self.text) and (self.text[self.at].isalnum()
                                                   or self.text[self.at] == "_"):
                    self.at += 1  # ...detail
            else:
                key = self.string()
                keys[key] = Anything()
                if self.peek(":"):
                    self.take(":")
                    keys[key] = self.value()
            if self.peek(","):
                self.take(",")
        self.take("}")
        return Obj(keys)


def sketch(text: str) -> Any:
    return Sketch(text).parse()


# -- the check ----------------------------------------------------------------------------------
def mismatches(shown: Any, real: Any, where: str = "$") -> list[str]:
    """What the guides show that the real output lacks or types otherwise."""
    if isinstance(shown, Anything) or (real is None and not isinstance(shown, (Obj, dict, list))):
        return []  # null: a figure that does not exist yet (the guides say so)
    if isinstance(shown, Null):
        return [] if real is None else [f"{where}: shown null, is {real!r}"]
    if isinstance(shown, Either):
        found = [mismatches(c, real, where) for c in shown.choices]
        return [] if any(not f for f in found) else found[0]
    if isinstance(shown, Obj):
        if not isinstance(real, dict):
            return [f"{where}: the guides show an object, the output has {type(real).__name__}"]
        out = []
        for key, value in shown.keys.items():
            if key == "...":
                continue
            if not re.fullmatch(r"[a-z_][a-z0-9_]*", key):  # an example entry of a map (an id)
                out += [m for k, v in real.items() for m in mismatches(value, v, f"{where}.{k}")]
                continue
            if key not in real:
                out.append(f"{where}.{key}: shown in the guides, missing from the output")
            else:
                out += mismatches(value, real[key], f"{where}.{key}")
        return out
    if isinstance(shown, dict):  # parsed from real JSON (the fenced block)
        return mismatches(Obj({k: plain(v) for k, v in shown.items()}), real, where)
    if isinstance(shown, list):
        if not isinstance(real, list):
            return [f"{where}: the guides show a list, the output has {type(real).__name__}"]
        items = [s for s in shown if s != "..."]
        if not items or not real:
            return []
        return [m for i, r in enumerate(real) for m in mismatches(plain(items[0]), r,
                                                                  f"{where}[{i}]")]
    if shown == "...":
        return [] if real is None or isinstance(real, str) else [f"{where}: not a string"]
    if isinstance(shown, bool):
        return [] if isinstance(real, bool) else [f"{where}: shown a boolean, is {real!r}"]
    if isinstance(shown, (int, float)):
        ok = isinstance(real, (int, float)) and not isinstance(real, bool)
        return [] if ok else [f"{where}: shown a number, is {real!r}"]
    if isinstance(shown, str):
        return [] if isinstance(real, str) else [f"{where}: shown a string, is {real!r}"]
    return []


def plain(value: Any) -> Any:
    """A value of the fenced JSON block, read as a sketch (null: any type)."""
    if value is None:
        return Anything()
    if isinstance(value, dict):
        return Obj({k: plain(v) for k, v in value.items()})
    return value


# -- where the guides show them --------------------------------------------------------------------
def json_shapes() -> dict[str, str]:
    """label -> sketch, for every ``--json`` shape the guides show."""
    text = guides_text()
    found: dict[str, str] = {}
    fenced = re.search(r"`stats --json`:\s*(?:<!--[^>]*-->\s*)?```json\n(.*?)```", text, re.S)
    assert fenced, "the guides show stats --json in a fenced block"
    found["stats --json"] = fenced.group(1)
    inline = re.compile(r"`(?P<label>[^`]*--json[^`]*)`(?: \([^)]*\))?:\s+`(?P<shape>[{\[][^`]*)`")
    for m in inline.finditer(text):
        found[" ".join(m.group("label").split())] = m.group("shape")
    filt = re.search(r"`dead requeue\|delete --json`: the bulk\s+report above, its `filter` being"
                     r"\s+`(\{[^`]*\})`", text)
    assert filt, "the guides show the filter of dead requeue --json"
    found["dead requeue|delete --json filter"] = filt.group(1)
    workflow = re.search(r"With `--json`: `outbox list` gives `([^`]*)`; `outbox retry` gives"
                         r" `([^`]*)`; `events list` a list of `([^`]*)`; `events waits` a list"
                         r" of `([^`]*)`", text)
    assert workflow, "the guides show the outbox and events JSON"
    found["outbox list --json"] = workflow.group(1)
    found["outbox retry --json"] = workflow.group(2)
    found["events list --json"] = "[" + workflow.group(3) + "]"
    found["events waits --json"] = "[" + workflow.group(4) + "]"
    shown = re.search(r"`jobs show --json`: the job's columns \(([^)]*)\) plus (.*?)"
                      r"\. Each\s+error entry: `([^`]*)`", text, re.S)
    assert shown, "the guides show jobs show --json"
    columns = re.findall(r"`(\w+)`", shown.group(1))
    parts = re.findall(r"`(\"\w+\"(?:: [^`]*)?)`", shown.group(2))
    found["jobs show --json"] = ("{" + ", ".join(f'"{c}"' for c in columns if c != "errors")
                                 + ', "errors": [' + shown.group(3) + "], "
                                 + ", ".join(parts) + "}")
    enqueued = re.search(r"`enqueue --json`: the job \(([^)]*)\)", text)
    assert enqueued, "the guides show enqueue --json"
    found["enqueue --json"] = "{" + ", ".join(
        f'"{k}"' for k in re.findall(r"`(\w+)`", enqueued.group(1))) + "}"
    return found


#: Shapes whose command exits 1 by design: one of the ids given is refused.
REFUSED = {"jobs retry|cancel|delete|run-now ID... --json"}


#: label -> (the commands whose output it describes (``{name}`` from the seed), where in it).
COMMANDS: dict[str, tuple[list[list[str]], tuple[str, ...]]] = {
    "stats --json": ([["stats", "--json"]], ()),
    "jobs list --json": ([["jobs", "list", "--state", "dead", "--json"]], ()),
    "queues explain --json": ([["queues", "explain", "mail", "--json"],
                               ["jobs", "explain", "{dead}", "--json"]], ()),
    "jobs retry|cancel|delete|run-now ID... --json": (
        [["jobs", "retry", "{dead}", "{waiting}", "--yes", "--json"]], ()),
    "jobs retry|cancel|delete|run-now --FILTER --json": (
        [["jobs", "retry", "--state", "dead", "--dry-run", "--json"],
         ["jobs", "retry", "--state", "dead", "--yes", "--json"]], ()),
    "dead groups --json": ([["dead", "groups", "--json"]], ()),
    "dead requeue|delete --json filter": (
        [["dead", "requeue", "{group}", "--dry-run", "--json"]], ("filter",)),
    "batches cancel --json": ([["batches", "cancel", "{batch}", "--dry-run", "--json"]], ()),
    "retry-failed --json": ([["batches", "retry-failed", "{batch}", "--dry-run", "--json"]], ()),
    "jobs show --json": ([["jobs", "show", "{dead}", "--json"], ["jobs", "show", "{waiting}", "--json"]], ()),
    "enqueue --json": ([["enqueue", "basic.echo", "--args", '{{"name": "a"}}', "--app", "apps.basic:app",
                         "--json"]], ()),
    "queues list --json": ([["queues", "list", "--json"]], ()),
    "audit --json": ([["audit", "--json"]], ()),
    "prune --json": ([["prune", "--completed-older-than", "0s", "--dry-run", "--json"]], ()),
    "outbox list --json": ([["outbox", "list", "--json"]], ()),
    "outbox retry --json": ([["outbox", "retry", "{message}", "--yes", "--json"]], ()),
    "events list --json": ([["events", "list", "--json"]], ()),
    "events waits --json": ([["events", "waits", "--json"]], ()),
}
#: Shapes not read here, and why.
ELSEWHERE = {
    "db remove --json": "stops and deletes the embedded server: tests/cli/test_cli_db.py",
}


def run(dsn: str, *args: str, refused: bool = False) -> Any:
    result = CliRunner().invoke(cli, list(args), env={"FORKLIFT_DSN": dsn})
    assert result.exit_code == (1 if refused else 0), (args, result.stdout, result.stderr)
    return json.loads(result.stdout)


@pytest.fixture
def seeded(dsn: str, conn: psycopg.Connection[Any]) -> dict[str, str]:
    """Some of everything: jobs in each state, a dead group, a paused queue, workers, an audit
    trail, a waiting batch, a dead outbox message, an event and a job waiting for one."""
    insert_job(conn, queue="mail")
    waiting = insert_job(conn, queue="mail", state="scheduled")
    insert_job(conn, queue="mail", state="running", worker_id="w1")
    insert_job(conn, queue="mail", state="completed")
    dead = insert_job(conn, queue="mail", state="dead", errors=[error("smtp", "550 refused")])
    register_worker(conn, "w1", ["mail"], slots=3, in_use=1)
    register_worker(conn, "w2", ["mail"], state="draining")
    CliRunner().invoke(cli, ["queues", "pause", "mail", "--reason", "seed"],
                       env={"FORKLIFT_DSN": dsn})
    bapp.setup(conn)
    with bapp.bound(dsn, conn) as bound:
        batch, _ = bound.batch("batch.step", [{"n": 0}, {"n": 1}], caller="seed", mode="serial")
    message = conn.execute(
        "INSERT INTO forklift.outbox (topic, payload, state) VALUES ('t', '{}', 'dead')"
        " RETURNING id").fetchone()
    assert message is not None
    conn.execute("INSERT INTO forklift.events (name, data, expires_at)"
                 " VALUES ('order.paid', '{}', now() + interval '1 day')")
    conn.execute("INSERT INTO forklift.job_steps (job_id, name, state, fence, attempt, event,"
                 " match, wake_at) VALUES (%s, 'paid', 'waiting', 1, 1, 'order.paid',"
                 " '{\"order\": 7}', now() + interval '1 hour')", (waiting,))
    with Operator(dsn) as op:
        group = op.dead_groups().groups[0].id
    return {"dead": str(dead), "waiting": str(waiting), "batch": str(batch.id),
            "group": group, "message": str(message[0])}


def test_the_check_names_what_the_output_lacks_or_types_otherwise() -> None:
    shown = sketch('{"a", "b": 1, "c": [{"d": true}], "e": "x" | null, "f": {...}}')
    assert mismatches(shown, {"a": 0, "b": 2.5, "c": [{"d": False}], "e": None, "f": {}}) == []
    assert mismatches(shown, {"b": "1", "c": [{"d": 1}], "e": 3, "f": 0}) == [
        "$.a: shown in the guides, missing from the output", "$.b: shown a number, is '1'",
        "$.c[0].d: shown a boolean, is 1", "$.e: shown a string, is 3"]
    assert mismatches(sketch('{"n": null}'), {"n": [1]}) == []  # a lone null: any type


def test_every_json_shape_in_the_guides_is_read_here() -> None:
    shapes = json_shapes()
    assert set(shapes) == set(COMMANDS) | set(ELSEWHERE)
    for text in shapes.values():
        sketch(text)  # each one reads


@pytest.mark.parametrize("label", sorted(COMMANDS))
def test_the_guides_json_shape_matches_the_real_output(
    dsn: str, seeded: dict[str, str], label: str
) -> None:
    shown = sketch(json_shapes()[label])
    commands, path = COMMANDS[label]
    for args in commands:
        real = run(dsn, *(a.format(**seeded) for a in args), refused=label in REFUSED)
        for key in path:
            real = real[key]
        if isinstance(shown, list) and isinstance(real, list):
            assert real, f"{args}: seed something for it to show"
        found = mismatches(shown, real)
        assert found == [], "\n".join(found)
