"""CPU work no one waits on as it happens (a retain of several chunks, a queued operation) runs on
threads of lower priority, so a recall or a one-item retain arriving meanwhile gets the cores first;
a one-item retain and a recall run at the process's own priority."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from engram.cpu_priority import LOW_PRIORITY_NICE
from tests.conftest import RunningServer, start_server

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="threads' nice values are read from /proc")


@pytest.fixture
def own_server(isolated_dsn: str) -> Iterator[RunningServer]:
    """An offline server of its own: its threads are only what these retains start."""
    running = start_server(isolated_dsn, name="embedding-priority")
    try:
        yield running
    finally:
        running.stop()


def nice_values(pid: int) -> list[int]:
    """The nice value of each of the process's threads (field 19 of /proc/PID/task/TID/stat)."""
    values = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # the thread ended meanwhile
            continue
        values.append(int(fields[16]))
    return values


def lowered_threads(server: RunningServer) -> int:
    base = os.getpriority(os.PRIO_PROCESS, server.process.pid)
    return sum(value >= min(19, base + LOW_PRIORITY_NICE) for value in nice_values(server.process.pid))


def new_bank(client: httpx.Client, bank: str) -> None:
    client.put(f"/v1/default/banks/{bank}", json={}).raise_for_status()
    client.patch(f"/v1/default/banks/{bank}/config",
                 json={"updates": {"enable_auto_consolidation": False}}).raise_for_status()


def retain(client: httpx.Client, bank: str, items: list[str], asynchronous: bool = False) -> None:
    response = client.post(f"/v1/default/banks/{bank}/memories",
                           json={"items": [{"content": text} for text in items], "async": asynchronous})
    response.raise_for_status()


def test_one_item_and_a_recall_work_at_the_process_priority_several_items_below_it(own_server: RunningServer) -> None:
    bank = "priority"
    with own_server.client() as client:
        new_bank(client, bank)
        retain(client, bank, ["Maya adopted a beagle named Otis. Tomas Berg repaired the lighthouse."])
        client.post(f"/v1/default/banks/{bank}/memories/recall", json={"query": "Who has a beagle?"}).raise_for_status()
        assert lowered_threads(own_server) == 0, "a one-item retain and a recall are waited on"

        retain(client, bank, ["Priya Zhou moved to Valparaiso.", "Rosa Reyes took up pottery."])
        assert lowered_threads(own_server) >= 1, "a retain of several items works at low priority"


def test_a_queued_retain_works_at_low_priority(own_server: RunningServer) -> None:
    bank = "priority-async"
    with own_server.client() as client:
        new_bank(client, bank)
        retain(client, bank, ["Maya adopted a beagle named Otis. Tomas Berg repaired the lighthouse."],
               asynchronous=True)
        deadline = time.monotonic() + 60
        while client.get(f"/v1/default/banks/{bank}/memories/list").json()["total"] < 2:
            assert time.monotonic() < deadline, "the queued retain did not finish"
            time.sleep(0.1)
        assert lowered_threads(own_server) >= 1, "the worker's operations work at low priority"
