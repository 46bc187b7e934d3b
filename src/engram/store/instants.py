"""Instants at the ends of the calendar. Python's datetimes stop at 0001-01-01 and 9999-12-31, and
asyncpg writes those two exact instants as PostgreSQL's -infinity/infinity, which it reads back as
*naive* datetimes: one such fact made every recall on its bank fail comparing naive with aware.

So instants are clamped one microsecond inside the calendar before they are stored, anything read
back is made aware before arithmetic, and a moment that has no UTC value at all (0001-01-01 at
+14:00 is still year 0 in UTC) is refused where it comes in."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

EARLIEST = datetime.min.replace(tzinfo=UTC) + timedelta(microseconds=1)
LATEST = datetime.max.replace(tzinfo=UTC) - timedelta(microseconds=1)


class OutOfCalendar(ValueError):
    """The moment falls before 0001-01-01 or after 9999-12-31 once converted to UTC."""


def in_utc(value: datetime) -> datetime:
    """`value` as an aware UTC datetime (naive = UTC); OutOfCalendar when UTC has no such day."""
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise OutOfCalendar(
            f"{value.isoformat()} is outside 0001-01-01T00:00:00Z … 9999-12-31T23:59:59Z in UTC"
        ) from None


def storable(value: datetime | None) -> datetime | None:
    """An instant safe to write and read back (see `clamp`); None stays None."""
    return None if value is None else clamp(value)


def clamp(value: datetime) -> datetime:
    """`value` as aware UTC strictly inside the calendar (so never stored as ±infinity); a moment
    past an end is clamped to it."""
    try:
        value = in_utc(value)
    except OutOfCalendar:
        return EARLIEST if value.year == 1 else LATEST
    return min(max(value, EARLIEST), LATEST)


def aware(value: datetime | None) -> datetime | None:
    """A datetime read back from the store as aware UTC: asyncpg returns ±infinity (stored by older
    versions) as naive datetime.max/min."""
    if value is None or value.tzinfo is not None:
        return value
    return value.replace(tzinfo=UTC)
