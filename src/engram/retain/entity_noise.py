"""Capitalised words in chat that are not names: laughter ("Ahhahha", "Hahah"), stretched words
("Sooo", "Yesss", "Heyyy"), shouting ("DOING IT", "SO PROUD") and misspelt common words at the start
of a sentence ("Remenber", "Startin", "Becuase"). Used by the offline entity extractor.

`lexicon` is the extractor's set of common and function words; a word is noise when it is one of
them once its laughter, stretching, capitals or one typo are taken away."""

from __future__ import annotations

import re
from collections.abc import Collection


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# ha, hah, haha, ahah, ahhahha, hehe, hihi, hoho, and lol / lmao / rofl however long
_LAUGHTER = re.compile(
    r"^(?:[ah]*h[ah]*a[ah]*|[eh]*h[eh]*e[eh]*|[ih]*h[ih]*i[ih]*|l+o+l+(?:o*l*)*|l+m+f*a+o+|ro+f+l+)$"
)
_STRETCH = re.compile(r"([a-z])\1{2,}")
# Chat spellings of common words, and common words the extractor's lists lack, that still start sentences.
_CHAT_WORDS = _words("""
plz pls probly prolly def defo tho thru cuz coz bc nvm idk ikr smh tbf ngl rn irl mhm pfft psst hmph ew eww
yas yaas yass yaaas ofc obv srsly omw
send typical rainy sunny cloudy snowy photography therapy watercolor watercolour exercise because remember
tomorrow definitely apparently finally really believe beautiful weird tonight starting working running
excited nervous tired exhausted sorry honestly wellness parenting mornings evenings gardening knitting
baking swimming kayaking surfing bowling journaling volunteering meditation graduation phd
""")


def is_laughter(lower: str) -> bool:
    return len(lower) >= 3 and bool(_LAUGHTER.match(lower))


def destretched(lower: str) -> set[str]:
    """"sooo" → {"so", "soo"}: each run of three or more letters as one and as two."""
    if not _STRETCH.search(lower):
        return {lower}
    return {_STRETCH.sub(r"\1", lower), _STRETCH.sub(r"\1\1", lower)}


def is_common(lower: str, lexicon: Collection[str]) -> bool:
    return lower in lexicon or lower in _CHAT_WORDS


def is_stretched_common(lower: str, lexicon: Collection[str]) -> bool:
    """"yesss", "heyyy", "ooooh", "yaaas": a common word or an interjection, stretched."""
    forms = destretched(lower)
    return forms != {lower} and any(is_common(form, lexicon) or is_laughter(form) for form in forms)


def is_shouted(word: str, lexicon: Collection[str], common_endings: tuple[str, ...]) -> bool:
    """An all-capitals common word ("DOING", "AMAZING", "COOL"), not an acronym ("NASA", "LGBTQ")."""
    if len(word) < 2 or not word.isalpha() or not word.isupper():
        return False
    lower = word.lower()
    if is_laughter(lower) or any(is_common(form, lexicon) for form in destretched(lower)):
        return True
    return len(lower) >= 5 and lower.endswith(common_endings)


def is_misspelt_common(lower: str, lexicon: Collection[str], content_words: Collection[str]) -> bool:
    """"remenber", "becuase", "startin", "realy": one typo away from a common word. Only for
    sentence-initial words (a mid-sentence capital still means a name), and only long enough words
    that names rarely sit one edit from a common word ("Sally" is one letter from "sadly")."""
    if len(lower) >= 5 and lower.endswith("in"):  # a dropped g: "startin", "workin", "runnin"
        stem = lower[:-2]
        undoubled = stem[:-1] if len(stem) > 2 and stem[-1] == stem[-2] else stem
        if stem in content_words or undoubled in content_words or lower + "g" in _CHAT_WORDS:
            return True  # content words only: "Justin" is not "just" + "in"
    if len(lower) >= 6:
        return any(is_common(candidate, lexicon) for candidate in _one_edit(lower))
    if len(lower) == 5:  # only a missing letter: "realy"
        return any(is_common(lower[:i] + ch + lower[i:], lexicon) for i in range(6) for ch in _LETTERS)
    return False


_LETTERS = "abcdefghijklmnopqrstuvwxyz"


def _one_edit(word: str) -> set[str]:
    splits = [(word[:i], word[i:]) for i in range(len(word) + 1)]
    deletes = {a + b[1:] for a, b in splits if b}
    swaps = {a + b[1] + b[0] + b[2:] for a, b in splits if len(b) > 1}
    replaces = {a + ch + b[1:] for a, b in splits if b for ch in _LETTERS}
    inserts = {a + ch + b for a, b in splits for ch in _LETTERS}
    return (deletes | swaps | replaces | inserts) - {word}
