"""The refusals of personal-data declarations, coverage and runs, each with a stable code."""

from __future__ import annotations

from forklift._base.errors import ConfigError, ForkliftError

__all__ = [
    "PersonalDataUnerased",
    "PersonalDataUnreached",
    "SubjectDeclarationInvalid",
    "SubjectError",
    "SubjectKeyShredded",
]


class SubjectError(ForkliftError):
    """Base of the refusals of :mod:`forklift.subjects`."""

    code = "subject_error"


class SubjectDeclarationInvalid(SubjectError, ConfigError):
    """A subject names a table or column the database does not have, a walk step whose foreign
    key cannot be found, or a treatment that cannot be carried out; ``detail`` names them."""

    code = "subject_declaration_invalid"


class PersonalDataUnerased(SubjectError):
    """A table a subject reaches anonymizes fewer than its marked columns: an erase would leave
    the person's data there. ``detail``: ``table``, ``columns`` (the ones left), ``subject``."""

    code = "personal_data_unerased"


class PersonalDataUnreached(SubjectError):
    """A table holds marked columns and no declared subject's walk reaches it: neither export
    nor erase would see it. ``detail``: ``table``, ``columns``."""

    code = "personal_data_unreached"


class SubjectKeyShredded(SubjectError):
    """The subject's key was destroyed by an erase: what was sealed with it cannot be read."""

    code = "subject_key_shredded"
