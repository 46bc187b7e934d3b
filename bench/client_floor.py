"""What the official client costs by itself: `hindsight-client`'s default recall against a server that
does no work at all.

A bare asyncio HTTP server answers every request with one canned recall response, shaped as Engram's
(results with entity names, dates, document and chunk ids; no nulls), as many results as a recall of
the side-by-side harness's 5,000-memory bank returns. Whatever the client takes here (building the
request, the round trip on loopback, reading and validating the JSON into its models) no server can
take off the time an agent waits for a recall.

    .venv/bin/python bench/client_floor.py                 # 284 results, 300 recalls
    .venv/bin/python bench/client_floor.py --results 190   # the 1,000-memory bank's count
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import threading
import time
import uuid

WORDS = ("harbour", "ferry", "pier", "gull", "skipper", "lantern", "rope", "tide", "anchor", "market", "orchard",
         "violin", "museum", "bakery", "winter", "summer", "painter", "teacher", "nurse", "engineer", "Lisbon",
         "Oslo", "Quito", "Hanoi", "Perth")


def canned_response(results: int, seed: int = 7) -> bytes:
    rng = random.Random(seed)
    items = []
    for i in range(results):
        names = [f"{rng.choice(WORDS).title()} {rng.choice(WORDS).title()}" for _ in range(2)]
        text = f"{names[0]} met {names[1]} at the {rng.choice(WORDS)} in {rng.choice(WORDS)} " + " ".join(
            rng.choice(WORDS) for _ in range(rng.randint(8, 30)))
        items.append({
            "id": str(uuid.UUID(int=rng.getrandbits(128))), "text": text, "type": "world", "entities": names,
            "context": "", "occurred_start": f"20{rng.randint(10, 25)}-0{rng.randint(1, 9)}-1{i % 10}T00:00:00+00:00",
            "mentioned_at": "2026-12-01T10:00:00+00:00", "document_id": f"doc-{i}", "chunk_id": f"doc-{i}_0",
        })
    return json.dumps({"results": items}).encode()


async def _serve(body: bytes, port: int, ready: threading.Event) -> None:
    head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n" % len(body)

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                request = await reader.readuntil(b"\r\n\r\n")
                length = next((int(line.split(b":")[1]) for line in request.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)
                await reader.readexactly(length)
                writer.write(head + body)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", port)
    ready.set()
    async with server:
        await server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", type=int, default=284)
    parser.add_argument("--recalls", type=int, default=300)
    parser.add_argument("--port", type=int, default=18899)
    args = parser.parse_args()

    from hindsight_client import Hindsight

    body = canned_response(args.results)
    ready = threading.Event()
    threading.Thread(target=lambda: asyncio.run(_serve(body, args.port, ready)), daemon=True).start()
    ready.wait(10)
    client = Hindsight(base_url=f"http://127.0.0.1:{args.port}")
    for _ in range(20):  # warm: imports, the connection, the models' validators
        client.recall("floor", "Who met whom at the harbour?")
    times = []
    for i in range(args.recalls):
        start = time.perf_counter()
        response = client.recall("floor", f"Who met whom at the harbour, question {i}?")
        times.append((time.perf_counter() - start) * 1000)
    client.close()
    assert len(response.results) == args.results
    times.sort()
    print(json.dumps({
        "results": args.results, "response_bytes": len(body), "recalls": args.recalls,
        "p50_ms": round(statistics.median(times), 2), "p95_ms": round(times[int(0.95 * len(times)) - 1], 2),
        "min_ms": round(times[0], 2),
    }))


if __name__ == "__main__":
    main()
