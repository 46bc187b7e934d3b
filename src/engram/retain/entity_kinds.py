"""An entity's kind (`entity_type`): person, organisation, place, product or concept.

The LLM names it with each entity; a caller may pass it (`EntityInput.type`); without either, the
offline extractor guesses from the name and the words around it — cues only, no gazetteer, so most
names stay without a kind rather than get a wrong one: a speaker, a title ("Dr. Lee") or a verb of
speech after the name is a person; a company suffix (Inc, Corp, Ltd, Labs …) or an all-capitals
acronym is an organisation; a place word (City, Street, Lake …) or "in / near / moved to" before the
name is a place. Products and concepts need an LLM. Cues can mislead ("specialises in TensorFlow"
reads as a place): the offline kind is a hint, the LLM's is the one to trust.
"""

from __future__ import annotations

import re

ENTITY_TYPES = ("person", "organisation", "place", "product", "concept")
_SYNONYMS = {
    "people": "person", "human": "person", "individual": "person",
    "organization": "organisation", "org": "organisation", "company": "organisation",
    "institution": "organisation", "team": "organisation",
    "location": "place", "city": "place", "country": "place", "loc": "place", "gpe": "place",
    "object": "product", "tool": "product", "software": "product", "item": "product",
    "topic": "concept", "theme": "concept", "idea": "concept",
}


def normalise_type(raw: str | None) -> str | None:
    """One of ENTITY_TYPES, or None for anything else (an unknown kind is no kind)."""
    if not raw:
        return None
    word = raw.strip().lower()
    return word if word in ENTITY_TYPES else _SYNONYMS.get(word)


_TITLE = re.compile(r"^(?:mr|mrs|ms|miss|dr|prof|sir|dame|ceo|aunt|uncle|grandma|grandpa)\.?\s", re.IGNORECASE)
_ORG_SUFFIX = re.compile(
    r"\b(?:inc|corp|corporation|ltd|llc|gmbh|plc|co|company|labs?|university|institute|bank|group|"
    r"foundation|agency|association|society|club|college|school|hospital|airlines?)\.?$",
    re.IGNORECASE,
)
_ACRONYM = re.compile(r"^[A-Z]{2,6}$")
_PLACE_SUFFIX = re.compile(
    r"\b(?:city|town|village|street|st|avenue|road|park|river|lake|mountains?|valley|beach|island|"
    r"county|province|state|bay|coast)\.?$",
    re.IGNORECASE,
)
_PLACE_PREFIX = re.compile(r"^(?:lake|mount|mt|port|fort|cape|isle|san|santa|saint)\.?\s", re.IGNORECASE)
_PERSON_VERBS = r"(?:said|says|told|tells|asked|asks|thinks|thought|feels|felt|loves|likes|wants|married|replied)"
_PLACE_BEFORE = r"(?:in|near|moved to|flew to|travell?ed to|drove to|relocated to|trip to|lives in|lived in)"


def guess_type(name: str, text: str, speaker: str | None = None) -> str | None:
    """The offline guess for `name` as it appears in `text`, or None when no cue says."""
    if speaker and name.casefold() == speaker.casefold():
        return "person"
    if _TITLE.match(name):
        return "person"
    if _ORG_SUFFIX.search(name) or _ACRONYM.match(name):
        return "organisation"
    if _PLACE_SUFFIX.search(name) or _PLACE_PREFIX.match(name):
        return "place"
    escaped = re.escape(name)
    if re.search(rf"\b{escaped}\s+{_PERSON_VERBS}\b", text):
        return "person"
    if re.search(rf"\b{_PLACE_BEFORE}\s+(?:the\s+)?{escaped}\b", text, re.IGNORECASE):
        return "place"
    return None


def guess_types(names: list[str], text: str, speaker: str | None = None) -> dict[str, str]:
    """name → guessed type, for the names that have one."""
    found = {name: guess_type(name, text, speaker) for name in names}
    return {name: kind for name, kind in found.items() if kind}
