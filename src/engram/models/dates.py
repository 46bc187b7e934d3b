"""Local date parsing, no network and no model: the time window a recall query talks about, the dates
mentioned in a retained text (resolved against when it was said), and timestamps found in data.

Windows are whole days in the anchor's time zone, returned in UTC with `end` exclusive.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta, timezone, tzinfo

from engram.models.dates_calendar import DaySpan, envelope
from engram.models.dates_grammar import (
    FUTURE_CUE,
    RELATIVE_TO_DAY,
    RULE_PRIORITY,
    RULES,
    Rule,
    features,
    relative_to_day,
)

__all__ = ["DateMention", "TimeRange", "find_dates", "parse_query_time", "parse_timestamp"]


@dataclass(frozen=True, slots=True)
class TimeRange:
    """A window of whole days: `start` inclusive, `end` exclusive, both timezone-aware UTC.

    "7 May 2023" is [2023-05-07 00:00, 2023-05-08 00:00); "May 2023" is [May 1, June 1)."""

    start: datetime
    end: datetime

    def contains(self, moment: datetime) -> bool:
        return self.start <= moment < self.end

    def overlaps(self, other: TimeRange) -> bool:
        return self.start < other.end and other.start < self.end


@dataclass
class DateMention:
    """A time expression found in a text: its character span, its words, and the window it names."""

    start_char: int
    end_char: int
    text: str
    range: TimeRange


@dataclass(frozen=True, slots=True)
class _Hit:
    start: int
    end: int
    priority: int
    absolute: bool
    span: DaySpan
    reread: Callable[[date], DaySpan | None]  # the same words, read from another "today"


def parse_query_time(text: str, anchor: datetime) -> TimeRange | None:
    """The window a query asks about, relative words read from `anchor`; None when it names no time.

    When the query also names a dated day or month, relative words are read from that instead
    ("last Friday, on 23 January 2022" is 21 January 2022). Several expressions give the smallest
    window that covers them all ("between August 11 and August 15 2023")."""
    tz, today = _zone(anchor), anchor.date()
    hits = _scan(text, today)
    if not hits:
        return None
    spans = [hit.span for hit in hits]
    dated = [hit for hit in hits if hit.absolute]
    try:
        if dated and len(dated) < len(hits):
            reference = dated[0].span[1] - timedelta(days=1)
            spans = [hit.span if hit.absolute else (_safe(hit.reread, reference) or hit.span) for hit in hits]
        return _to_range(envelope(spans), tz)
    except OverflowError:  # a window past an end of the calendar ("next week" on 9999-12-31)
        return None


def find_dates(text: str, anchor: datetime) -> list[DateMention]:
    """Every time expression in `text`, in order, each resolved against `anchor` (when it was said):
    "I went there yesterday" said on 2023-05-08 mentions 2023-05-07."""
    tz = _zone(anchor)
    mentions = []
    for hit in _scan(text, anchor.date()):
        try:
            mentions.append(DateMention(hit.start, hit.end, text[hit.start:hit.end], _to_range(hit.span, tz)))
        except OverflowError:  # its day has no UTC midnight inside the calendar
            continue
    return mentions


def _zone(anchor: datetime) -> tzinfo:
    return anchor.tzinfo or UTC  # naive anchors are UTC


def _to_range(span: DaySpan, tz: tzinfo) -> TimeRange:
    return TimeRange(_midnight(span[0], tz), _midnight(span[1], tz))


def _midnight(day: date, tz: tzinfo) -> datetime:
    return datetime(day.year, day.month, day.day, tzinfo=tz).astimezone(UTC)


def _safe(reread: Callable[[date], DaySpan | None], day: date) -> DaySpan | None:
    try:
        return reread(day)
    except (ValueError, OverflowError):  # 31 February, or a year past the calendar's range
        return None


def _scan(text: str, today: date) -> list[_Hit]:
    present = features(text)
    if not present:
        return []
    hits: list[_Hit] = []
    for rule in RULES:
        if not rule.needs <= present:
            continue
        for match in rule.pattern.finditer(text):
            hit = _hit(rule, match, text, today)
            if hit is not None:
                hits.append(hit)
    hits.extend(_relative_to_days(text, hits))
    return _select(hits)


def _hit(rule: Rule, match: re.Match[str], text: str, today: date) -> _Hit | None:
    future = rule.directional and _speaks_of_future(text, match.start())

    def reread(day: date) -> DaySpan | None:
        return rule.resolve(match, day, future)

    span = _safe(reread, today)
    if span is None:
        return None
    return _Hit(match.start(), match.end(), RULE_PRIORITY[rule.name], rule.absolute, span, reread)


def _speaks_of_future(text: str, at: int) -> bool:
    start = max(text.rfind(mark, 0, at) for mark in ".!?\n") + 1
    ends = [found for found in (text.find(mark, at) for mark in ".!?\n") if found >= 0]
    return FUTURE_CUE.search(text, start, min(ends) if ends else len(text)) is not None


def _relative_to_days(text: str, hits: list[_Hit]) -> list[_Hit]:
    """"the week before 9 June 2023": a relative phrase hung on a day found by a rule."""
    found: list[_Hit] = []
    for base in hits:
        if base.priority not in _DAY_PRECISE:
            continue
        prefix = RELATIVE_TO_DAY.search(text, max(0, base.start - 60), base.start)
        if prefix is None:
            continue

        def reread(day: date, base: _Hit = base, prefix: re.Match[str] = prefix) -> DaySpan | None:
            anchor_span = base.reread(day)
            return relative_to_day(prefix, anchor_span[0]) if anchor_span else None

        span = _safe(lambda day, prefix=prefix: relative_to_day(prefix, day), base.span[0])
        if span is not None:
            found.append(_Hit(prefix.start(), base.end, -1, base.absolute, span, reread))
    return found


_DAY_PRECISE = frozenset(RULE_PRIORITY[rule.name] for rule in RULES if rule.day_precise)
_NO_DAY = date(2000, 1, 1)  # absolute rules ignore "today"


def _select(hits: list[_Hit]) -> list[_Hit]:
    """Keep the longest of overlapping matches ("7 May 2023" over "May 2023"), then the earlier rule."""
    chosen: list[_Hit] = []
    for hit in sorted(hits, key=lambda hit: (hit.start - hit.end, hit.priority, hit.start)):
        if all(hit.end <= other.start or hit.start >= other.end for other in chosen):
            chosen.append(hit)
    chosen.sort(key=lambda hit: hit.start)
    return chosen


_TIME_OF_DAY = re.compile(
    r"\b(?P<hour>[01]?[0-9]|2[0-3])(?::(?P<minute>[0-5][0-9])(?::(?P<second>[0-5][0-9])(?:[.,](?P<fraction>"
    r"[0-9]{1,6}))?)?)?\s*(?P<meridiem>[ap]\.?\s?m\b\.?)?(?![0-9])",
    re.IGNORECASE,
)
_ZONE = re.compile(r"\s*(?:(?P<utc>Z|UTC|GMT)\b|(?P<sign>[+-])(?P<hours>[0-9]{2}):?(?P<minutes>[0-9]{2})\b)?")
# A time followed by an offset of 24 hours or more, which no clock has.
_OFFSET_OUT_OF_RANGE = re.compile(
    r"\d:[0-5][0-9](?::[0-5][0-9](?:[.,][0-9]+)?)?\s*[+-](?:2[4-9]|[3-9][0-9]):?[0-9]{2}$"
)
_EPOCH = re.compile(r"[0-9]{9,10}(?:\.[0-9]+)?|[0-9]{12,13}")
_DATE_RULES = tuple(rule for rule in RULES if rule.absolute and rule.day_precise) + tuple(
    rule for rule in RULES if rule.name == "month_year"
)


def parse_timestamp(value: str) -> datetime | None:
    """A timestamp as found in data: ISO 8601 ("2023-05-08", "2023-05-08T13:56:00Z", "2023-05-08 13:56",
    offsets), written dates with an optional time ("1:56 pm on 8 May, 2023", "May 8, 2023 13:56",
    "8 May 2023") or Unix epoch seconds/milliseconds. Aware; naive values are taken as UTC. None when
    no date is found."""
    text = value.strip()
    if not text:
        return None
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        if _OFFSET_OUT_OF_RANGE.search(text):  # not a moment; reading only its date would be a guess
            return None
        try:
            parsed = _parse_epoch(text) or _parse_written(text)
        except (ValueError, OverflowError):  # e.g. an offset of ±24 h or more, a year past 9999
            return None
    if parsed is None:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _parse_epoch(text: str) -> datetime | None:
    if not _EPOCH.fullmatch(text):
        return None
    seconds = float(text) / (1000 if len(text) >= 12 and "." not in text else 1)
    return datetime.fromtimestamp(seconds, UTC)


def _parse_written(text: str) -> datetime | None:
    clock = next(
        (m for m in _TIME_OF_DAY.finditer(text) if m.group("minute") or m.group("meridiem")), None
    )
    rest = text if clock is None else text[: clock.start()] + " " * (clock.end() - clock.start()) + text[clock.end():]
    day = _written_day(rest)
    if day is None:
        return None
    if clock is None:
        return datetime(day.year, day.month, day.day)
    hour = int(clock.group("hour"))
    meridiem = (clock.group("meridiem") or "").lower()
    if meridiem.startswith("p") and hour < 12:
        hour += 12
    elif meridiem.startswith("a") and hour == 12:
        hour = 0
    micros = int((clock.group("fraction") or "0").ljust(6, "0"))
    moment = datetime(day.year, day.month, day.day, hour, int(clock.group("minute") or 0),
                      int(clock.group("second") or 0), micros)
    return moment.replace(tzinfo=_zone_after(text, clock.end()))


def _written_day(text: str) -> date | None:
    for rule in _DATE_RULES:
        match = rule.pattern.search(text)
        if match:
            span = _safe(lambda day, rule=rule, match=match: rule.resolve(match, day, False), _NO_DAY)
            if span:
                return span[0]
    return None


def _zone_after(text: str, at: int) -> tzinfo | None:
    zone = _ZONE.match(text, at)
    if zone is None or not (zone.group("utc") or zone.group("sign")):
        return None
    if zone.group("utc"):
        return UTC
    offset = timedelta(hours=int(zone.group("hours")), minutes=int(zone.group("minutes")))
    return timezone(-offset if zone.group("sign") == "-" else offset)
