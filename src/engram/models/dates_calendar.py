"""Calendar arithmetic on whole days for the local date parser: weeks, weekends, months, seasons.

Every span is a pair of dates ``(first, end)`` with ``end`` exclusive, so spans join and compare
without 23:59:59 tricks. Weeks run Monday to Sunday (ISO); seasons are meteorological and northern.
"""

from __future__ import annotations

from calendar import monthrange
from datetime import date, timedelta
from typing import Literal

DaySpan = tuple[date, date]
Unit = Literal["day", "week", "weekend", "month", "year"]
# How a name without a year ("March", "Friday", "summer") picks its occurrence: `past` and `future`
# are the defaults for plain mentions (chosen from the sentence's tense); the others are explicit words.
Direction = Literal["past", "future", "last", "this", "next"]

_DAY = timedelta(days=1)
_WEEK = timedelta(days=7)
SEASON_START = {"spring": 3, "summer": 6, "autumn": 9, "fall": 9, "winter": 12}


def day_span(day: date, shift: int = 0) -> DaySpan:
    first = day + shift * _DAY
    return first, first + _DAY


def week_span(day: date, shift: int = 0) -> DaySpan:
    monday = day - timedelta(days=day.weekday()) + shift * _WEEK
    return monday, monday + _WEEK


def weekend_span(day: date, shift: int = 0) -> DaySpan:
    saturday = week_span(day, shift)[0] + 5 * _DAY
    return saturday, saturday + 2 * _DAY


def add_months(year: int, month: int, count: int) -> tuple[int, int]:
    years, index = divmod(year * 12 + month - 1 + count, 12)
    return years, index + 1


def month_span(year: int, month: int) -> DaySpan:
    next_year, next_month = add_months(year, month, 1)
    return date(year, month, 1), date(next_year, next_month, 1)


def year_span(year: int) -> DaySpan:
    return date(year, 1, 1), date(year + 1, 1, 1)


def unit_span(day: date, unit: Unit, shift: int = 0) -> DaySpan:
    """The calendar period of `unit` containing `day`, moved by `shift` whole periods."""
    if unit == "day":
        return day_span(day, shift)
    if unit == "week":
        return week_span(day, shift)
    if unit == "weekend":
        return weekend_span(day, shift)
    if unit == "month":
        return month_span(*add_months(day.year, day.month, shift))
    return year_span(day.year + shift)


def shift_day(day: date, unit: Unit, count: int) -> date:
    """`day` moved by `count` units; months and years clamp the day (31 March - 1 month = 28 February)."""
    if unit == "day":
        return day + count * _DAY
    if unit in ("week", "weekend"):
        return day + count * _WEEK
    months = count if unit == "month" else 12 * count
    year, month = add_months(day.year, day.month, months)
    return date(year, month, min(day.day, monthrange(year, month)[1]))


def rolling_span(today: date, unit: Unit, count: int, future: bool) -> DaySpan:
    """"The past three weeks" (today included) or "the next three weeks" (from today)."""
    if future:
        return today, shift_day(today, unit, count) + _DAY
    return shift_day(today, unit, -count), today + _DAY


def envelope(spans: list[DaySpan]) -> DaySpan:
    return min(span[0] for span in spans), max(span[1] for span in spans)


def month_occurrence(month: int, today: date, direction: Direction) -> DaySpan:
    """Which year a month named without one falls in. `past`: the current month or the latest one
    before it ("in March" said in May 2023 is March 2023, said in February 2023 it is March 2022);
    `last` skips the current month; `future`/`next` mirror them forward; `this` is the anchor's year."""
    year = today.year
    if direction == "past":
        year -= month > today.month
    elif direction == "last":
        year -= month >= today.month
    elif direction == "future":
        year += month < today.month
    elif direction == "next":
        year += month <= today.month
    return month_span(year, month)


def yearless_day(month: int, day: int, today: date, future: bool) -> date | None:
    """"7 May" without a year: the latest such day on or before today, or the first on or after it
    when the sentence speaks of the future. None when the day does not exist (31 April)."""
    for year in (today.year, today.year + 1 if future else today.year - 1):
        if day > monthrange(year, month)[1]:
            continue
        candidate = date(year, month, day)
        if (candidate >= today) if future else (candidate <= today):
            return candidate
    return None


def weekday_occurrence(weekday: int, today: date, direction: Direction) -> date:
    """"Friday" (Monday = 0): `past`/`last` is the latest one strictly before today, `future`/`next`
    the first one strictly after it, `this` the one in the current ISO week."""
    if direction == "this":
        return week_span(today)[0] + weekday * _DAY
    if direction in ("future", "next"):
        return today + ((weekday - today.weekday() - 1) % 7 + 1) * _DAY
    return today - ((today.weekday() - weekday - 1) % 7 + 1) * _DAY


def season_span(season: str, year: int) -> DaySpan:
    """The season of `year`; winter 2023 is the one that contains January 2023 (Dec 2022 - Feb 2023)."""
    start = SEASON_START[season]
    first_year = year - 1 if start == 12 else year
    end_year, end_month = add_months(first_year, start, 3)
    return date(first_year, start, 1), date(end_year, end_month, 1)


def season_occurrence(season: str, today: date, direction: Direction) -> DaySpan:
    """`past`: the one under way or the latest begun; `last`: the latest ended; `this`: the nearest
    (summer said in October is the summer just gone, winter said in October the coming one);
    `future`: the one under way or the next; `next`: the next to begin."""
    spans = [season_span(season, year) for year in range(today.year - 2, today.year + 3)]
    if direction == "past":
        return [span for span in spans if span[0] <= today][-1]
    if direction == "last":
        return [span for span in spans if span[1] <= today][-1]
    if direction == "future":
        return next(span for span in spans if span[1] > today)
    if direction == "next":
        return next(span for span in spans if span[0] > today)
    return min(spans, key=lambda span: _distance(span, today))


def _distance(span: DaySpan, today: date) -> int:
    if span[0] <= today < span[1]:
        return 0
    return min(abs((span[0] - today).days), abs((span[1] - _DAY - today).days))


def part_of_month(span: DaySpan, part: str) -> DaySpan:
    """Early (1-10), mid (11-20), late (21-end), first half (1-15) and second half of a month."""
    first, end = span
    bounds = {
        "early": (1, 11), "mid": (11, 21), "late": (21, None),
        "first half": (1, 16), "second half": (16, None),
    }[part]
    start_day, end_day = bounds
    stop = end if end_day is None else first.replace(day=end_day)
    return first.replace(day=start_day), stop


def part_of_year(year: int, part: str) -> DaySpan:
    """Early (January-April), mid (May-August), late (September-December), and the halves."""
    first_month, months = {
        "early": (1, 4), "mid": (5, 4), "late": (9, 4), "first half": (1, 6), "second half": (7, 6),
    }[part]
    end_year, end_month = add_months(year, first_month, months)
    return date(year, first_month, 1), date(end_year, end_month, 1)


def nth_week_of_month(year: int, month: int, ordinal: int, weekend: bool) -> DaySpan:
    """"The second week of November" (days 8-14) or "the first weekend of August" (its first
    Saturday and the Sunday after); ordinal -1 means the last one."""
    first, end = month_span(year, month)
    if not weekend:
        start = end - _WEEK if ordinal < 0 else first + (ordinal - 1) * _WEEK
        return start, start + _WEEK
    if ordinal < 0:
        last_day = end - _DAY
        saturday = last_day - ((last_day.weekday() - 5) % 7) * _DAY
    else:
        saturday = first + ((5 - first.weekday()) % 7) * _DAY + (ordinal - 1) * _WEEK
    return saturday, saturday + 2 * _DAY
