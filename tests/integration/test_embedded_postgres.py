"""The embedded PostgreSQL launcher against the real binaries: start, join, stop, restart, recover."""

from __future__ import annotations

import os
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import asyncpg
import pytest

from engram.errors import StoreUnavailable
from engram.store.embedded import (
    EmbeddedPostgres,
    running_server,
    shared_buffers_mb,
    socket_dir_for,
)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # Under /tmp/pytest-of-root (mode 700) when root: the launcher must open the way for its server user.
    return tmp_path_factory.mktemp("engram-home")


BUFFERS_MB = "SELECT setting::bigint * 8 / 1024 FROM pg_settings WHERE name = 'shared_buffers'"


async def fetch(dsn: str, sql: str) -> object:
    conn = await asyncpg.connect(dsn, timeout=5)
    try:
        return await conn.fetchval(sql)
    finally:
        await conn.close()


def wait_until_dead(pid: int) -> None:
    deadline = time.monotonic() + 10
    while Path(f"/proc/{pid}/cwd").exists() and time.monotonic() < deadline:
        time.sleep(0.05)


async def test_start_gives_a_database_with_pgvector_and_pg_trgm(data_dir: Path) -> None:
    with EmbeddedPostgres(data_dir) as pg:
        assert pg.dsn.startswith("postgresql://postgres@/engram?host=")
        conn = await asyncpg.connect(pg.dsn)
        try:
            await conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            await conn.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
            distance = await conn.fetchval("SELECT '[1,2,3]'::vector <=> '[1,2,4]'::vector")
            assert distance == pytest.approx(1 - 17 / (14**0.5 * 21**0.5), abs=1e-6)
            assert await conn.fetchval("SELECT similarity('Room 101', 'Room 101')") == 1.0
            # Accented letters are letters to pg_trgm (a C ctype would drop them).
            assert await conn.fetchval("SELECT cardinality(show_trgm('é'))") > 0
            assert await conn.fetchval("SHOW maintenance_work_mem") == "512MB"
            assert await conn.fetchval("SHOW listen_addresses") == ""
            buffers_mb = await conn.fetchval(BUFFERS_MB)
            assert buffers_mb == shared_buffers_mb(), "sized to the machine from the first start, not to the data"
            if conn.get_server_version().major >= 18:
                assert await conn.fetchval("SHOW io_method") == "sync", "no I/O worker processes"
            assert await conn.fetchval("SHOW max_logical_replication_workers") == "0"
            assert await conn.fetchval("SELECT current_database()") == "engram"
        finally:
            await conn.close()
        assert (data_dir / "pg.log").stat().st_size > 0
        if os.geteuid() == 0:
            assert pg.pgdata.stat().st_uid != 0, "PostgreSQL must run as an unprivileged user"


def test_shared_buffers_are_the_smaller_of_1_gb_and_ram_over_8_within_128_mb() -> None:
    gib = 2**30
    assert shared_buffers_mb(16 * gib) == 1024
    assert shared_buffers_mb(4 * gib) == 512
    assert shared_buffers_mb(64 * gib) == 1024
    assert shared_buffers_mb(gib // 2) == 128


async def test_a_second_instance_joins_and_leaves_the_server_to_its_starter(data_dir: Path) -> None:
    first, second = EmbeddedPostgres(data_dir), EmbeddedPostgres(data_dir)
    dsn = first.start()
    assert first.started_here
    assert second.start() == dsn
    assert not second.started_here
    second.stop()
    assert await fetch(dsn, "SELECT 1") == 1
    first.stop()
    assert running_server(first.pgdata) is None
    with pytest.raises(OSError):
        await fetch(dsn, "SELECT 1")


async def test_a_restart_keeps_the_data(data_dir: Path) -> None:
    with EmbeddedPostgres(data_dir) as pg:
        await fetch(pg.dsn, "CREATE TABLE kept AS SELECT 42 AS answer")
    with EmbeddedPostgres(data_dir) as pg:
        assert await fetch(pg.dsn, "SELECT answer FROM kept") == 42


async def test_alter_system_overrides_the_shared_buffers_rule(data_dir: Path) -> None:
    with EmbeddedPostgres(data_dir) as pg:
        assert await fetch(pg.dsn, BUFFERS_MB) == shared_buffers_mb()
        await fetch(pg.dsn, "ALTER SYSTEM SET shared_buffers = '144MB'")
    try:
        with EmbeddedPostgres(data_dir) as pg:
            assert await fetch(pg.dsn, BUFFERS_MB) == 144, "the README's way to keep the buffers small"
    finally:
        with EmbeddedPostgres(data_dir) as pg:
            await fetch(pg.dsn, "ALTER SYSTEM RESET shared_buffers")


async def test_a_killed_server_does_not_block_the_next_start(data_dir: Path) -> None:
    crashed = EmbeddedPostgres(data_dir)
    crashed.start()
    assert crashed.server is not None
    os.kill(crashed.server.pid, signal.SIGKILL)
    wait_until_dead(crashed.server.pid)
    assert (crashed.pgdata / "postmaster.pid").exists()

    with EmbeddedPostgres(data_dir) as pg:
        assert pg.started_here
        assert await fetch(pg.dsn, "SELECT answer FROM kept") == 42
        crashed.stop()  # its server is gone: it must not stop the new one
        assert await fetch(pg.dsn, "SELECT 1") == 1


async def test_a_failed_start_says_why(data_dir: Path) -> None:
    auto_conf = data_dir / "pg" / "postgresql.auto.conf"
    original = auto_conf.read_text()
    auto_conf.write_text(original + "shared_buffers = 'plenty'\n")
    try:
        with pytest.raises(StoreUnavailable, match="(?s)starting PostgreSQL failed.*shared_buffers"):
            EmbeddedPostgres(data_dir).start()
    finally:
        auto_conf.write_text(original)
    assert running_server(data_dir / "pg") is None


def test_concurrent_starts_share_one_server(tmp_path: Path) -> None:
    instances = [EmbeddedPostgres(tmp_path / "home") for _ in range(3)]
    with ThreadPoolExecutor(len(instances)) as pool:
        dsns = set(pool.map(EmbeddedPostgres.start, instances))
    assert len(dsns) == 1
    assert sum(pg.started_here for pg in instances) == 1
    for pg in sorted(instances, key=lambda pg: pg.started_here):
        pg.stop()
    assert running_server(tmp_path / "home" / "pg") is None


def test_the_socket_moves_to_tmp_when_the_path_is_too_long() -> None:
    short, deep = Path("/home/someone/.engram"), Path("/data/" + "very-long-directory-name/" * 6)
    assert socket_dir_for(short) == short / "run"
    moved = socket_dir_for(deep)
    assert moved.parent == Path("/tmp")
    assert moved == socket_dir_for(deep) != socket_dir_for(deep / "other")
    assert len(str(moved / ".s.PGSQL.5432")) < 100
