"""Scrubbing secrets from error text, cleaning text for display, and error-history entries.

Pure unit tests: no database.
"""

from __future__ import annotations

import base64
import json
import string
import sys
import time
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pydantic
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from forklift._base.scrub import (
    FAILURE_CODES,
    MESSAGE_LIMIT,
    clean_display,
    error_entry,
    scrub,
    traceback_summary,
)

CANARY = "s3cr3t-CANARY-42"


def _b64url(data: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()


# Realistic token shapes, assembled at run time so that secret scanners do not flag this file.
AWS_KEY_ID = "AKIA" + "IOSFODNN7EXAMPLE"
GITHUB_CLASSIC = "gh" + "p_" + "aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dF3hJ5"
GITHUB_FINE = "github" + "_pat_" + "11ABCDEFG0123456789_" + "abcdefghijKLMNOPQRST0123456789"
SLACK = "xo" + "xb-" + "123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx"
JWT = ".".join(
    (_b64url({"alg": "HS256", "typ": "JWT"}), _b64url({"sub": "1234567890"}), "dBjftJeZ4CVP")
)

# Every context a secret is written in. Each one holds the canary; none may let it through.
SECRET_CONTEXTS = [
    "postgresql://user:{c}@db.internal:5432/app",
    "postgres://app_user:{c}@10.0.0.5/app?sslmode=require",
    "redis://:{c}@cache:6379/0",
    "amqp://guest:{c}@rabbit//",
    "https://deploy:{c}@example.com/repo.git",
    "postgresql://user:p@ss:w{c}@db/app",
    "Authorization: Bearer {c}",
    "authorization: bearer {c}",
    "AUTHORIZATION=Token {c}",
    "Authorization: {c}",
    "Authorization: Basic {c}",
    "Proxy-Authorization: Basic {c}",
    "{{'Authorization': 'Bearer {c}', 'Accept': 'application/json'}}",
    '{{"authorization": "bearer {c}"}}',
    "bearer {c}",
    "Bearer {c}.",
    "Basic {c}",
    "password={c}",
    "PASSWORD={c}",
    "PGPASSWORD={c}",
    "db_password = {c}",
    "passwd: {c}",
    "pwd={c}",
    "secret={c}",
    "secret_key={c}",
    "token={c}",
    "access_token={c}",
    "X-Auth-Token: {c}",
    "api_key={c}",
    "apikey={c}",
    "API-KEY: {c}",
    "X-Api-Key: {c}",
    "access_key={c}",
    "aws_secret_access_key={c}",
    "client_secret={c}",
    "private_key={c}",
    '"password": "{c}"',
    '"password":"{c}"',
    "'password': '{c}'",
    "password='{c}'",
    'password="{c}"',
    "password=b'{c}'",
    'password="it is {c} with spaces"',
    "password='it\\'s {c}'",
    '"password": "an \\"escaped\\" {c}"',
    'password="{c}',
    "host=db port=5432 password={c} dbname=app",
    "https://api.example.com/v1/items?page=2&token={c}&limit=10",
    "connect(user='app', password='{c}', host='db')",
    "{{'user': 'app', 'password': '{c}', 'retries': 3}}",
    "Cookie: session={c}; theme=dark",
    "Set-Cookie: sid={c}; Path=/; HttpOnly",
    "[type=int_parsing, input_value='{c}', input_type=str]",
    "[type=dict_type, input_value={{'a': 1, 'b': '{c}, input_type=str]'}}, input_type=dict]",
    "[type=model_type, input_value=Creds(user='a', key='{c}'), input_type=Creds]",
    "-----BEGIN RSA PRIVATE KEY-----\nMIIE{c}\nAoGBAL\n-----END RSA PRIVATE KEY-----",
    "-----BEGIN PRIVATE KEY-----\n{c}",
]


def _secret(context: str) -> str:
    return context.format(c=CANARY)


@pytest.mark.parametrize("context", SECRET_CONTEXTS)
def test_canary_never_survives_any_context(context: str) -> None:
    text = _secret(context)
    assert CANARY in text
    for wrapped in (
        text,
        f"job failed: {text}",
        f"job failed: {text} (attempt 3)\nTraceback follows",
        f"ERROR\t{text}\n{text}",
        text.upper() if "input_value" not in text else text,
    ):
        out = scrub(wrapped)
        assert CANARY not in out
        assert CANARY.upper() not in out
        assert "***" in out


prose = st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\x00"), max_size=200)


@given(
    context=st.sampled_from(SECRET_CONTEXTS),
    before=prose,
    after=prose,
    sep_before=st.sampled_from([" ", "\n", "\t", ": ", "; ", "(", "[", "{", ", "]),
    sep_after=st.sampled_from([" ", "\n", "\t", ")", "]", "}", ", ", "; ", ""]),
)
@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
def test_canary_never_survives_surrounded_by_arbitrary_text(
    context: str, before: str, after: str, sep_before: str, sep_after: str
) -> None:
    out = scrub(before + sep_before + _secret(context) + sep_after + after)
    assert CANARY not in out


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "could not connect: postgresql://app:hunter2@db.internal:5432/prod (timeout)",
            "could not connect: postgresql://app:***@db.internal:5432/prod (timeout)",
        ),
        ("redis://:hunter2@cache:6379/0 refused", "redis://:***@cache:6379/0 refused"),
        ("mongodb+srv://me:pw@cluster0/x", "mongodb+srv://me:***@cluster0/x"),
        ("GET /x Authorization: Bearer abc.def-ghi", "GET /x Authorization: Bearer ***"),
        ("headers={'Authorization': 'Bearer xyz'}", "headers={'Authorization': 'Bearer ***'}"),
        ("got 401 with bearer xyz from api", "got 401 with bearer *** from api"),
        ("Authorization: Basic dXNlcjpwYXNz", "Authorization: Basic ***"),
        ("sent Basic dXNlcjpwYXNz upstream", "sent Basic *** upstream"),
        ("password=hunter2 user=bob", "password=*** user=bob"),
        ("Password: hunter2", "Password: ***"),
        ('{"password": "hunter2", "user": "bob"}', '{"password": "***", "user": "bob"}'),
        ("login(user='bob', password='hunter2')", "login(user='bob', password='***')"),
        ("passwd=x pwd=y", "passwd=*** pwd=***"),
        ("SECRET=abc; next", "SECRET=***; next"),
        ("?token=abc&page=2", "?token=***&page=2"),
        ("api_key: abc, apikey=def", "api_key: ***, apikey=***"),
        ("access_key=AK client_secret='cs'", "access_key=*** client_secret='***'"),
        ("Cookie: sid=abc; theme=dark\nnext line", "Cookie: ***\nnext line"),
        (f"key id {AWS_KEY_ID} denied", "key id *** denied"),
        (f"push failed for {GITHUB_CLASSIC}.", "push failed for ***."),
        (f"using {GITHUB_FINE} now", "using *** now"),
        (f"slack said no to {SLACK}", "slack said no to ***"),
        (f"jwt {JWT} expired", "jwt *** expired"),
        (
            "1 validation error for int\n  Input should be a valid integer "
            "[type=int_parsing, input_value='a, b, input_type=c', input_type=str]",
            "1 validation error for int\n  Input should be a valid integer "
            "[type=int_parsing, input_value=***, input_type=str]",
        ),
    ],
)
def test_each_secret_shape_is_scrubbed_and_context_kept(text: str, expected: str) -> None:
    assert scrub(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "the password was wrong",
        "Basic auth required",
        "basic HTTP authentication failed.",
        "max_tokens=100 token_count=5 tokens: 7",
        "Unexpected token: }",
        "https://example.com/path?page=2",
        "postgresql://db.internal:5432/app",
        "mail user@example.com at mailto:a@b.com",
        "host=db port=5432 dbname=app user=app",
        "ValueError: invalid literal for int() with base 10: 'abc'",
        "AKIA is a prefix, ghp_ too, eyJ as well",
        "",
    ],
)
def test_text_without_secrets_is_left_alone(text: str) -> None:
    assert scrub(text) == text


def test_nul_is_removed_before_scrubbing() -> None:
    assert scrub("a\x00b\x00") == "ab"
    # A NUL splitting a key must not hide the secret behind it.
    out = scrub(f"pass\x00word={CANARY}")
    assert out == "password=***"


def test_lone_surrogates_become_storable() -> None:
    out = scrub("file b'\udcff' missing")
    out.encode("utf-8")  # PostgreSQL rejects what UTF-8 cannot encode
    assert "udcff" in out


def test_huge_message_is_capped_with_marker() -> None:
    text = "x" * 1_000_000
    out = scrub(text)
    assert len(out) <= MESSAGE_LIMIT
    assert "truncated" in out
    assert "1000000" in out
    assert scrub("y" * MESSAGE_LIMIT) == "y" * MESSAGE_LIMIT
    short = scrub("z" * 500, limit=200)
    assert len(short) <= 200
    assert short.startswith("zzz")
    assert "truncated" in short


def test_secret_cut_at_the_scrub_boundary_does_not_survive() -> None:
    # scrub() scans a bounded prefix (8x the limit). A long scrubbed value before the cut pulls
    # the cut point into the kept head; a token cut there no longer matches its own pattern, so
    # it must be dropped rather than kept half-scrubbed.
    budget = MESSAGE_LIMIT * 8
    head = "password="
    for inside in range(1, len(JWT), 4):
        filler = budget - len(head) - 1 - inside
        text = head + "p" * filler + " " + JWT + " tail"
        out = scrub(text)
        assert out.startswith("password=***")
        assert "eyJ" not in out
        assert len(out) <= MESSAGE_LIMIT
        assert "truncated" in out


@given(st.text(max_size=3000))
@settings(max_examples=300)
def test_scrub_never_raises_and_output_is_storable(text: str) -> None:
    out = scrub(text)
    assert isinstance(out, str)
    assert "\x00" not in out
    assert len(out) <= MESSAGE_LIMIT
    out.encode("utf-8")


secretish = st.lists(
    st.sampled_from(
        [
            *string.ascii_letters,
            *string.digits,
            *" =:'\"/@,;&\n",
            "password",
            "token",
            "://",
            "Authorization: ",
            "Bearer ",
            "Basic ",
            "input_value=",
            ", input_type=",
        ]
    ),
    max_size=40,
).map("".join)


@given(secretish)
@settings(max_examples=500)
def test_scrub_is_idempotent(text: str) -> None:
    once = scrub(text)
    assert scrub(once) == once


@pytest.mark.parametrize(
    "text",
    [
        "a" * 200_000,
        "password=" * 20_000,
        'password="' * 20_000,
        "://a:" * 40_000,
        "eyJ" * 60_000,
        "input_value=" * 20_000,
        "Bearer " * 30_000,
        "x@" * 100_000,
        "-----BEGIN PRIVATE KEY-----" + "A" * 200_000,
    ],
    ids=lambda text: repr(text[:16]),
)
def test_scrub_is_linear_on_pathological_input(text: str) -> None:
    # A regression guard against catastrophic backtracking, not a benchmark: linear passes take
    # milliseconds here, a quadratic one takes minutes. The bound is deliberately generous.
    started = time.perf_counter()
    scrub(text)
    assert time.perf_counter() - started < 5.0


def test_real_pydantic_validation_error_input_is_scrubbed() -> None:
    class Creds(pydantic.BaseModel):
        user: str
        port: int
        nested: dict[str, int]

    with pytest.raises(pydantic.ValidationError) as info:
        Creds.model_validate(
            {"user": 1, "port": CANARY, "nested": {"k": f"{CANARY}, input_type=x']"}}
        )
    raw = str(info.value)
    assert CANARY in raw  # pydantic echoes the input; that is what scrub is for
    out = scrub(raw)
    assert CANARY not in out
    assert "input_value=***, input_type=str]" in out
    assert "port" in out and "nested.k" in out  # the useful part of the message stays

    entry = error_entry(info.value, code="invalid_payload", attempt=1)
    assert CANARY not in json.dumps(entry)
    assert entry["type"] == "pydantic_core._pydantic_core.ValidationError"


def test_pydantic_type_adapter_error_is_scrubbed() -> None:
    with pytest.raises(pydantic.ValidationError) as info:
        pydantic.TypeAdapter(list[int]).validate_python(["1", {"password": CANARY}])
    assert CANARY not in scrub(str(info.value))


# ---------------------------------------------------------------------------- clean_display


def test_clean_display_removes_ansi_controls_and_bidi() -> None:
    text = (
        "\x1b[31mred\x1b[0m plain\r\n"
        "\ttabbed\x07\x08\x0b\x0c\x7f\x85\x9f"
        "\x1b]0;set title\x07\x1b]8;;http://evil\x1b\\link\x1b]8;;\x1b\\"
        "\x9b2J\x1bc"
        "\u202egnp.exe\u202c \u2066iso\u2069 \u200e\u200f\u061cend"
    )
    out = clean_display(text)
    assert out == "red plain\n\ttabbedlinkgnp.exe iso end"
    assert "\x1b" not in out


@given(st.text())
def test_clean_display_leaves_only_displayable_characters(text: str) -> None:
    out = clean_display(text)
    bidi = set("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c")
    for ch in out:
        code = ord(ch)
        assert ch in "\n\t" or not (code < 0x20 or 0x7F <= code <= 0x9F)
        assert ch not in bidi


def test_clean_display_keeps_text_and_does_not_escape_markup() -> None:
    text = "[bold]not markup here[/bold] ünïcödé 日本 emoji 🚚\nline two\twith tab"
    assert clean_display(text) == text


# ---------------------------------------------------------------------------- tracebacks


def _raise_with_canary_local() -> None:
    password = CANARY  # a local holding a secret must never reach the error entry
    assert password
    raise RuntimeError("handler failed")  # s3cr3t-CANARY-42 in the source line, too


def _outer() -> None:
    _raise_with_canary_local()


def test_traceback_has_no_locals_and_no_source_lines() -> None:
    try:
        _outer()
    except RuntimeError as exc:
        entry = error_entry(exc, code="error", attempt=2, worker_id="host:123")
    dumped = json.dumps(entry)
    assert CANARY not in dumped
    assert "source line" not in dumped
    frames = entry["traceback"]
    assert isinstance(frames, list)
    for frame in frames:
        assert set(frame) == {"file", "line", "func"}
    assert [f["func"] for f in frames][-2:] == ["_outer", "_raise_with_canary_local"]
    assert str(frames[-1]["file"]).endswith("test_scrub.py")
    assert isinstance(frames[-1]["line"], int)


def _recurse(n: int) -> None:
    if n == 0:
        raise ValueError("bottom")
    _recurse(n - 1)


def test_traceback_keeps_the_innermost_frames_up_to_limit() -> None:
    try:
        _recurse(50)
    except ValueError as exc:
        full = traceback_summary(exc, limit=1000)
        short = traceback_summary(exc, limit=5)
        default = traceback_summary(exc)
        none = traceback_summary(exc, limit=0)
    assert none == []
    assert len(full) == 52  # this test's frame, 50 recursive calls, the raising one
    assert short == full[-5:]
    assert len(default) == 20
    assert default == full[-20:]
    assert full[0]["func"] == "test_traceback_keeps_the_innermost_frames_up_to_limit"
    # innermost last: the raising line differs from the recursive call's line
    assert full[-1]["line"] != full[-2]["line"]


def test_traceback_does_not_follow_chained_causes() -> None:
    def inner() -> None:
        raise KeyError("inner")

    def outer() -> None:
        try:
            inner()
        except KeyError as err:
            raise RuntimeError("outer") from err

    try:
        outer()
    except RuntimeError as exc:
        funcs = [f["func"] for f in traceback_summary(exc)]
    assert funcs[-1].endswith("outer")
    assert not any(str(f).endswith("inner") for f in funcs)


def test_traceback_paths_are_shortened_after_site_packages() -> None:
    path = "/opt/app/.venv/lib/python3.11/site-packages/somepkg/client.py"
    namespace: dict[str, Any] = {}
    exec(compile("def boom():\n    raise OSError('x')\n", path, "exec"), namespace)
    try:
        namespace["boom"]()
    except OSError as exc:
        frames = traceback_summary(exc)
    assert frames[-1] == {"file": "somepkg/client.py", "line": 2, "func": "boom"}


def test_traceback_of_a_real_installed_package_is_shortened() -> None:
    try:
        pydantic.TypeAdapter(int).validate_python("x")
    except pydantic.ValidationError as exc:
        files = [str(f["file"]) for f in traceback_summary(exc)]
    installed = [f for f in files if f.startswith("pydantic/")]
    if "site-packages" in pydantic.__file__:
        assert installed, files
    assert not any("site-packages" in f for f in files)


def test_traceback_of_an_exception_never_raised_is_empty() -> None:
    assert traceback_summary(ValueError("never raised")) == []


# ---------------------------------------------------------------------------- error_entry


class Boom(Exception):
    pass


def _raised(exc: BaseException) -> BaseException:
    try:
        raise exc
    except BaseException as caught:
        return caught


def test_error_entry_shape() -> None:
    at = datetime(2024, 5, 1, 12, 30, tzinfo=UTC)
    exc = _raised(ValueError(f"bad dsn postgresql://u:{CANARY}@h/db"))
    entry = error_entry(exc, code="error", attempt=3, worker_id="w-1", at=at)
    assert list(entry) == ["code", "type", "message", "traceback", "attempt", "worker", "at"]
    assert entry["code"] == "error"
    assert entry["type"] == "ValueError"
    assert entry["message"] == "bad dsn postgresql://u:***@h/db"
    assert entry["attempt"] == 3
    assert entry["worker"] == "w-1"
    assert entry["at"] == "2024-05-01T12:30:00+00:00"
    assert entry["traceback"]
    assert json.loads(json.dumps(entry)) == entry


def test_error_entry_type_is_module_qualified_unless_builtin() -> None:
    assert error_entry(Boom("x"), code="error", attempt=1)["type"] == f"{__name__}.Boom"
    assert error_entry(KeyError("k"), code="error", attempt=1)["type"] == "KeyError"
    assert (
        error_entry(json.JSONDecodeError("m", "d", 0), code="error", attempt=1)["type"]
        == "json.decoder.JSONDecodeError"
    )


def test_error_entry_given_message_is_scrubbed_and_wins() -> None:
    entry = error_entry(
        _raised(Boom("from the exception")),
        code="invalid_result",
        attempt=1,
        message=f"result not JSON: token={CANARY}",
    )
    assert entry["message"] == "result not JSON: token=***"
    assert entry["traceback"]


def test_error_entry_without_exception() -> None:
    entry = error_entry(None, code="lease_expired", attempt=2, worker_id=None)
    assert entry["type"] is None
    assert entry["message"] is None
    assert entry["traceback"] == []
    assert entry["worker"] is None
    parsed = datetime.fromisoformat(str(entry["at"]))
    assert parsed.utcoffset() == timedelta(0)
    assert abs(datetime.now(UTC) - parsed) < timedelta(minutes=5)
    with_message = error_entry(None, code="interrupted", attempt=1, message="drained")
    assert with_message["message"] == "drained"


def test_error_entry_times_are_utc() -> None:
    cest = timezone(timedelta(hours=2))
    entry = error_entry(None, code="timeout", attempt=1, at=datetime(2024, 5, 1, 14, tzinfo=cest))
    assert entry["at"] == "2024-05-01T12:00:00+00:00"
    naive = error_entry(None, code="timeout", attempt=1, at=datetime(2024, 5, 1, 14))
    assert naive["at"] == "2024-05-01T14:00:00+00:00"


def test_codes_only_drops_message_and_traceback() -> None:
    exc = _raised(Boom(f"customer 42 card 4111111111111111 {CANARY}"))
    entry = error_entry(
        exc, code="card_declined", attempt=1, worker_id="w", codes_only=True, message=CANARY
    )
    assert set(entry) == {"code", "type", "attempt", "worker", "at"}
    assert entry["code"] == "card_declined"
    assert entry["type"] == f"{__name__}.Boom"
    dumped = json.dumps(entry)
    assert CANARY not in dumped
    assert "4111" not in dumped


def test_error_entry_when_str_raises() -> None:
    class Unprintable(Exception):
        def __str__(self) -> str:
            raise RuntimeError("no str for you")

    entry = error_entry(_raised(Unprintable()), code="error", attempt=1)
    assert entry["message"] == f"{__name__}.{Unprintable.__qualname__}"
    assert entry["type"] == entry["message"]
    assert entry["traceback"]
    json.dumps(entry)


def test_error_entry_when_str_returns_a_non_string() -> None:
    class Weird(Exception):
        def __str__(self) -> Any:
            return 42

    entry = error_entry(Weird(), code="error", attempt=1)
    assert isinstance(entry["message"], str)


def test_error_entry_for_base_exceptions() -> None:
    entry = error_entry(_raised(SystemExit(3)), code="handler_exit", attempt=1)
    assert entry["type"] == "SystemExit"
    assert entry["message"] == "3"
    entry = error_entry(_raised(KeyboardInterrupt()), code="handler_exit", attempt=1)
    assert entry["type"] == "KeyboardInterrupt"


def test_error_entry_caps_a_huge_message_and_strips_nul() -> None:
    entry = error_entry(Boom("\x00" + "x" * 100_000), code="error", attempt=1)
    message = entry["message"]
    assert isinstance(message, str)
    assert len(message) <= MESSAGE_LIMIT
    assert "\x00" not in message
    assert "truncated" in message


def test_error_entry_survives_a_recursion_error() -> None:
    def down() -> None:
        down()

    limit = sys.getrecursionlimit()
    try:
        down()
    except RecursionError as exc:
        entry = error_entry(exc, code="error", attempt=1)
    assert entry["type"] == "RecursionError"
    frames = entry["traceback"]
    assert isinstance(frames, list) and len(frames) == 20
    assert sys.getrecursionlimit() == limit


# ---------------------------------------------------------------------------- failure codes


def test_failure_codes_are_documented() -> None:
    expected = {
        "error",
        "unknown_kind",
        "invalid_payload",
        "invalid_result",
        "timeout",
        "lease_expired",
        "lease_lost",
        "interrupted",
        "cancelled",
        "internal_error",
        "handler_exit",
        "expired",
        "invalid_batch_result",
        "upcast_failed",
        "payload_version_ahead",
    }
    assert set(FAILURE_CODES) == expected
    for code, description in FAILURE_CODES.items():
        assert code.isidentifier() and code == code.lower()
        assert description and "\n" not in description and len(description) < 100
