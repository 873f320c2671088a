"""Export and erase of one person's data, with coverage of every marked column checked first.

Declare a :class:`PersonalData` on the app, its subjects (a root table and the walk from it
through foreign keys) and what an erase does to each table reached: :func:`delete`,
:func:`anonymize` named columns, or :func:`retain` with a stated reason. A column is personal
data when a declaration marks it or its comment starts with ``personal``. Before an export or
an erase touches a row, coverage is checked: a reached table anonymized without one of its
marked columns (``personal_data_unerased``) or a marked table no subject reaches
(``personal_data_unreached``) refuses the run; ``forklift subjects check`` lists every problem.

:class:`SubjectKeys` seals values (job payloads, results) with a per-person key that the
person's erase destroys (crypto-shredding; the ``subjects`` extra brings ``cryptography``).
"""

from forklift.subjects.errors import (
    PersonalDataUnerased,
    PersonalDataUnreached,
    SubjectDeclarationInvalid,
    SubjectError,
    SubjectKeyShredded,
)
from forklift.subjects.keys import SubjectKeys
from forklift.subjects.problem import Problem
from forklift.subjects.reach import Reach
from forklift.subjects.ref import SubjectRef
from forklift.subjects.registry import REFUSAL_CODES, PersonalData, registry_of
from forklift.subjects.sealed import Sealed
from forklift.subjects.subject import Subject
from forklift.subjects.treatment import Treatment, anonymize, delete, retain

__all__ = [
    "REFUSAL_CODES",
    "PersonalData",
    "PersonalDataUnerased",
    "PersonalDataUnreached",
    "Problem",
    "Reach",
    "Sealed",
    "Subject",
    "SubjectDeclarationInvalid",
    "SubjectError",
    "SubjectKeyShredded",
    "SubjectKeys",
    "SubjectRef",
    "Treatment",
    "anonymize",
    "delete",
    "registry_of",
    "retain",
]
