"""LoCoMo retrieval benchmark: turn-level evidence recall@5/@10/@50 of Engram's recall (no LLM), next to
plain BM25 and plain dense retrieval (the server's own embedder) over the raw turns, computed in the same
run; plus ingest throughput, recall latency and the server's memory.

Each conversation goes into its own bank, one retain item per session (timestamp = the session's date).
Every QA of categories 1-4 is asked as a recall query (`query_timestamp` = the last session's date); a
question's recall@k is the fraction of its evidence turns ("D1:3") that at least one of the top k results
came from, averaged over questions.

Turn provenance: the offline extractor stores a "Speaker: text" turn as one fact, or, when it is long, as
one fact per sentence, "Speaker: text[ | When: …]", never across turns. A recalled fact is mapped back to
its turn among the turns of its document (document id = conversation + session): the turn of the same
speaker whose whitespace-normalised text equals the fact's text, else the first one that contains it.
Needs no server change (and works only for the offline extractor, whose facts quote the turns).

Prints a table and the command that reproduces it; asserts nothing.

    .venv/bin/python bench/locomo_recall.py                       # the dev split, a few minutes
    .venv/bin/python bench/locomo_recall.py --conversations 1     # smoke run
    .venv/bin/python bench/locomo_recall.py --embedding-model e5-small   # ENGRAM_EMBEDDING_MODEL's values
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "locomo-dev.json"
API = "/v1/default/banks"
KS = (5, 10, 50)
# LoCoMo's category numbers, as used in locomo10.json (category 5, adversarial, has no answer to find)
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
SESSION_DATE = "%I:%M %p on %d %B, %Y"  # "1:56 pm on 8 May, 2023"
_EVIDENCE = re.compile(r"D:?(\d+):(\d+)")  # also reads the data's typos "D:11:26" and "D8:6; D9:17"
METHODS = ("engram", "bm25", "dense")
TITLES = {"engram": "Engram", "bm25": "BM25", "dense": "dense ({model})"}


# --- the data ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Turn:
    dia_id: str
    speaker: str
    text: str  # the utterance, with the shared photo's caption when there is one

    @property
    def line(self) -> str:
        return f"{self.speaker}: {self.text}"


@dataclass
class Session:
    number: int
    said_at: datetime
    turns: list[Turn]


@dataclass
class Question:
    text: str
    answer: str
    category: int
    evidence: tuple[str, ...]


@dataclass
class Conversation:
    sample_id: str
    sessions: list[Session]
    questions: list[Question]

    @property
    def bank(self) -> str:
        return f"locomo-{self.sample_id}"

    def document_id(self, session: Session) -> str:
        return f"{self.sample_id}-session-{session.number}"

    @property
    def turns(self) -> list[Turn]:
        return [turn for session in self.sessions for turn in session.turns]


@dataclass
class Dropped:
    """Questions left out, and why: the data has a few malformed or dangling evidence ids."""

    no_evidence: int = 0
    dangling_ids: int = 0


def turn_text(raw: dict[str, Any], captions: bool) -> str:
    text = " ".join(str(raw.get("text", "")).split())
    caption = raw.get("blip_caption")
    if captions and caption:
        text = f"{text} [shares a photo: {' '.join(str(caption).split())}]"
    return text


def load(path: Path, conversations: int | None, questions: int | None, captions: bool) -> tuple[
        list[Conversation], Dropped]:
    dropped = Dropped()
    loaded = []
    for raw in json.loads(path.read_text())[:conversations]:
        conv = raw["conversation"]
        sessions = []
        for key, turns in conv.items():
            match = re.fullmatch(r"session_(\d+)", key)
            if match is None or not turns:
                continue
            said_at = datetime.strptime(conv[f"{key}_date_time"], SESSION_DATE).replace(tzinfo=UTC)
            sessions.append(Session(int(match.group(1)), said_at, [
                Turn(t["dia_id"], t["speaker"], turn_text(t, captions)) for t in turns]))
        sessions.sort(key=lambda s: s.number)
        known = {turn.dia_id for session in sessions for turn in session.turns}
        asked = []
        for qa in raw["qa"]:
            if qa.get("category") not in CATEGORIES:
                continue
            ids = [f"D{a}:{b}" for e in qa.get("evidence") or [] for a, b in _EVIDENCE.findall(e)]
            evidence = tuple(dict.fromkeys(i for i in ids if i in known))
            dropped.dangling_ids += len(set(ids) - known)
            if not evidence:
                dropped.no_evidence += 1
                continue
            asked.append(Question(qa["question"], str(qa.get("answer", "")), qa["category"], evidence))
        loaded.append(Conversation(raw["sample_id"], sessions, asked[:questions]))
    return loaded, dropped


# --- turn provenance of recalled facts ---------------------------------------------------------------------


def _normalise(text: str) -> str:
    return " ".join(text.split())


@dataclass
class TurnIndex:
    """Maps recalled facts of one conversation back to the turns they came from (see the module doc)."""

    conversation: Conversation
    by_document: dict[str, list[tuple[str, str, str]]] = field(init=False)  # (speaker, text, dia_id)
    cache: dict[str, str | None] = field(default_factory=dict)
    mapped: int = 0
    ambiguous: int = 0
    unmapped: int = 0

    def __post_init__(self) -> None:
        self.by_document = {
            self.conversation.document_id(s): [(t.speaker, _normalise(t.text), t.dia_id) for t in s.turns]
            for s in self.conversation.sessions}

    def turn_of(self, result: dict[str, Any]) -> str | None:
        if result["id"] not in self.cache:
            self.cache[result["id"]] = self._find(result)
        return self.cache[result["id"]]

    def _find(self, result: dict[str, Any]) -> str | None:
        head = result["text"].split(" | ", 1)[0]
        speaker, colon, sentence = head.partition(": ")
        if not colon:
            speaker, sentence = "", head
        sentence = _normalise(sentence)
        turns = self.by_document.get(result.get("document_id") or "")
        if turns is None:
            turns = [turn for group in self.by_document.values() for turn in group]
        found = [(text == sentence, dia) for who, text, dia in turns
                 if (not speaker or who == speaker) and sentence in text]
        if not found:
            self.unmapped += 1
            return None
        exact = [dia for equal, dia in found if equal]
        self.mapped += 1
        self.ambiguous += len(exact) != 1 and len(found) > 1
        return exact[0] if exact else found[0][1]


# --- baselines over the raw turns --------------------------------------------------------------------------

STOPWORDS = frozenset((
    "a", "an", "the", "and", "or", "but", "of", "to", "in", "on", "at", "for", "with", "by", "from", "as",
    "is", "are", "was", "were", "be", "been", "being", "am", "it", "its", "this", "that", "these", "those",
    "i", "me", "my", "you", "your", "he", "him", "his", "she", "her", "we", "us", "our", "they", "them",
    "their", "what", "which", "who", "whom", "when", "where", "why", "how", "do", "does", "did", "has", "have",
    "had", "not", "no", "so", "if", "than", "then", "there", "here", "just", "about", "into", "s", "t",
))
_TOKEN = re.compile(r"[a-z0-9]+")


def tokenize(text: str) -> list[str]:
    return [word for word in _TOKEN.findall(text.lower()) if word not in STOPWORDS]


class BM25:
    """Okapi BM25 over a fixed list of documents (idf with the +1 inside the log, so it stays positive)."""

    def __init__(self, documents: list[str], k1: float = 1.2, b: float = 0.75) -> None:
        bags = [Counter(tokenize(doc)) for doc in documents]
        lengths = np.array([sum(bag.values()) for bag in bags], dtype=np.float64)
        self.size = len(documents)
        self.k1 = k1
        self.length_norm = k1 * (1 - b + b * lengths / max(float(lengths.mean()), 1.0))
        self.postings: dict[str, list[tuple[int, int]]] = defaultdict(list)
        for position, bag in enumerate(bags):
            for term, count in bag.items():
                self.postings[term].append((position, count))
        self.idf = {term: math.log(1 + (self.size - len(found) + 0.5) / (len(found) + 0.5))
                    for term, found in self.postings.items()}

    def rank(self, query: str) -> list[int]:
        """Positions of the documents sharing a term with the query, best first."""
        scores = np.zeros(self.size)
        for term in set(tokenize(query)):
            for position, count in self.postings.get(term, ()):
                scores[position] += self.idf[term] * count * (self.k1 + 1) / (count + self.length_norm[position])
        matched = np.flatnonzero(scores > 0)
        return matched[np.argsort(-scores[matched], kind="stable")].tolist()


def dense_rank(turn_vectors: np.ndarray, query_vector: np.ndarray) -> list[int]:
    return np.argsort(-(turn_vectors @ query_vector), kind="stable").tolist()


# --- the server ---------------------------------------------------------------------------------------------


@dataclass
class Server:
    url: str
    process: subprocess.Popen[bytes]
    log_path: Path

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def engram_server(workdir: Path, embedding_model: str = "minilm") -> Iterator[Server]:
    """`engram serve` with no LLM on an embedded PostgreSQL in `workdir`; both stopped on exit."""
    from engram.store.embedded import EmbeddedPostgres

    postgres = EmbeddedPostgres(workdir / "pg")
    dsn = postgres.start()
    server = None
    try:
        port = _free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ENGRAM_", "HINDSIGHT_API_"))}
        env.update({"ENGRAM_HOME": str(workdir / "home"), "ENGRAM_DATABASE_URL": dsn, "ENGRAM_LOG_LEVEL": "WARNING",
                    "ENGRAM_EMBEDDING_MODEL": embedding_model})
        log_path = workdir / "server.log"
        process = subprocess.Popen(
            [sys.executable, "-m", "engram.cli", "serve", "--host", "127.0.0.1", "--port", str(port)],
            env=env, stdout=log_path.open("wb"), stderr=subprocess.STDOUT)
        server = Server(f"http://127.0.0.1:{port}", process, log_path)
        deadline = time.monotonic() + 120
        while True:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"engram serve did not start:\n{log_path.read_text(errors='replace')[-3000:]}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(server.url + "/health", timeout=1).status_code == 200:
                    break
            time.sleep(0.05)
        yield server
    finally:
        if server is not None:
            server.stop()
        postgres.stop()


def post(http: httpx.Client, path: str, body: dict[str, Any]) -> dict[str, Any]:
    response = http.post(path, json=body)
    if response.status_code != 200:
        raise RuntimeError(f"POST {path}: {response.status_code} {response.text[:500]}")
    return response.json()


def retain_items(conversation: Conversation) -> list[dict[str, Any]]:
    return [{
        "content": "\n".join(turn.line for turn in session.turns),
        "timestamp": session.said_at.isoformat(),
        "document_id": conversation.document_id(session),
        "metadata": {"conversation": conversation.sample_id, "session": str(session.number),
                     "turns": f"{session.turns[0].dia_id}..{session.turns[-1].dia_id}"},
    } for session in conversation.sessions]


# --- running it ---------------------------------------------------------------------------------------------


@dataclass
class Run:
    recalls: dict[str, list[dict[int, float]]] = field(default_factory=lambda: {m: [] for m in METHODS})
    categories: list[int] = field(default_factory=list)
    ingest_seconds: float = 0.0
    turns: int = 0
    sessions: int = 0
    memories: int = 0
    latencies: list[float] = field(default_factory=list)
    result_counts: list[int] = field(default_factory=list)
    indexes: list[TurnIndex] = field(default_factory=list)
    baseline_seconds: float = 0.0
    errors: int = 0
    server_memory_mb: dict[str, float] = field(default_factory=dict)


def process_memory_mb(pid: int) -> dict[str, float]:
    """VmRSS (now) and VmHWM (peak) of a process, in MB (Linux; empty elsewhere)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return {}
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    return {name: round(int(fields[key].split()[0]) / 1024, 1)
            for name, key in (("rss", "VmRSS"), ("peak", "VmHWM")) if key in fields}


def evidence_recall(evidence: tuple[str, ...], ranked_turns: list[str | None]) -> dict[int, float]:
    return {k: len(set(evidence) & set(ranked_turns[:k])) / len(evidence) for k in KS}


def run_engram(http: httpx.Client, conversation: Conversation, run: Run, args: argparse.Namespace,
               dump: list[dict[str, Any]]) -> None:
    http.put(f"{API}/{conversation.bank}", json={}).raise_for_status()
    if args.bank_config:
        http.patch(f"{API}/{conversation.bank}/config", json={"updates": args.bank_config}).raise_for_status()
    started = time.perf_counter()
    post(http, f"{API}/{conversation.bank}/memories", {"items": retain_items(conversation)})
    ingest_seconds = time.perf_counter() - started
    run.ingest_seconds += ingest_seconds
    run.turns += len(conversation.turns)
    run.sessions += len(conversation.sessions)
    listed = http.get(f"{API}/{conversation.bank}/memories/list", params={"limit": 1}).json()
    run.memories += int(listed.get("total", 0))

    index = TurnIndex(conversation)
    run.indexes.append(index)
    asked_at = conversation.sessions[-1].said_at.isoformat()
    texts = {turn.dia_id: turn.line for turn in conversation.turns}
    for question in conversation.questions:
        body = {"query": question.text, "budget": "mid", "max_tokens": args.max_tokens, "query_timestamp": asked_at}
        started = time.perf_counter()
        try:
            results = post(http, f"{API}/{conversation.bank}/memories/recall", body)["results"]
        except RuntimeError as error:  # counted as a miss and reported, so one bad query does not end the run
            print(f"  recall failed for {question.text!r}: {error}", flush=True)
            run.errors += 1
            results = []
        run.latencies.append(time.perf_counter() - started)
        run.result_counts.append(len(results))
        turns = [index.turn_of(result) for result in results]
        run.recalls["engram"].append(evidence_recall(question.evidence, turns))
        run.categories.append(question.category)
        dump.append({
            "conversation": conversation.sample_id, "category": question.category, "question": question.text,
            "answer": question.answer, "evidence": {e: texts[e] for e in question.evidence},
            "latency_ms": round(run.latencies[-1] * 1000, 1),
            "engram": run.recalls["engram"][-1],
            "engram_top10": [{"turn": t, "text": r["text"]} for t, r in zip(turns[:10], results[:10])],
            "engram_turns": turns[:100],
        })
    asked = run.latencies[len(run.latencies) - len(conversation.questions):]
    print(f"{conversation.sample_id}: {len(conversation.turns)} turns retained in {ingest_seconds:.1f} s, "
          f"{len(asked)} questions recalled in {sum(asked):.1f} s", flush=True)


def run_baselines(conversation: Conversation, run: Run, dump: list[dict[str, Any]]) -> None:
    from engram.models.embedder import embedder

    started = time.perf_counter()
    turns = conversation.turns
    lines = [turn.line for turn in turns]
    bm25 = BM25(lines)
    vectors = embedder().embed(lines)
    query_vectors = embedder().embed_queries([q.text for q in conversation.questions])
    for question, query_vector, record in zip(conversation.questions, query_vectors, dump, strict=True):
        by_bm25 = [turns[i].dia_id for i in bm25.rank(question.text)]
        by_dense = [turns[i].dia_id for i in dense_rank(vectors, query_vector)]
        run.recalls["bm25"].append(evidence_recall(question.evidence, by_bm25))
        run.recalls["dense"].append(evidence_recall(question.evidence, by_dense))
        record["bm25"], record["dense"] = run.recalls["bm25"][-1], run.recalls["dense"][-1]
        record["bm25_top10"], record["dense_top10"] = by_bm25[:10], by_dense[:10]
    run.baseline_seconds += time.perf_counter() - started


# --- figures ------------------------------------------------------------------------------------------------


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))] if ordered else float("nan")


def figures(run: Run, method: str) -> dict[str, dict[str, float]]:
    """{"recall_at_5": {"overall": …, "1": …, …}, …} for one method."""
    out: dict[str, dict[str, float]] = {}
    for k in KS:
        groups: dict[str, list[float]] = {"overall": []}
        for category, recall in zip(run.categories, run.recalls[method], strict=True):
            groups["overall"].append(recall[k])
            groups.setdefault(str(category), []).append(recall[k])
        out[f"recall_at_{k}"] = {
            name: round(sum(values) / len(values), 4) if values else 0.0 for name, values in
            sorted(groups.items(), key=lambda kv: (kv[0] != "overall", kv[0]))}
    return out


def source_revision() -> str:
    """The commit the measured code comes from ("+dirty" when src/ has uncommitted changes), if known."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "src"], cwd=ROOT, capture_output=True,
                               text=True, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return f"{head}+dirty" if dirty else head


def summary(run: Run, conversations: list[Conversation], dropped: Dropped, args: argparse.Namespace) -> dict[str, Any]:
    counts = Counter(str(c) for c in run.categories)
    return {
        **figures(run, "engram"),
        "baselines": {"bm25": figures(run, "bm25"), "dense": figures(run, "dense")},
        "categories": {str(k): v for k, v in CATEGORIES.items()},
        "questions": {"overall": len(run.categories), **dict(sorted(counts.items()))},
        "dropped_questions": {"no_evidence": dropped.no_evidence, "dangling_evidence_ids": dropped.dangling_ids},
        "data": str(args.data),
        "conversations": [c.sample_id for c in conversations],
        "ingest": {"turns": run.turns, "sessions": run.sessions, "memories": run.memories,
                   "seconds": round(run.ingest_seconds, 2),
                   "turns_per_second": round(run.turns / run.ingest_seconds, 1) if run.ingest_seconds else None},
        "recall_latency_ms": {"p50": round(percentile(run.latencies, 0.5) * 1000, 1),
                              "p95": round(percentile(run.latencies, 0.95) * 1000, 1),
                              "max": round(max(run.latencies, default=0.0) * 1000, 1),
                              "over_1s": sum(s > 1 for s in run.latencies),
                              "errors": run.errors},
        "recall_request": {"budget": "mid", "max_tokens": args.max_tokens},
        "embedding_model": args.embedding_model,
        "server_memory_mb": run.server_memory_mb,
        "results_per_query": {"min": min(run.result_counts, default=0),
                              "median": percentile([float(c) for c in run.result_counts], 0.5),
                              "below_50": sum(c < 50 for c in run.result_counts)},
        "provenance": {"mapped": sum(i.mapped for i in run.indexes),
                       "ambiguous": sum(i.ambiguous for i in run.indexes),
                       "unmapped": sum(i.unmapped for i in run.indexes)},
        "captions": args.captions,
        "revision": args.revision,
        "bank_config": args.bank_config or {},
    }


def print_table(report: dict[str, Any], command: str) -> None:
    ingest, latency = report["ingest"], report["recall_latency_ms"]
    tables = {"engram": report, **report["baselines"]}
    print(f"\nLoCoMo evidence recall — {len(report['conversations'])} conversations, {ingest['turns']:,} turns, "
          f"{report['questions']['overall']:,} questions (categories 1-4); Engram at {report['revision']}")
    header = f"{'':20} {'n':>5}"
    rule = f"{'-' * 20} {'-' * 5}"
    for method in METHODS:
        header += f"   {TITLES[method].format(model=report['embedding_model']):<20}"
        rule += f"   {'-' * 20}"
    print(header)
    print(f"{'':26}" + ("   " + " ".join(f"{f'R@{k}':>6}" for k in KS)) * len(METHODS))
    print(rule)
    for key in ["overall", *(str(c) for c in CATEGORIES)]:
        if key not in report["questions"]:
            continue
        name = "overall" if key == "overall" else f"{key} {CATEGORIES[int(key)]}"
        row = f"{name:20} {report['questions'][key]:>5}"
        for method in METHODS:
            row += "   " + " ".join(f"{tables[method][f'recall_at_{k}'][key] * 100:5.1f}%" for k in KS)
        print(row)
    print(f"\ningest (no LLM, one item per session): {ingest['turns']:,} turns in {ingest['sessions']} sessions → "
          f"{ingest['memories']:,} memories in {ingest['seconds']:.1f} s ({ingest['turns_per_second']} turns/s)")
    counts = report["results_per_query"]
    print(f"recall (budget mid, max_tokens {report['recall_request']['max_tokens']}): p50 {latency['p50']:.1f} ms, "
          f"p95 {latency['p95']:.1f} ms, max {latency['max'] / 1000:.1f} s ({latency['over_1s']} over 1 s, "
          f"{latency['errors']} failed, counted as misses); "
          f"results per query: min {counts['min']}, median {counts['median']:.0f}, "
          f"{counts['below_50']} queries with fewer than 50")
    memory = report["server_memory_mb"]
    if memory:
        print(f"server (engram serve, embedder {report['embedding_model']}): RSS {memory.get('rss', 0):,.0f} MB "
              f"after the recalls, peak {memory.get('peak', 0):,.0f} MB")
    origin = report["provenance"]
    dropped = report["dropped_questions"]
    print(f"turn provenance of recalled facts: {origin['mapped']:,} mapped, {origin['ambiguous']} ambiguous "
          f"(first turn taken), {origin['unmapped']} unmapped; questions dropped: {dropped['no_evidence']} "
          f"with no usable evidence id ({dropped['dangling_evidence_ids']} ids not in the conversation)")
    if report["bank_config"]:
        print(f"bank config overrides: {json.dumps(report['bank_config'])}")
    print(f"\nreproduce: {command}")


# --- main ---------------------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="a LoCoMo JSON file (default: %(default)s)")
    parser.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    parser.add_argument("--conversations", type=int, help="only the first N conversations")
    parser.add_argument("--questions", type=int, help="at most N questions per conversation")
    parser.add_argument("--max-tokens", type=int, default=8192, help="recall max_tokens (default %(default)s)")
    parser.add_argument("--no-captions", dest="captions", action="store_false",
                        help="leave out the captions of shared photos (kept by default, for all three methods)")
    parser.add_argument("--dump", type=Path, help="write each question's evidence and top results as JSONL")
    parser.add_argument("--embedding-model", default=os.environ.get("ENGRAM_EMBEDDING_MODEL") or "minilm",
                        help="the server's and the dense baseline's ENGRAM_EMBEDDING_MODEL (default: %(default)s)")
    parser.add_argument("--bank-config", type=json.loads, metavar="JSON",
                        help='bank config overrides for an ablation, e.g. \'{"enable_graph_retrieval": false}\'')
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    command = " ".join(shlex.quote(a) for a in [".venv/bin/python", "bench/locomo_recall.py", *sys.argv[1:]])
    if not args.data.is_file():
        print(f"skipped: no LoCoMo data at {args.data} (pass --data PATH)")
        return 0
    conversations, dropped = load(args.data, args.conversations, args.questions, args.captions)
    args.revision = source_revision()  # before the server starts: the code it loads
    run = Run()
    dump: list[dict[str, Any]] = []
    workdir = Path(tempfile.mkdtemp(prefix="engram-locomo-"))
    try:
        with engram_server(workdir, args.embedding_model) as server, \
                httpx.Client(base_url=server.url, timeout=1800) as http:
            for conversation in conversations:
                run_engram(http, conversation, run, args, dump)
            run.server_memory_mb = process_memory_mb(server.process.pid)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print("baselines: BM25 and dense over the raw turns…", flush=True)
    from engram.models.embedder import use_model

    use_model(args.embedding_model)
    offset = 0
    for conversation in conversations:
        run_baselines(conversation, run, dump[offset:offset + len(conversation.questions)])
        offset += len(conversation.questions)
    report = summary(run, conversations, dropped, args)
    print_table(report, command)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    if args.dump:
        args.dump.write_text("".join(json.dumps(record) + "\n" for record in dump))
    return 0


if __name__ == "__main__":
    sys.exit(main())
