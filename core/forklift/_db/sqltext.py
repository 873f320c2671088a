"""SQL text with the schema filled in.

Queries are written with ``{s}`` where the schema goes, so they can sit beside the Python that
runs them and still serve any configured schema. Rendering is cached per (text, schema).
"""

from __future__ import annotations

import re
from functools import lru_cache

from psycopg import sql

_SCHEMA_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


def check_schema(name: str) -> str:
    if not _SCHEMA_NAME.match(name):
        from forklift._base.errors import ConfigError

        raise ConfigError(
            f"schema name {name!r} is not valid: use lower-case letters, digits and underscores"
        )
    return name


def channel(schema: str) -> str:
    """The NOTIFY channel that wakes workers of one schema; the payload is a queue name."""
    return f"{schema}_wake"


def control_channel(schema: str) -> str:
    """The NOTIFY channel for operator signals to workers (cancel a running job, ...)."""
    return f"{schema}_control"


#: ``state = 'running'`` in a statement that finds a batch of jobs by id: a value the planner
#: cannot see (an InitPlan), so it never proves ``jobs_running_idx``'s predicate from it and
#: reads the batch by primary key. Written as the literal, a generic plan made from statistics
#: taken while few jobs ran walked every running job of the fleet instead, and joined the
#: batch's array to each one: a settle of 1,000 beside 1,326 running jobs took 214 ms (a Nested
#: Loop whose join filter threw away 1,325,000 rows; tests/worker/test_settle_plan.py).
RUNNING = "(SELECT 'running'::text)"


@lru_cache(maxsize=512)
def render(text: str, schema: str) -> str:
    quoted = sql.Identifier(check_schema(schema)).as_string(None)
    return text.replace("{s}", quoted).replace("{channel}", sql.Literal(channel(schema)).as_string(None))


# A quoted literal or identifier: kept whole by compact().
_QUOTE = r"'(?:[^']|'')*'" "|" r'"(?:[^"]|"")*"'
# Quoted text or a comment, found in one scan so that a quote inside a comment, or "--" inside
# a literal, is read as what it is.
_QUOTED_OR_COMMENT = re.compile(_QUOTE + r"|--[^\n]*")
_QUOTED = re.compile(f"({_QUOTE})")
_TIGHT = re.compile(r" ?([(),]) ?| (=) ")


def compact(text: str) -> str:
    """``text`` without its comments and layout (one space between words, none beside a
    parenthesis, a comma or an ``=`` standing alone): the same statement in fewer bytes, so
    that a long statement on a hot path stays within the 4,096 bytes whose conversion psycopg
    caches (a longer one is parsed again, in Python, at every execute;
    ``psycopg._queries.MAX_CACHED_STATEMENT_LENGTH``).
    Quoted literals and identifiers pass untouched; dollar quotes and E'' strings are refused
    (forklift's statements use neither, and this scan would misread them). Callers cache what
    they build with it."""
    if "$" in text or re.search(r"(?<![\w'])[eE]'", text):
        raise ValueError("compact() does not read dollar-quoted or E'' strings")
    text = _QUOTED_OR_COMMENT.sub(lambda m: " " if m.group().startswith("--") else m.group(),
                                  text)
    pieces = _QUOTED.split(text)
    for i in range(0, len(pieces), 2):  # the even pieces are outside quotes
        pieces[i] = _TIGHT.sub(lambda m: m.group(1) or m.group(2),
                               re.sub(r"\s+", " ", pieces[i]))
    return "".join(pieces).strip()
