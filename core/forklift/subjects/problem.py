"""One coverage problem: what is wrong, in which table, and which columns."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from forklift.subjects.errors import (
    PersonalDataUnerased,
    PersonalDataUnreached,
    SubjectDeclarationInvalid,
    SubjectError,
)

__all__ = ["Problem"]

_ERRORS: dict[str, type[SubjectError]] = {
    cls.code: cls for cls in (PersonalDataUnerased, PersonalDataUnreached,
                              SubjectDeclarationInvalid)
}


@dataclass(frozen=True)
class Problem:
    """``code`` is the code of the error a run would be refused with."""

    code: str
    table: str
    message: str
    columns: tuple[str, ...] = ()
    subject: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"code": self.code, "table": self.table, "columns": list(self.columns),
                "subject": self.subject, "message": self.message}

    def error(self) -> SubjectError:
        cls = _ERRORS.get(self.code, SubjectError)
        return cls(self.message, table=self.table, columns=list(self.columns),
                   subject=self.subject)
