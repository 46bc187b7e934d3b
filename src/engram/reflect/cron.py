"""Five-field cron expressions (minute hour day-of-month month day-of-week, UTC) for scheduled
mental-model refreshes: `*`, lists, ranges and steps; day-of-week 0 or 7 is Sunday."""

from __future__ import annotations

from datetime import datetime, timedelta

FIELDS = [(0, 59), (0, 23), (1, 31), (1, 12), (0, 7)]
LOOKBACK = timedelta(days=1)


def _values(part: str, low: int, high: int) -> set[int]:
    values: set[int] = set()
    for piece in part.split(","):
        body, _, step_text = piece.partition("/")
        step = int(step_text) if step_text else 1
        if step < 1:
            raise ValueError(f"bad step in {piece!r}")
        if body == "*":
            start, end = low, high
        elif "-" in body:
            start, end = (int(x) for x in body.split("-", 1))
        else:
            start = end = int(body)
        if start < low or end > high or start > end:
            raise ValueError(f"{piece!r} is outside {low}-{high}")
        values.update(range(start, end + 1, step))
    return values


def parse(expression: str) -> list[set[int]]:
    parts = expression.split()
    if len(parts) != 5:
        raise ValueError("a cron expression has 5 fields: minute hour day-of-month month day-of-week")
    fields = [_values(part, low, high) for part, (low, high) in zip(parts, FIELDS)]
    if 7 in fields[4]:
        fields[4].add(0)
    return fields


def matches(expression: str, moment: datetime) -> bool:
    minute, hour, day, month, weekday = parse(expression)
    return (
        moment.minute in minute and moment.hour in hour and moment.day in day and moment.month in month
        and (moment.isoweekday() % 7) in weekday
    )


def due(expression: str, last_run: datetime | None, now: datetime) -> bool:
    """Did the schedule fire in a minute after `last_run` (looking back at most a day) up to now?"""
    start = max(last_run or now - timedelta(minutes=1), now - LOOKBACK).replace(second=0, microsecond=0)
    moment = start + timedelta(minutes=1)
    fields = parse(expression)
    while moment <= now:
        if (moment.minute in fields[0] and moment.hour in fields[1] and moment.day in fields[2]
                and moment.month in fields[3] and (moment.isoweekday() % 7) in fields[4]):
            return True
        moment += timedelta(minutes=1)
    return False
