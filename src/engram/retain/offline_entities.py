"""Named entities by rule, for retain without an LLM: runs of capitalised words ("Mountain View",
"Bank of America", "Dr. Smith"), acronyms ("LGBTQ"), words with inner capitals ("iPhone") and quoted
titles ("Nothing is Impossible"). Precision first: a capital that only starts a sentence does not
make a name when the word is a common one, and dates, greetings and pronouns are never entities.

The speaker rule: a "Name:" label at the start of a line says who speaks, not what is spoken of, so
it is not an entity by itself; the speaker (the label, else `speaker=`) is one when the utterance
speaks in the first person (I, me, my, we, us, our), placed where that first person first appears.
"""

from __future__ import annotations

import re

from engram.retain import entity_noise as noise
from engram.retain.sentences import split_turns

__all__ = ["extract_entities"]


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Never (part of) a name, wherever they stand: function words, pronouns, auxiliaries, dates, family roles.
_FUNCTION_WORDS = _words("""
i me my mine myself we us our ours ourselves you your yours yourself yourselves he him his himself she her
hers herself it its itself they them their theirs themselves this that these those the a an some any all each
every no none both either neither another other others such what which who whom whose when where why how
whatever whoever whenever wherever everyone everybody everything someone somebody something anyone anybody
anything nobody nothing everywhere somewhere anywhere one ones and but or nor so yet for if then than because
since though although while whereas unless until as at by in on of off out up down to from with without about
above after before during into onto over under through between among around against along across behind
beyond near per via also just only even still already always never often sometimes usually maybe perhaps
here there now not is are was were be been being am do does did done have has had having can could will
would shall should may might must gonna gotta wanna lemme kinda sorta dunno ya y'all
today tonight tomorrow yesterday tmrw weekend weekends
monday tuesday wednesday thursday friday saturday sunday mon tue tues wed thu thur thurs fri sat sun
january february march april june july august september october november december
jan feb mar apr jun jul aug sep sept oct nov dec spring summer autumn fall winter
mom mum dad mommy mummy daddy grandma grandpa granny nana papa sis bro dude guys folks buddy mate
tv diy asap pm am gf bf bff
""")
# Greetings and exclamations: never names, and the word after one still starts the sentence ("Wow, Long day").
_INTERJECTIONS = _words("""
hey hi hello hiya heya yo howdy bye goodbye ttyl cya wow woah whoa woohoo woo yay yippee hooray oh ah ahh aw
aww awww ooh ooo oooh oops oof ouch phew yum yummy mmm mm hmm hmmm um umm uh ugh ha hah haha hahaha hehe lol
lmao omg omfg btw fyi tbh imo imho jk yes yeah yea yep yup no nope nah ok okay alright well so thanks thank
thx ty congrats congratulations cheers sorry please dang damn gosh geez jeez welcome kudos bummer gotcha
yess yoohoo looky yikes whew meh bravo sheesh voila hurray hurrah aha ahem
""")
# Common words that are capitalised at the start of a sentence; in mid-sentence a capital means a name
# ("Hope is key" / "I met Hope"), so these only count at the start.
_COMMON_WORDS = _words("""
really very quite pretty too totally absolutely actually basically honestly literally seriously finally
especially luckily hopefully sadly clearly obviously apparently surely usually generally personally mostly
mainly truly highly simply definitely certainly probably possibly exactly overall anyway anyways besides
however otherwise meanwhile instead indeed sure recently lately soon later earlier once twice again almost
enough right together apart plus also anytime sometime ever somewhat daily regular someday therefore
slowly fully back lucky special unforgettable
good great awesome amazing nice cool lovely beautiful wonderful fantastic incredible perfect fine excellent
glad happy sad proud busy crazy cute funny tough hard easy long short super epic brave strong young simple
positive impressive precious adorable jealous confident difficult competitive contemporary domestic mental
visual cozy sweet fun new old big small little many much more most less few several lot lots tons same
different own true real whole better best worse worst favorite favourite first second third last next
love like hope wish guess think know see seen look looks looking sounds seems feel feels felt let lets keep
take takes make makes get gets got go goes going went gone come comes came coming try tries check remember
remind reminds imagine tell say said ask wait stay enjoy hang give gives gave bet made took found met left
thought bought brought told ran began became kept heard read wrote won lost sent spent built caught taught
drove flew ate swam sang slept woke saw want wants need needs appreciate believe cherish catch show talk
chat dance rock push count change care mind agree understand use used put rest turn turns build follow
create gather capture tackle hold speak support respect trust means brings miss spill chase fetch sound
store share shares varies means watch play played start started finish finished learn learned help helps
keep keeps stop stops walk walking move moving live living run running win lose pick sing draw paint
art music painting pottery reading writing cooking baking hiking camping running dancing gaming travel
traveling yoga chess guitar basketball football soccer tennis fantasy
family friends friend kids children people life work job school college home nature health sports food
dinner lunch breakfast coffee pets dogs cats books movies movie games game photos pics photo pic team class
group trip vacation city store man woman guy girl boy baby dog cat way thing things stuff moments progress
creativity confidence guidance quality meal friendship laughter community freedom success strength balance
patience safety injury email words stories events weddings themes thoughts worries setbacks challenges
obstacles struggles exams rejections tournaments assignments allergies conversations mentors animals plants
flowers fingers trips mix fits video board wall pub lab relax lesson lessons resources deadlines
perseverance mother father sister brother son daughter wife husband doggy pizza chicken sushi garlic coconut
horses turtles trilogy chef
birthday anniversary day days week weeks month months year years time morning evening night afternoon
two three four five six seven eight nine ten hundred thousand million
""")
_STOPWORDS = _FUNCTION_WORDS | _INTERJECTIONS
_LEXICON = _STOPWORDS | _COMMON_WORDS  # what laughter, stretching, shouting and typos are checked against
# Part of a name next to a capitalised word ("New York", "Best Buy", "Great Britain"), never one alone.
_NAME_ADJECTIVES = _words("""
new old good great big little best first north south east west northern southern grand royal upper lower
central united national international golden silver red blue green black white
""")
# Acronyms that lowercase to a stopword but are names when capitalised ("US", "AT&T", "IT").
_CAPITAL_EXCEPTIONS = frozenset({"us", "at", "it"})
# Joins capitalised words into one name: "Bank of America", "Vincent van Gogh", "AT&T".
_CONNECTORS = frozenset({
    "of", "the", "for", "de", "van", "von", "der", "den", "du", "la", "le", "da", "del", "di", "&",
})
# Name particles that, capitalised inside a sentence, start a name: "the Van Gogh exhibit".
_PARTICLES = frozenset({"van", "von", "de", "da", "di", "del", "la", "le", "du", "der", "den"})
_TITLES = frozenset({
    "dr", "mr", "mrs", "ms", "mx", "prof", "st", "mt", "sir", "dame", "lord", "lady", "saint", "uncle", "aunt",
    "auntie", "captain", "capt", "coach", "officer", "president", "king", "queen", "prince", "princess", "pope",
    "rev",
})
_CONTRACTION = re.compile(r"['’](?:m|re|ve|ll|d|t)$", re.IGNORECASE)
_POSSESSIVE = re.compile(r"['’]s$", re.IGNORECASE)
# sentence-initial words with these endings are verbs and nouns far more often than names (Fred aside)
_COMMON_ENDINGS = ("ing", "ed", "ness", "tion", "sion", "ment", "ful", "less")
_TOKEN = re.compile(r"(?:[A-Z]\.){2,}|[^\W_](?:[\w'’-]*[^\W_])?|\S")
# after any other mark (full stop, colon, quote, dash, emoji…) a capital may be the sentence's
_INSIDE_SENTENCE = frozenset(",&'’%$#@/+=")
_QUOTED = re.compile(r"[\"“]([^\"“”\n]{3,80})[\"”]")
# lowercase words a quoted title may hold: "Nothing is Impossible", "A Dance with Dragons"
_TITLE_SMALL_WORDS = _words(
    "a an the of and or in on at to for is with from by my your our his her its their be are was not no"
)
_FIRST_PERSON = re.compile(r"\b(?:[Ii]|[Mm][Ee]|[Mm]y|[Mm]ine|[Mm]yself|[Ww]e|[Uu]s|[Oo]urs?|[Oo]urselves)\b")


def extract_entities(text: str, *, speaker: str | None = None) -> list[str]:
    """Distinct entity names in order of appearance (first spelling kept, compared case-blind).
    `speaker` is who said `text`; "Name:" labels inside `text` override it line by line."""
    found: list[tuple[int, str]] = []
    if ":" in text:
        stride = len(text) + 1  # keeps turns in order whatever their positions inside
        for index, (turn_speaker, utterance) in enumerate(split_turns(text)):
            found.extend(
                (index * stride + pos, name) for pos, name in _from_utterance(utterance, turn_speaker or speaker)
            )
    else:
        found = _from_utterance(text, speaker)
    found.sort(key=lambda item: item[0])
    names: list[str] = []
    seen: set[str] = set()
    for _, name in found:
        key = name.casefold()
        if key not in seen:
            seen.add(key)
            names.append(name)
    return names


def _from_utterance(text: str, speaker: str | None) -> list[tuple[int, str]]:
    found = _quoted_titles(text)
    taken = [(start, end) for start, end, _ in found]
    names = [(start, title) for start, _, title in found]
    names.extend(_capitalised_runs(text, taken))
    if speaker:
        first_person = _FIRST_PERSON.search(text)
        if first_person:
            names.append((first_person.start(), speaker))
    return names


def _quoted_titles(text: str) -> list[tuple[int, int, str]]:
    """"Nothing is Impossible": two or more words in quotes, capitalised but for small words."""
    titles: list[tuple[int, int, str]] = []
    for match in _QUOTED.finditer(text):
        words = match.group(1).split()
        if len(words) < 2 or any(mark in match.group(1) for mark in ".!?,;:"):
            continue
        if words[0][0].isupper() and all(w[0].isupper() or w.lower() in _TITLE_SMALL_WORDS for w in words):
            titles.append((match.start(1), match.end(1), " ".join(words)))
    return titles


def _capitalised_runs(text: str, taken: list[tuple[int, int]]) -> list[tuple[int, str]]:
    names: list[tuple[int, str]] = []
    run: list[tuple[int, int, str]] = []  # (start, end, kind), kinds as `_classify` names them
    at_start = True
    previous_end = 0
    last_shouted = False
    for match in _TOKEN.finditer(text):
        token, start = match.group(), match.start()
        if "\n" in text[previous_end:start]:
            _flush(text, run, names)
            at_start = True
        previous_end = match.end()
        if any(lo <= start < hi for lo, hi in taken):
            _flush(text, run, names)
            continue
        if not token[0].isalnum():
            if token == "&" and run and not text[start - 1].isspace() and text[start + 1:start + 2].isalnum():
                run.append((start, match.end(), "connector"))  # "AT&T", not "Mel & Caroline"
                continue
            if token == "." and run and _continues_after_dot(text, run[-1]):
                continue  # "Dr. Smith", "J. K. Rowling"
            _flush(text, run, names)
            at_start = at_start or token not in _INSIDE_SENTENCE
            continue
        glued = text[match.end():match.end() + 1] in (".", "&") or text[start - 1:start] == "&"
        kind, end = _classify(token, start, at_start, glued)
        shouted = noise.is_shouted(token, _LEXICON, _COMMON_ENDINGS)
        if token.isupper() and token.lower() in _CAPITAL_EXCEPTIONS and (last_shouted or _shouted_next(text, match)):
            kind = "other"  # "I'M DOING IT": shouting, not the IT department
        last_shouted = shouted
        at_start = at_start and token.lower() in _INTERJECTIONS
        if kind == "connector" and run:
            run.append((start, end, kind))
        elif kind in ("name", "title", "modifier"):
            run.append((start, end, kind))
            if end < match.end():  # "Caroline's": the possessive ends the name
                _flush(text, run, names)
        else:
            _flush(text, run, names)
    _flush(text, run, names)
    return names


def _classify(token: str, start: int, at_start: bool, glued: bool) -> tuple[str, int]:
    """What a word is to a name ("name", "title", "modifier", "connector" or "other") and where the
    name part ends. `glued`: the word touches a following "." or an "&"."""
    lower = token.lower()
    if lower in _PARTICLES and token[0].isupper() and not at_start:
        return "modifier", start + len(token)
    if lower in _CONNECTORS:
        return ("other" if at_start else "connector"), start + len(token)
    if _CONTRACTION.search(token):
        return "other", start + len(token)
    word = _POSSESSIVE.sub("", token)
    end = start + len(word)
    if word.lower() in _TITLES and word[0].isupper():
        return "title", end
    if len(word) == 1:  # an initial ("J. K. Rowling", "AT&T") counts only inside a longer name
        return ("name" if word.isupper() and glued else "other"), end
    inner_capital = any(ch.isupper() for ch in word[1:]) and any(ch.islower() for ch in word)
    if not (word[0].isupper() or inner_capital) or word[0].isdigit():
        return "other", end
    if word.lower() in _NAME_ADJECTIVES:
        return "modifier", end
    if _is_noise(word, at_start):
        return "other", end
    if word.lower() in _STOPWORDS and not (word.isupper() and word.lower() in _CAPITAL_EXCEPTIONS):
        return "other", end
    if at_start and not word.isupper() and word.lower() in _COMMON_WORDS:
        return "other", end
    if at_start and not inner_capital and not word.isupper() and _common_at_start(word):
        return "other", end
    return "name", end


def _is_noise(word: str, at_start: bool) -> bool:
    """Laughter, a stretched or shouted common word anywhere; a misspelt one at a sentence's start."""
    lower = word.lower()
    if noise.is_laughter(lower) or noise.is_stretched_common(lower, _LEXICON):
        return True
    if word.isupper() and len(word) > 1 and lower not in _CAPITAL_EXCEPTIONS:
        return noise.is_shouted(word, _LEXICON, _COMMON_ENDINGS)
    if at_start and lower.endswith("s") and lower[:-1] in _FUNCTION_WORDS:
        return True  # "Mondays", "Weekends"
    return at_start and not word.isupper() and (noise.is_common(lower, _LEXICON)
                                                or noise.is_misspelt_common(lower, _LEXICON, _COMMON_WORDS))


def _common_at_start(word: str) -> bool:
    """"Painting is fun", "Visited Rome", "Self-care", "Unfortunately": capitalised by position only."""
    lower = word.lower()
    if "-" in word and word.split("-", 1)[1][:1].islower():
        return True
    if len(lower) >= 5 and lower.endswith(_COMMON_ENDINGS) and not lower.endswith("fred"):
        return True
    if len(lower) >= 5 and (lower.endswith("ies") or (lower[-1] == "s" and lower[-2] not in "suianeyo")):
        return True  # a plural: "Animals", "Stories" (names like James, Paris, Texas, Athens pass)
    return len(lower) >= 7 and lower.endswith("ly")


def _shouted_next(text: str, match: re.Match[str]) -> bool:
    following = _TOKEN.search(text, match.end())
    return following is not None and noise.is_shouted(following.group(), _LEXICON, _COMMON_ENDINGS)


def _continues_after_dot(text: str, last: tuple[int, int, str]) -> bool:
    start, end, kind = last
    return kind == "title" or (end - start == 1 and text[start].isupper())


def _flush(text: str, run: list[tuple[int, int, str]], names: list[tuple[int, str]]) -> None:
    while run and run[-1][2] in ("connector", "modifier"):
        run.pop()
    while run and run[0][2] == "connector":
        run.pop(0)
    if run and any(kind == "name" and end - start > 1 for start, end, kind in run):
        names.append((run[0][0], " ".join(text[run[0][0]:run[-1][1]].split())))
    run.clear()
