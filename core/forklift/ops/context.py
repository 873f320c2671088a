"""Who is acting, against which schema, and whether they may write.

Every operator function takes a connection and an :class:`OpsContext`; :class:`~forklift.ops.Operator`
builds one from its arguments and the environment. Read-only mode is enforced here, in core,
so every door (CLI, console, scripts) refuses the same way.
"""

from __future__ import annotations

from dataclasses import dataclass

from forklift._base.errors import ReadOnly
from forklift._db import config
from forklift._db.sqltext import check_schema

__all__ = ["OpsContext"]


@dataclass(frozen=True)
class OpsContext:
    schema: str = config.DEFAULT_SCHEMA
    actor: str = "unknown"
    read_only: bool = False
    #: Why, when it was not asked for (the database role may not write).
    read_only_reason: str | None = None

    def __post_init__(self) -> None:
        check_schema(self.schema)

    @classmethod
    def from_env(
        cls, schema: str | None = None, actor: str | None = None, read_only: bool | None = None
    ) -> OpsContext:
        """Fill what the caller left out: FORKLIFT_SCHEMA, FORKLIFT_ACTOR (else the OS user),
        FORKLIFT_READ_ONLY. An explicit ``read_only=False`` does not override the environment:
        read-only set by whoever runs the process wins."""
        return cls(
            schema=schema or config.schema_from_env(),
            actor=(actor or "").strip() or config.actor_from_env(),
            read_only=bool(read_only) or config.env_flag("FORKLIFT_READ_ONLY"),
        )

    def require_write(self, action: str) -> None:
        if self.read_only and self.read_only_reason:
            raise ReadOnly(f"{action} refused: {self.read_only_reason}", action=action)
        if self.read_only:
            raise ReadOnly(
                f"{action} refused: forklift is in read-only mode (FORKLIFT_READ_ONLY or"
                " --read-only); unset it to act",
                action=action,
            )
