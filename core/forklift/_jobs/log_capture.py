"""Capturing standard ``logging`` records into the running attempt's log.

One handler on the root logger, installed once when a worker with a kind that opts in
(``capture_logs=True``) starts. It keeps a record only when :data:`capturing` names an
attempt's log in the context the record is emitted from: the worker sets it in the attempt's
own context (an async handler's task, a sync handler's copy of it in its thread), so lines of
jobs running side by side in one worker never mix, and records from anything else pass by.

A record the logging configuration does not let through (below its logger's level) is never
made, so it is not captured either. forklift's own records are left out: the attempt's outcome
is stored anyway.
"""

from __future__ import annotations

import contextvars
import logging
import threading
from collections.abc import Callable

from forklift._jobs.attempt_log import AttemptLog

__all__ = ["CaptureHandler", "capturing", "install"]

#: The log of the attempt whose handler runs in this context, when its kind captures logging
#: (a function making it on first use, so an attempt that logs nothing carries none).
capturing: contextvars.ContextVar[Callable[[], AttemptLog] | None] = contextvars.ContextVar(
    "forklift_capturing", default=None)

_INSTALL = threading.Lock()


class CaptureHandler(logging.Handler):
    """Appends a record to the log of the attempt it was emitted in, if any."""

    def emit(self, record: logging.LogRecord) -> None:
        of = capturing.get()
        if of is None or record.name == "forklift" or record.name.startswith("forklift."):
            return
        try:
            log = of()
            message = record.getMessage()
            if record.exc_info and record.exc_info[1] is not None:
                exc = record.exc_info[1]
                message = f"{message} ({type(exc).__name__}: {exc})"
            log.add(record.levelname.lower(), message, logger=record.name, at=record.created)
        except Exception:
            self.handleError(record)


def install() -> None:
    """Put the handler on the root logger, once per process."""
    root = logging.getLogger()
    with _INSTALL:
        if not any(isinstance(h, CaptureHandler) for h in root.handlers):
            root.addHandler(CaptureHandler())
