"""The grammar of the local date parser: one compiled regex per kind of time expression, each with the
function that turns a match into a span of days relative to "today".

Case-insensitive throughout, except where a word is also common English: lowercase "may" is the
modal verb unless a year follows, and month abbreviations must be capitalised ("mar", "jan").
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date

from engram.models import dates_calendar as cal
from engram.models.dates_calendar import DaySpan, Direction, Unit

# (match, today, the sentence speaks of the future) -> span, or None when the match is no date after all
Resolver = Callable[[re.Match[str], date, bool], DaySpan | None]

_MONTH_NAMES = (
    "january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
    "november", "december",
)
_MONTH_NUMBERS = {name: number for number, name in enumerate(_MONTH_NAMES, start=1)}
_ABBREVIATIONS = {"jan": 1, "feb": 2, "mar": 3, "apr": 4, "jun": 6, "jul": 7, "aug": 8, "sep": 9,
                  "sept": 9, "oct": 10, "nov": 11, "dec": 12}
_MONTH_NUMBERS.update(_ABBREVIATIONS)
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_WORD_COUNTS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
}
_FUZZY_COUNTS = {"a couple of": (2, 2), "a couple": (2, 2), "couple of": (2, 2), "a few": (2, 4),
                 "few": (2, 4), "several": (3, 5)}
_PARTS = {"early": "early", "beginning": "early", "start": "early", "mid": "mid", "middle": "mid",
          "late": "late", "end": "late", "first half": "first half", "second half": "second half"}
_ORDINALS = {"first": 1, "1st": 1, "second": 2, "2nd": 2, "third": 3, "3rd": 3, "fourth": 4, "4th": 4,
             "last": -1, "final": -1}

MONTH = (r"(?P<month>(?:" + "|".join(_MONTH_NAMES) + r")\b|(?:jan|feb|mar|apr|jun|jul|aug|sept|sep|oct"
         r"|nov|dec)\b\.?)")
DAY = r"(?P<day>3[01]|[12][0-9]|0?[1-9])(?:st|nd|rd|th)?\b"
YEAR = r"(?P<year>(?:19|20)[0-9]{2})\b"
COUNT = (r"(?P<count>[0-9]{1,3}|an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve"
         r"|(?:a\s+)?couple(?:\s+of)?|(?:a\s+)?few|several)")
WEEKDAY = r"(?P<weekday>" + "|".join(_WEEKDAYS) + r")\b"
SEASON = r"(?P<season>spring|summer|autumn|fall|winter)\b"
UNIT = r"(?P<unit>day|weekend|week|month|year)s?\b"
PART = (r"(?:(?P<part>early|mid|late)(?:\s*-\s*|\s+)|the\s+(?P<part2>beginning|start|end|middle|first\s+half"
        r"|second\s+half)\s+of\s+(?:the\s+month\s+of\s+)?)")
_OPT_YEAR = rf"(?:,?\s+(?:of\s+)?{YEAR})?"
# "in 2000 steps" is a count, not a year
_NOT_A_YEAR = (r"(?!\s*[-–/][0-9])(?!\s+(?:steps|words|people|calories|points|dollars|euros|miles|meters"
               r"|metres|km|feet|pounds|kg|times|pages|members|followers|views|likes|copies|users)\b)")


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def month_number(token: str, has_year: bool) -> int | None:
    word = token.rstrip(".")
    if word == "may" and not has_year:
        return None  # "you may go": the modal verb
    lower = word.lower()
    if lower in _ABBREVIATIONS and not word[0].isupper():
        return None  # "mar", "jan" in lowercase are words, not months
    return _MONTH_NUMBERS[lower]


def count_range(token: str) -> tuple[int, int]:
    word = _norm(token)
    if word.isdigit():
        return int(word), int(word)
    if word in _FUZZY_COUNTS:
        return _FUZZY_COUNTS[word]
    return _WORD_COUNTS[word], _WORD_COUNTS[word]


def _year(m: re.Match[str]) -> int | None:
    value = m.groupdict().get("year")
    return int(value) if value else None


def _part(m: re.Match[str]) -> str:
    return _PARTS[_norm(m.group("part") or m.group("part2"))]


def _direction(future: bool) -> Direction:
    return "future" if future else "past"


def _month_in(m: re.Match[str], today: date, future: bool) -> DaySpan | None:
    """A month with or without its year, the year picked by the sentence's tense when absent."""
    year = _year(m)
    month = month_number(m.group("month"), year is not None)
    if month is None:
        return None
    return cal.month_span(year, month) if year else cal.month_occurrence(month, today, _direction(future))


def _iso_date(m: re.Match[str], today: date, future: bool) -> DaySpan:
    return cal.day_span(date(int(m.group("year")), int(m.group("mo")), int(m.group("d"))))


def _iso_month(m: re.Match[str], today: date, future: bool) -> DaySpan:
    return cal.month_span(int(m.group("year")), int(m.group("mo")))


def _numeric_date(m: re.Match[str], today: date, future: bool) -> DaySpan:
    first, second = int(m.group("a")), int(m.group("b"))
    # US order (5/7/2023 = May 7) unless the first number cannot be a month
    month, day = (second, first) if first > 12 else (first, second)
    return cal.day_span(date(int(m.group("year")), month, day))


def _day_month(m: re.Match[str], today: date, future: bool) -> DaySpan | None:
    year = _year(m)
    month = month_number(m.group("month"), year is not None)
    if month is None:
        return None
    day = int(m.group("day"))
    found = date(year, month, day) if year else cal.yearless_day(month, day, today, future)
    return cal.day_span(found) if found else None


def _part_month(m: re.Match[str], today: date, future: bool) -> DaySpan | None:
    span = _month_in(m, today, future)
    return cal.part_of_month(span, _part(m)) if span else None


def _nth_week(m: re.Match[str], today: date, future: bool) -> DaySpan | None:
    span = _month_in(m, today, future)
    if span is None:
        return None
    weekend = m.group("unit").lower() == "weekend"
    return cal.nth_week_of_month(span[0].year, span[0].month, _ORDINALS[m.group("ord").lower()], weekend)


def _part_year(m: re.Match[str], today: date, future: bool) -> DaySpan:
    return cal.part_of_year(int(m.group("year")), _part(m))


def _season_year(m: re.Match[str], today: date, future: bool) -> DaySpan:
    return cal.season_span(m.group("season").lower(), int(m.group("year")))


def _year_only(m: re.Match[str], today: date, future: bool) -> DaySpan:
    span = cal.year_span(int(m.group("year")))
    if _norm(m.group("pre")) == "since":
        return span[0], max(span[1], cal.day_span(today)[1])
    return span


def _decade(m: re.Match[str], today: date, future: bool) -> DaySpan:
    first = int(m.group("decade"))
    return cal.year_span(first)[0], cal.year_span(first + 9)[1]


def _month_only(m: re.Match[str], today: date, future: bool) -> DaySpan | None:
    month = month_number(m.group("month"), False)
    if month is None:
        return None
    pre = _norm(m.group("pre"))
    direction: Direction = {"last": "last", "this past": "last", "this": "this", "next": "next",
                            "this coming": "next"}.get(pre, _direction(future))
    span = cal.month_occurrence(month, today, "past" if pre == "since" else direction)
    if pre == "since":
        return span[0], cal.day_span(today)[1]
    return span


def _weekday(m: re.Match[str], today: date, future: bool) -> DaySpan:
    pre = _norm(m.group("pre") or "")
    direction: Direction = {"last": "last", "past": "last", "this past": "last", "this": "this",
                            "next": "next", "coming": "next", "this coming": "next"}.get(pre, _direction(future))
    weekday = _WEEKDAYS.index(m.group("weekday").lower())
    return cal.day_span(cal.weekday_occurrence(weekday, today, direction))


_DAY_OFFSETS = {"the day before yesterday": -2, "yesterday": -1, "last night": -1, "last evening": -1,
                "the day after tomorrow": 2, "tomorrow": 1, "tmrw": 1}


def _day_word(m: re.Match[str], today: date, future: bool) -> DaySpan:
    return cal.day_span(today, _DAY_OFFSETS.get(_norm(m.group("word")), 0))


_SHIFTS = {"last": -1, "previous": -1, "this past": -1, "past": -1, "this": 0, "next": 1, "coming": 1,
           "this coming": 1}


def _calendar_unit(m: re.Match[str], today: date, future: bool) -> DaySpan:
    """"last week" is the calendar week before this one; "the last week"/"the past week" are the last
    seven days; "next weekend" is the weekend of next week, "this coming weekend" the nearest."""
    which, unit = _norm(m.group("which")), _unit(m)
    forward = which in ("next", "coming", "this coming")
    if unit != "weekend" and (which == "past" or (m.group("the") and which != "this")):
        return cal.rolling_span(today, unit, 1, forward)
    shift = _SHIFTS[which]
    if unit == "weekend" and which in ("coming", "this coming"):
        shift = 0
    return cal.unit_span(today, unit, shift)


def _unit(m: re.Match[str]) -> Unit:
    return m.group("unit").lower()  # type: ignore[return-value]


def _before_last(m: re.Match[str], today: date, future: bool) -> DaySpan:
    return cal.unit_span(today, _unit(m), -2 if "before" in m.group("rel").lower() else 2)


def _earlier_later(m: re.Match[str], today: date, future: bool) -> DaySpan:
    first, end = cal.unit_span(today, _unit(m))
    if m.group("which").lower() == "earlier":
        return first, cal.day_span(today)[1]
    return today, end


def shifted_span(day: date, unit: Unit, low: int, high: int) -> DaySpan:
    """The periods from `high` to `low` units away from `day` (negative = before), e.g. "a few weeks
    ago" spans the weeks two to four weeks back."""
    if unit == "weekend":
        return cal.weekend_span(day, low)[0], cal.weekend_span(day, high)[1]
    return cal.unit_span(cal.shift_day(day, unit, low), unit)[0], cal.unit_span(cal.shift_day(day, unit, high), unit)[1]


def _ago(m: re.Match[str], today: date, future: bool) -> DaySpan:
    low, high = count_range(m.group("count"))
    return shifted_span(today, _unit(m), -high, -low)


def _from_now(m: re.Match[str], today: date, future: bool) -> DaySpan:
    low, high = count_range(m.group("count"))
    return shifted_span(today, _unit(m), low, high)


def _rolling(m: re.Match[str], today: date, future: bool) -> DaySpan:
    forward = m.group("which").lower() in ("next", "coming")
    return cal.rolling_span(today, _unit(m), count_range(m.group("count"))[1], forward)


def _the_weekend(m: re.Match[str], today: date, future: bool) -> DaySpan:
    # the weekend under way, else the last one (or, speaking of the future, the coming one)
    return cal.weekend_span(today, 0 if future or today.weekday() >= 5 else -1)


def _season(m: re.Match[str], today: date, future: bool) -> DaySpan:
    pre = _norm(m.group("pre"))
    if "past" in pre or pre == "last":
        direction: Direction = "last"
    elif "coming" in pre:
        direction = "future"
    elif pre in ("this", "next"):
        direction = pre  # type: ignore[assignment]
    else:
        direction = _direction(future)
    return cal.season_occurrence(m.group("season").lower(), today, direction)


@dataclass(frozen=True, slots=True)
class Rule:
    name: str
    pattern: re.Pattern[str]
    resolve: Resolver
    needs: frozenset[str]  # features (see `features`) the text must have for the rule to be tried
    absolute: bool = False  # names its year: never re-read against another reference date
    directional: bool = False  # a name without a year, whose tense decides past or future
    day_precise: bool = False  # a single day, which "the week before …" can hang on


def _rule(name: str, needs: str, resolve: Resolver, *, pattern: str, **flags: bool) -> Rule:
    return Rule(name, re.compile(pattern, re.IGNORECASE), resolve, frozenset(needs.split()), **flags)


# Earlier rules win ties between overlapping matches of the same length; longer matches always win.
RULES: tuple[Rule, ...] = (
    # dates that name their year
    _rule("iso_date", "digit", _iso_date, absolute=True, day_precise=True, pattern=(
        r"\b(?P<year>(?:19|20)[0-9]{2})(?P<sep>[-/])(?P<mo>1[0-2]|0?[1-9])(?P=sep)(?P<d>3[01]|[12][0-9]|0?[1-9])"
        r"(?![0-9])")),
    _rule("iso_month", "digit", _iso_month, absolute=True,
          pattern=r"\b(?P<year>(?:19|20)[0-9]{2})-(?P<mo>0[1-9]|1[0-2])(?![-/0-9])"),
    _rule("numeric_date", "digit", _numeric_date, absolute=True, day_precise=True, pattern=(
        r"\b(?P<a>3[01]|[12][0-9]|0?[1-9])/(?P<b>3[01]|[12][0-9]|0?[1-9])/(?P<year>(?:19|20)[0-9]{2})\b")),
    _rule("day_month_year", "digit month", _day_month, absolute=True, day_precise=True,
          pattern=rf"\b(?:the\s+)?{DAY}(?:\s+of)?\s+{MONTH}(?:,\s*|\s+){YEAR}"),
    _rule("month_day_year", "digit month", _day_month, absolute=True, day_precise=True,
          pattern=rf"\b{MONTH}\s+(?:the\s+)?{DAY}(?:,\s*|\s+){YEAR}"),
    _rule("part_month", "month", _part_month, directional=True, pattern=rf"\b{PART}{MONTH}{_OPT_YEAR}"),
    _rule("nth_week", "month unit", _nth_week, directional=True, pattern=(
        r"\b(?:the\s+)?(?P<ord>first|second|third|fourth|last|final|1st|2nd|3rd|4th)\s+(?P<unit>weekend|week)\s+"
        rf"(?:of|in)\s+{MONTH}{_OPT_YEAR}")),
    _rule("month_year", "digit month", _month_in, absolute=True, pattern=rf"\b{MONTH},?\s+(?:of\s+)?{YEAR}"),
    _rule("part_year", "digit", _part_year, absolute=True, pattern=rf"\b{PART}{YEAR}"),
    _rule("season_year", "digit season", _season_year, absolute=True,
          pattern=rf"\b(?:the\s+)?{SEASON}\s+(?:of\s+)?{YEAR}"),
    _rule("decade", "digit", _decade, absolute=True, pattern=r"\bthe\s+(?P<decade>(?:19|20)[0-9]0)['’]?s\b"),
    _rule("year", "digit", _year_only, absolute=True,
          pattern=rf"\b(?P<pre>in|during|since|throughout|from|of|the\s+year|year)\s+{YEAR}{_NOT_A_YEAR}"),
    # names without a year: the sentence's tense picks the occurrence
    _rule("day_month", "digit month", _day_month, directional=True, day_precise=True,
          pattern=rf"\b(?:the\s+)?{DAY}(?:\s+of)?\s+{MONTH}"),
    _rule("month_day", "digit month", _day_month, directional=True, day_precise=True,
          pattern=rf"\b{MONTH}\s+(?:the\s+)?{DAY}(?!\s*[:.][0-9])"),
    _rule("month", "month", _month_only, directional=True, pattern=(
        r"\b(?P<pre>in|during|throughout|last|this\s+past|this\s+coming|this|next|since|from|between|of"
        rf"|the\s+month\s+of|until)\s+{MONTH}(?!\s+(?:the\s+)?[0-9])")),
    _rule("weekday", "weekday", _weekday, directional=True, pattern=(
        rf"\b(?:(?P<pre>last|this\s+past|past|this\s+coming|coming|this|next|on)\s+)?{WEEKDAY}"
        r"(?(pre)|(?=\s+(?:morning|afternoon|evening|night)\b))")),
    _rule("the_weekend", "weekend", _the_weekend, directional=True,
          pattern=r"\b(?:(?:over|on|during|at|for)\s+)?the\s+weekend\b"),
    _rule("season", "season", _season, directional=True, pattern=(
        r"\b(?P<pre>this\s+past|this\s+coming|last|this|next|coming|(?:in|during|over|throughout|since|all|for)"
        rf"(?:\s+the)?(?:\s+past)?)\s+{SEASON}(?!,?\s+(?:of\s+)?[0-9])")),
    # relative to today
    _rule("day_word", "dayword", _day_word, pattern=(
        r"\b(?P<word>the\s+day\s+before\s+yesterday|the\s+day\s+after\s+tomorrow|yesterday|today|tonight|tomorrow"
        r"|tmrw|last\s+night|last\s+evening|this\s+(?:morning|afternoon|evening)|earlier\s+today|later\s+today)\b")),
    _rule("before_last", "unit relword", _before_last,
          pattern=r"\bthe\s+(?P<unit>weekend|week|month|year)\s+(?P<rel>before\s+last|after\s+next)\b"),
    _rule("calendar_unit", "unit relword", _calendar_unit, pattern=(
        r"\b(?P<the>the\s+)?(?P<which>last|this\s+past|past|previous|this\s+coming|coming|this|next)\s+"
        r"(?P<unit>weekend|week|month|year)\b")),
    _rule("earlier_later", "unit earlier", _earlier_later,
          pattern=r"\b(?P<which>earlier|later)\s+(?:this|in\s+the)\s+(?P<unit>week|month|year)\b"),
    _rule("ago", "unit ago", _ago, pattern=rf"\b{COUNT}\s+{UNIT}\s+(?:ago|back)\b"),
    _rule("from_now", "unit ago", _from_now, pattern=rf"\b{COUNT}\s+{UNIT}\s+from\s+now\b"),
    _rule("rolling", "unit relword", _rolling, pattern=(
        rf"\b(?:the\s+)?(?P<which>past|last|previous|next|coming)\s+{COUNT}\s+(?P<unit>day|week|month|year)s\b")),
)
RULE_PRIORITY = {rule.name: index for index, rule in enumerate(RULES)}

# "the week before", "two weekends before", "the Friday before", "the week of" + a day: the same
# relative words, read from that day instead of from today.
RELATIVE_TO_DAY = re.compile(
    rf"\b(?:(?:the|last)\s+)?(?:{COUNT}\s+)?(?P<unit>day|weekend|week|month|year|"
    + "|".join(_WEEKDAYS) + r")s?\s+(?P<dir>before|after|prior\s+to|of)\s+(?:the\s+)?$",
    re.IGNORECASE,
)


def relative_to_day(m: re.Match[str], day: date) -> DaySpan | None:
    unit_word, way = m.group("unit").lower(), _norm(m.group("dir"))
    if way == "of":
        return cal.unit_span(day, unit_word) if unit_word in ("week", "weekend") else None  # type: ignore[arg-type]
    forward = way == "after"
    if unit_word in _WEEKDAYS:
        found = cal.weekday_occurrence(_WEEKDAYS.index(unit_word), day, "next" if forward else "last")
        return cal.day_span(found)
    unit: Unit = unit_word  # type: ignore[assignment]
    low, high = count_range(m.group("count")) if m.group("count") else (1, 1)
    return shifted_span(day, unit, low, high) if forward else shifted_span(day, unit, -high, -low)


# Words that move a name without a year ("in June", "on Friday") into the future.
FUTURE_CUE = re.compile(
    r"\b(?:will|shall|gonna|going|plan(?:s|ning)?\s+(?:to|on|for)|planning|upcoming|can['’]t\s+wait"
    r"|looking\s+forward|hop(?:e|ing)\s+to|about\s+to|scheduled|intend(?:s|ing)?\s+to)\b|['’]ll\b",
    re.IGNORECASE,
)
_FEATURE_WORDS = {
    "month": tuple(_ABBREVIATIONS) + ("may",),
    "weekday": _WEEKDAYS,
    "season": ("spring", "summer", "autumn", "fall", "winter"),
    "dayword": ("yesterday", "today", "tonight", "tomorrow", "tmrw", "night", "evening", "morning", "afternoon"),
    "unit": ("day", "week", "month", "year"),
    "weekend": ("weekend",),
    "relword": ("last", "past", "previous", "next", "coming", "this"),
    "ago": ("ago", "back", "from now"),
    "earlier": ("earlier", "later"),
}
_DIGIT = re.compile(r"[0-9]")


def features(text: str) -> set[str]:
    """The kinds of words present, by substring tests that cost far less than trying every rule."""
    lower = text.lower()
    found = {name for name, words in _FEATURE_WORDS.items() if any(word in lower for word in words)}
    if _DIGIT.search(text):
        found.add("digit")
    return found
