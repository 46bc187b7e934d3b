"""The embedding models side by side (ENGRAM_EMBEDDING_MODEL's values), each in a process of its own:
load time, memory the model adds, batch throughput on LoCoMo turns (texts/s, CPU ms a text) and the
cost of one one-sentence query (wall and CPU ms, uncached). Prints a table; asserts nothing.

    .venv/bin/python bench/embedders.py                  # every installed model, 512 texts, 200 queries
    .venv/bin/python bench/embedders.py --models minilm --texts 256
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "locomo-dev.json"
FALLBACK_TEXTS = ["Caroline: I went to the LGBTQ support group yesterday and it was so powerful.",
                  "Melanie: That's great! I painted a sunrise over the lake with my kids last weekend.",
                  "Our office moved to Lisbon in June, next to the river.",
                  "Meine Schwester arbeitet seit März als Tierärztin in Hamburg."]
QUESTIONS = ["What did Melanie paint?", "When did Caroline go to the support group?", "Where is the office?",
             "What does my sister do for a living?", "Which hobbies does Caroline have?"]

# Runs in the child process: one model, measured there, figures back as one JSON line.
_MEASURE = r"""
import json, resource, sys, time
from engram.models.embedder import embedder, use_model
texts, queries, name = json.loads(sys.stdin.read())
def rss_mb():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
before = rss_mb()
use_model(name)
started = time.perf_counter()
model = embedder()
model.embed(texts[:8]); model.embed_queries(queries[:2])
load = time.perf_counter() - started
loaded = rss_mb()
wall0, cpu0 = time.perf_counter(), time.process_time()
model.embed(texts)
batch_wall, batch_cpu = time.perf_counter() - wall0, time.process_time() - cpu0
wall0, cpu0 = time.perf_counter(), time.process_time()
for i, query in enumerate(queries):
    model.embed_queries([f"{query} ({i})"])
query_wall, query_cpu = time.perf_counter() - wall0, time.process_time() - cpu0
print(json.dumps({"model": name, "load_s": load, "model_mb": loaded - before, "peak_mb": rss_mb(),
                  "texts_per_s": len(texts) / batch_wall, "cpu_ms_per_text": batch_cpu / len(texts) * 1000,
                  "query_ms": query_wall / len(queries) * 1000, "query_cpu_ms": query_cpu / len(queries) * 1000}))
"""


def locomo_turns(path: Path, count: int) -> list[str]:
    if not path.is_file():
        return (FALLBACK_TEXTS * (count // len(FALLBACK_TEXTS) + 1))[:count]
    turns = []
    for conversation in json.loads(path.read_text()):
        sessions = conversation["conversation"]
        for key in sorted(k for k in sessions if k.startswith("session_") and not k.endswith("date_time")):
            turns += [f"{t['speaker']}: {t['text']}" for t in sessions[key]]
    return turns[:count]


def measure(name: str, texts: list[str], queries: list[str]) -> dict[str, float] | str:
    done = subprocess.run([sys.executable, "-c", _MEASURE], input=json.dumps([texts, queries, name]),
                          capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        return done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit {done.returncode}"
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    from engram.models.embedder import MODELS

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--texts", type=int, default=512, help="LoCoMo turns embedded as one batch")
    parser.add_argument("--queries", type=int, default=200, help="one-sentence queries embedded one by one")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    args = parser.parse_args(argv)
    texts = locomo_turns(args.data, args.texts)
    queries = (QUESTIONS * (args.queries // len(QUESTIONS) + 1))[:args.queries]
    print(f"{len(texts)} texts (LoCoMo turns, mean {sum(map(len, texts)) / len(texts):.0f} chars), "
          f"{len(queries)} queries, one process per model\n")
    print(f"{'model':10} {'load':>7} {'+RSS':>8} {'texts/s':>8} {'CPU/text':>9} {'query':>8} {'CPU/query':>10}")
    for name in args.models:
        row = measure(name, texts, queries)
        if isinstance(row, str):
            print(f"{name:10} not measured: {row}")
            continue
        print(f"{name:10} {row['load_s']:6.2f}s {row['model_mb']:6.0f}MB {row['texts_per_s']:8.1f} "
              f"{row['cpu_ms_per_text']:7.2f}ms {row['query_ms']:6.2f}ms {row['query_cpu_ms']:8.2f}ms")
    command = " ".join(shlex.quote(a) for a in [".venv/bin/python", "bench/embedders.py", *sys.argv[1:]])
    print(f"\nreproduce: {command}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
