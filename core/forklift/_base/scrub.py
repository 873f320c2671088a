"""Make text that came from jobs safe to store and to show.

Secrets are scrubbed once, where an error is written (:func:`scrub`, :func:`error_entry`), so no
sink -- the job row, a log line, ``--json`` output, the console -- ever holds them. Renderers call
:func:`clean_display` to drop control, ANSI and bidi characters; escaping Rich markup is the
renderer's job.

Everything here runs on the failure path of a worker, so it is fast (a handful of linear regex
passes over a bounded prefix of the text) and never raises.
"""

from __future__ import annotations

import re
import traceback
from collections import deque
from datetime import UTC, datetime
from typing import Final

__all__ = [
    "FAILURE_CODES",
    "MESSAGE_LIMIT",
    "REDACTED",
    "clean_display",
    "error_entry",
    "scrub",
    "traceback_summary",
]

REDACTED: Final = "***"
MESSAGE_LIMIT: Final = 2000
"""Longest message :func:`scrub` returns, the truncation marker included."""

_MIN_LIMIT: Final = 100
_WITHHELD: Final = "[message withheld: it could not be scrubbed]"

FAILURE_CODES: Final[dict[str, str]] = {
    "error": "the handler raised an exception; retried by the kind's backoff",
    "unknown_kind": "no handler is registered for the job's kind on this worker",
    "invalid_payload": "the job's args did not validate against the kind's payload schema",
    "invalid_result": "the handler's result did not validate or serialise",
    "timeout": "the handler ran past the kind's timeout and was cancelled",
    "lease_expired": "the worker stopped heartbeating (crashed or hung); the job was rescued",
    "lease_lost": "another claim took the job while it ran; this run's writes were refused",
    "interrupted": "the worker drained at shutdown before the handler finished",
    "cancelled": "an operator or the application cancelled the job while it ran",
    "internal_error": "Fail raised with a code the kind did not declare, or an unstorable outcome",
    "handler_exit": "the handler raised a BaseException such as SystemExit or KeyboardInterrupt",
    "expired": "not started by its start-by deadline (expires=); dead, no attempt spent",
    "invalid_batch_result": "a batch handler returned no list of one outcome per job; dead",
    "upcast_failed": "an upcaster raised or returned no dict, or none reads the job's version;"
    " retried",
    "payload_version_ahead": "a note: the payload is newer than the worker reads; put back, no"
    " attempt spent",
}
"""The runner's own failure codes, with a one-line description each (listed in the failure-codes reference)."""


# --------------------------------------------------------------------------------------------
# scrub
#
# Every pattern starts at a literal (or, for token shapes, at a token boundary) and has no nested
# quantifiers and no unanchored `\w*` prefix, so each pass is linear in practice; scrub() also
# scans only a bounded prefix of the text (tests/unit/test_scrub.py checks pathological inputs).

_TOKEN68: Final = r"[A-Za-z0-9\-._~+/]"

# PEM private key blocks (an unterminated block is scrubbed to the end of the text).
_PEM = re.compile(
    r"(-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY-----)"
    r".*?"
    r"(-----END [A-Z0-9 ]{0,40}PRIVATE KEY-----|\Z)",
    re.DOTALL,
)

# Credentials in URLs, any scheme: ``scheme://user:password@host``. The user part stays; the
# password runs to the LAST ``@`` before whitespace or ``/``, so an unencoded ``@`` or ``:`` in a
# password is scrubbed too.
_URL_USERINFO = re.compile(r"(://[^\s/?#@:]*:)[^\s/]*@")

# ``Authorization: Bearer xyz``, also as a dict/JSON pair: a known scheme name is kept, the rest
# of the value (to the end of the line or a quote) is scrubbed.
_AUTH_SCHEMES: Final = (
    r"basic|bearer|digest|token|negotiate|ntlm|oauth|apikey|api-key|key|jwt|dpop|hoba|mutual"
    r"|sharedkey|ssws|hmac|aws4-hmac-sha256|scram-sha-1|scram-sha-256|vapid|privatetoken"
)
_AUTH_HEADER = re.compile(
    r"\b((?:proxy-)?authorization[\"']?[ \t]*[:=][ \t]*[\"']?)"
    r"(?:(" + _AUTH_SCHEMES + r")[ \t]+)?"
    r"[^\r\n\"']+",
    re.IGNORECASE,
)

# ``Cookie: a=b; c=d`` / ``Set-Cookie: ...``: the whole value.
_COOKIE_HEADER = re.compile(
    r"\b((?:set-)?cookie[\"']?[ \t]*[:=][ \t]*[\"']?)[^\r\n\"']+",
    re.IGNORECASE,
)

_BEARER = re.compile(r"\b(bearer[ \t]+)" + _TOKEN68 + r"+=*", re.IGNORECASE)
_BASIC = re.compile(r"\b(basic[ \t]+)(" + _TOKEN68 + r"{4,}=*)", re.IGNORECASE)
# "Basic auth required", "basic HTTP" are prose, not credentials: a base64 credential has a
# digit, ``+/=``, or capitals inside a lower-case run.
_PROSE_WORD = re.compile(r"(?:[A-Z]?[a-z]+|[A-Z]+)(?:[-.][a-z]+)*[.,]?")

# ``password=x``, ``"token": "x"``, ``api-key: x``, ``client_secret='x'``, case-insensitive.
# Only the key's tail is matched (``db_password``, ``client_secret``, ``aws_secret_access_key``
# match at ``password``, ``secret``, ``access_key``); what precedes it is kept as it was.
_KEYS: Final = (
    r"password|passwd|pwd|secret|token|api[_-]?key|apikey|access[_-]?key|private[_-]?key"
    r"|signature"
)
_KEY_VALUE = re.compile(
    r"((?:" + _KEYS + r")(?:[_-]?key)?[\"']?[ \t]*[:=][ \t]*)"
    r"(?:"
    r"([bBrRuU]{0,2})(?:\"((?:[^\"\\\n]|\\.)*)\"|'((?:[^'\\\n]|\\.)*)')"
    r"|([\"']?)[^\s\"',;&)\]}>]+"  # unquoted, or a quote never closed
    r")",
    re.IGNORECASE,
)

# Well-known token shapes, replaced whole.
_TOKEN_SHAPES = re.compile(
    "|".join(
        (
            # AWS access key ids
            r"(?<![A-Za-z0-9])(?:AKIA|ASIA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA|A3T[A-Z0-9])"
            r"[A-Z0-9]{16}(?![A-Za-z0-9])",
            # GitHub tokens: classic/oauth/user/server/refresh, and fine-grained
            r"(?<![A-Za-z0-9_])gh[pousr]_[A-Za-z0-9]{20,255}(?![A-Za-z0-9])",
            r"(?<![A-Za-z0-9_])github_pat_[A-Za-z0-9_]{20,255}",
            # Slack
            r"(?<![A-Za-z0-9])xox[abposr]-[A-Za-z0-9-]{8,255}",
            # JWTs: header.payload.signature (the signature may be empty for alg=none)
            r"(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{4,8192}\.[A-Za-z0-9_-]{4,8192}"
            r"\.[A-Za-z0-9_-]{0,8192}",
            # Stripe secret/restricted keys, Google API keys
            r"(?<![A-Za-z0-9])[sr]k_(?:live|test)_[A-Za-z0-9]{10,255}",
            r"(?<![A-Za-z0-9_-])AIza[0-9A-Za-z_-]{35}",
        )
    )
)

_INPUT_VALUE: Final = "input_value="
_INPUT_TYPE: Final = ", input_type="


def _scrub_input_values(text: str) -> str:
    """Replace pydantic's ``input_value=<repr>`` echoes with ``input_value=***``.

    The repr may hold commas, quotes, brackets and even ``, input_type=`` itself, so the value
    runs to the LAST ``, input_type=`` on its line (pydantic prints one error per line); failing
    that, to the next one anywhere (a repr with newlines); failing that, to the end of the line.
    """
    if _INPUT_VALUE not in text:
        return text
    out: list[str] = []
    pos = 0
    while True:
        i = text.find(_INPUT_VALUE, pos)
        if i < 0:
            break
        start = i + len(_INPUT_VALUE)
        eol = text.find("\n", start)
        if eol < 0:
            eol = len(text)
        end = text.rfind(_INPUT_TYPE, start, eol)
        if end < 0:
            end = text.find(_INPUT_TYPE, start)
            if end < 0:
                end = eol
        out.append(text[pos:start])
        out.append(REDACTED)
        pos = end
    out.append(text[pos:])
    return "".join(out)


def _key_value(m: re.Match[str]) -> str:
    head, prefix, dq, sq, lone = m.group(1, 2, 3, 4, 5)
    if dq is not None:
        return f'{head}{prefix}"{REDACTED}"'
    if sq is not None:
        return f"{head}{prefix}'{REDACTED}'"
    return head + (lone or "") + REDACTED


def _auth_header(m: re.Match[str]) -> str:
    scheme = m.group(2)
    return m.group(1) + (f"{scheme} " if scheme else "") + REDACTED


def _basic(m: re.Match[str]) -> str:
    if _PROSE_WORD.fullmatch(m.group(2)):
        return m.group(0)
    return m.group(1) + REDACTED


def _scrub_secrets(text: str) -> str:
    if "PRIVATE KEY-----" in text:
        text = _PEM.sub(lambda m: m.group(1) + REDACTED + m.group(2), text)
    text = _scrub_input_values(text)
    if "://" in text:
        text = _URL_USERINFO.sub(lambda m: m.group(1) + REDACTED + "@", text)
    text = _AUTH_HEADER.sub(_auth_header, text)
    text = _COOKIE_HEADER.sub(lambda m: m.group(1) + REDACTED, text)
    text = _BEARER.sub(lambda m: m.group(1) + REDACTED, text)
    text = _BASIC.sub(_basic, text)
    text = _KEY_VALUE.sub(_key_value, text)
    return _TOKEN_SHAPES.sub(REDACTED, text)


def _storable(text: str) -> str:
    """Drop NUL and escape lone surrogates: PostgreSQL can store neither in text/jsonb."""
    if "\x00" in text:
        text = text.replace("\x00", "")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def scrub(text: str, *, limit: int = MESSAGE_LIMIT) -> str:
    """Return ``text`` with secrets replaced by ``***``, NULs removed, capped at ``limit`` chars.

    Scrubbed: credentials in URLs (``postgresql://user:***@host``), ``Authorization`` headers
    and ``Bearer``/``Basic`` credentials, ``Cookie`` headers, ``password=``/``token: ``/
    ``"api_key": "..."`` style pairs (the key is kept), PEM private keys, well-known token
    shapes (AWS key ids, GitHub, Slack, Stripe, Google API keys, JWTs) and pydantic's
    ``input_value=...`` echoes. A text longer than ``limit`` (at least 100) is cut and ends
    with a marker naming its original length. Never raises: if scrubbing fails, the text is
    withheld rather than returned unscrubbed.
    """
    try:
        limit = max(limit, _MIN_LIMIT)
        original_length = len(text)
        text = _storable(text)
        # Only the head survives the cap, so scrub a bounded prefix with room to spare for
        # what scrubbing removes. A token cut in half at that boundary might no longer match its
        # pattern, so the trailing run of non-space characters is dropped as well.
        budget = limit * 8
        precut = len(text) > budget
        if precut:
            text = text[:budget]
        text = _scrub_secrets(text)
        if precut and text and not text[-1].isspace():
            head = text.rsplit(None, 1)
            text = head[0] if len(head) == 2 else ""
        if precut or len(text) > limit:
            marker = f"… [truncated: {original_length} chars]"
            text = text[: limit - len(marker)] + marker
        return text
    except Exception:
        return _WITHHELD


# --------------------------------------------------------------------------------------------
# clean_display

_ESCAPE_SEQUENCE = re.compile(
    r"\x1b\[[0-?]{0,256}[ -/]{0,64}[@-~]"  # CSI (colours, cursor moves, erase)
    r"|\x1b\][^\x07\x1b\n]{0,8192}(?:\x07|\x1b\\)?"  # OSC (titles, hyperlinks, clipboard)
    r"|\x1b[PX^_][^\x1b\n]{0,8192}(?:\x1b\\)?"  # DCS, SOS, PM, APC
    r"|\x1b[ -/]{0,64}[0-~]"  # other two-or-more byte escapes
    r"|\x9b[0-?]{0,256}[ -/]{0,64}[@-~]"  # 8-bit CSI
)
_UNDISPLAYABLE = re.compile(
    r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]"
)


def clean_display(text: str) -> str:
    """Return ``text`` without ANSI escape sequences, C0/C1 control characters (newline and tab
    are kept) and Unicode bidi controls, for a terminal or Textual renderer. Never raises."""
    try:
        if "\x1b" in text or "\x9b" in text:
            text = _ESCAPE_SEQUENCE.sub("", text)
        return _UNDISPLAYABLE.sub("", text)
    except Exception:
        return ""


# --------------------------------------------------------------------------------------------
# error entries

_PACKAGE_ROOTS: Final = ("site-packages/", "dist-packages/", "site-packages\\", "dist-packages\\")


def _short_path(path: str) -> str:
    cut = -1
    for root in _PACKAGE_ROOTS:
        i = path.rfind(root)
        if i >= 0:
            cut = max(cut, i + len(root))
    return path[cut:] if cut >= 0 else path


def traceback_summary(exc: BaseException, limit: int = 20) -> list[dict[str, object]]:
    """The frames of ``exc``'s own traceback as ``{"file", "line", "func"}``, innermost last.

    At most ``limit`` frames, keeping the innermost. Paths inside ``site-packages/`` are shortened
    to the part after it. No locals and no source lines are read (the source is not even loaded
    from disk); chained causes are not followed. Never raises.
    """
    try:
        if limit <= 0:
            return []
        frames: deque[dict[str, object]] = deque(maxlen=limit)
        for frame, lineno in traceback.walk_tb(exc.__traceback__):
            code = frame.f_code
            frames.append(
                {"file": _short_path(code.co_filename), "line": lineno, "func": code.co_qualname}
            )
        return list(frames)
    except Exception:
        return []


def _type_name(exc: BaseException) -> str:
    cls = type(exc)
    try:
        module, qualname = cls.__module__, cls.__qualname__
        name = qualname if module == "builtins" else f"{module}.{qualname}"
        return _storable(str(name))[:200]
    except Exception:
        return "BaseException"


def _exception_text(exc: BaseException) -> str:
    try:
        return str(exc)
    except Exception:
        return _type_name(exc)


def _iso_utc(at: datetime | None) -> str:
    try:
        if at is None:
            at = datetime.now(UTC)
        elif at.tzinfo is None:
            at = at.replace(tzinfo=UTC)  # a naive time is taken to be UTC already
        return at.astimezone(UTC).isoformat()
    except Exception:
        return datetime.now(UTC).isoformat()


def error_entry(
    exc: BaseException | None,
    *,
    code: str,
    attempt: int,
    worker_id: str | None = None,
    message: str | None = None,
    codes_only: bool = False,
    at: datetime | None = None,
) -> dict[str, object]:
    """One element of a job's error history, JSON-serialisable.

    ``{"code", "type", "message", "traceback", "attempt", "worker", "at"}``: ``type`` is the
    exception's class, module-qualified unless a builtin (None without an exception);
    ``message`` is the given ``message`` or ``str(exc)`` (the type name if that raises),
    scrubbed, or None when there is neither; ``traceback`` is :func:`traceback_summary`;
    ``at`` is ISO 8601 in UTC (now unless given). With ``codes_only`` (a kind declared
    ``errors="codes"``) no handler text is kept: only code, type, attempt, worker and at.
    Never raises.
    """
    when = _iso_utc(at)
    try:
        type_name = _type_name(exc) if exc is not None else None
        if codes_only:
            return {
                "code": code,
                "type": type_name,
                "attempt": attempt,
                "worker": worker_id,
                "at": when,
            }
        if message is not None:
            text: str | None = scrub(message)
        elif exc is not None:
            text = scrub(_exception_text(exc))
        else:
            text = None
        return {
            "code": code,
            "type": type_name,
            "message": text,
            "traceback": traceback_summary(exc) if exc is not None else [],
            "attempt": attempt,
            "worker": worker_id,
            "at": when,
        }
    except Exception:
        return {"code": code, "type": None, "attempt": attempt, "worker": worker_id, "at": when}
