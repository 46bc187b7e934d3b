"""Fact extraction with no LLM: each conversation turn (each sentence of prose or of a very long turn)
becomes a `world` fact that keeps its speaker's name, its entities come from the rule-based
extractor, and relative dates are resolved against the item's timestamp. Entities, the graph, tags
and recall all work from these facts."""

from __future__ import annotations

from datetime import datetime

from engram.models.dates import find_dates
from engram.retain.entity_kinds import guess_types
from engram.retain.facts import ExtractedFact
from engram.retain.offline_entities import extract_entities
from engram.retain.sentences import split_sentences, split_turns


def _date_label(start: datetime, end: datetime) -> str:
    days = (end - start).days
    if days <= 1:
        return start.strftime("%-d %B %Y")
    if days <= 31 and start.day == 1:
        return start.strftime("%B %Y")
    if days >= 365:
        return start.strftime("%Y")
    return f"{start.strftime('%-d %B %Y')} to {end.strftime('%-d %B %Y')}"


def sentence_fact(sentence: str, speaker: str | None, said_at: datetime | None) -> ExtractedFact:
    what = f"{speaker}: {sentence}" if speaker else sentence
    entities = extract_entities(sentence, speaker=speaker)
    if speaker and speaker not in entities:
        entities.insert(0, speaker)
    fact = ExtractedFact(what=what, entities=entities, entity_types=guess_types(entities, sentence, speaker))
    if said_at is not None:
        mentions = find_dates(sentence, said_at)
        if mentions:
            window = mentions[0].range
            fact.fact_kind = "event"
            fact.occurred_start, fact.occurred_end = window.start, window.end
            fact.when = _date_label(window.start, window.end)
    return fact


# A conversation turn up to this long stays one fact: its sentences explain each other ("It was so
# powerful." means nothing alone). Longer turns and prose are cut into sentences.
WHOLE_TURN_CHARS = 600


def extract_offline(chunk: str, *, said_at: datetime | None) -> list[ExtractedFact]:
    """The chunk's facts in order; each carries the fact before it as its lead-in, and a whole turn of
    several sentences carries them too, so recall can match a reply by the question it answers and a
    long turn by its best sentence."""
    facts: list[ExtractedFact] = []
    for speaker, utterance in split_turns(chunk):
        whole_turn = speaker is not None and len(utterance) <= WHOLE_TURN_CHARS
        pieces = [" ".join(utterance.split())] if whole_turn else split_sentences(utterance)
        for piece in pieces:
            if not piece:
                continue
            fact = sentence_fact(piece, speaker, said_at)
            if whole_turn:
                sentences = split_sentences(piece)
                if len(sentences) > 1:
                    fact.sentences = [f"{speaker}: {sentence}" for sentence in sentences]
            if facts:
                fact.lead_in = facts[-1].what
            facts.append(fact)
    return facts
