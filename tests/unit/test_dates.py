"""The local date parser: what window a query names, which dates a retained text mentions, and
how timestamps found in data are read. Every case is anchored on Monday 8 May 2023, 13:56 UTC."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, timezone

import pytest

from engram.models.dates import TimeRange, find_dates, parse_query_time, parse_timestamp

ANCHOR = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)  # a Monday


def window(query: str, anchor: datetime = ANCHOR) -> tuple[date, date] | None:
    """The query's window as (first day, day after the last): `end` is exclusive."""
    found = parse_query_time(query, anchor)
    return (found.start.date(), found.end.date()) if found else None


def days(first: str, end: str) -> tuple[date, date]:
    return date.fromisoformat(first), date.fromisoformat(end)


QUERY_WINDOWS = [
    # absolute dates
    ("What happened on 2023-05-07?", days("2023-05-07", "2023-05-08")),
    ("What did I do in May 2023?", days("2023-05-01", "2023-06-01")),
    ("Who did Maria meet on 7 May 2023?", days("2023-05-07", "2023-05-08")),
    ("Who did Maria have dinner with on May 3, 2023?", days("2023-05-03", "2023-05-04")),
    ("What did Gina find on 1 February, 2023?", days("2023-02-01", "2023-02-02")),
    ("What book did Tim finish on 8th December, 2023?", days("2023-12-08", "2023-12-09")),
    ("Where was the picture shared on December 1,2023 taken?", days("2023-12-01", "2023-12-02")),
    ("What did we plan on 5/7/2023?", days("2023-05-07", "2023-05-08")),
    ("How many times did she go to the beach in 2022?", days("2022-01-01", "2023-01-01")),
    ("What state did Joanna visit in summer 2021?", days("2021-06-01", "2021-09-01")),
    ("What did she do in the summer of 2022?", days("2022-06-01", "2022-09-01")),
    ("Which tournament did Nate win in the beginning of November 2022?", days("2022-11-01", "2022-11-11")),
    ("Was the first half of September 2022 a good month?", days("2022-09-01", "2022-09-16")),
    ("What happened in late May 2022?", days("2022-05-21", "2022-06-01")),
    ("What did we listen to back in the 1990s?", days("1990-01-01", "2000-01-01")),
    ("Where did Andrew go during the first weekend of August 2023?", days("2023-08-05", "2023-08-07")),
    # a month or day without a year: the latest one, this year's if it has begun
    ("What did I do on May 7th?", days("2023-05-07", "2023-05-08")),
    ("What happened on the 7th of May?", days("2023-05-07", "2023-05-08")),
    ("What did John's teammates give him on Aug 15th?", days("2022-08-15", "2022-08-16")),
    ("What did I buy in March?", days("2023-03-01", "2023-04-01")),
    ("What did I buy last March?", days("2023-03-01", "2023-04-01")),
    ("Which outdoor spot did Joanna visit in May?", days("2023-05-01", "2023-06-01")),
    ("When did Melanie go camping in June?", days("2022-06-01", "2022-07-01")),
    ("What happened in early May?", days("2023-05-01", "2023-05-11")),
    ("What happened mid-May?", days("2023-05-11", "2023-05-21")),
    ("Which country was Tim visiting in the second week of November?", days("2022-11-08", "2022-11-15")),
    # relative days
    ("What did I eat yesterday?", days("2023-05-07", "2023-05-08")),
    ("What am I doing today?", days("2023-05-08", "2023-05-09")),
    ("What's on tonight?", days("2023-05-08", "2023-05-09")),
    ("What's planned for tomorrow?", days("2023-05-09", "2023-05-10")),
    ("What did we watch last night?", days("2023-05-07", "2023-05-08")),
    ("What did she say the day before yesterday?", days("2023-05-06", "2023-05-07")),
    ("Who called last Friday?", days("2023-05-05", "2023-05-06")),
    ("Who called on Friday?", days("2023-05-05", "2023-05-06")),
    # calendar weeks run Monday to Sunday
    ("What did I do last week?", days("2023-05-01", "2023-05-08")),
    ("What is happening this week?", days("2023-05-08", "2023-05-15")),
    ("What is planned next week?", days("2023-05-15", "2023-05-22")),
    ("What happened the week before last?", days("2023-04-24", "2023-05-01")),
    ("What did we do last weekend?", days("2023-05-06", "2023-05-08")),
    ("Any plans this weekend?", days("2023-05-13", "2023-05-15")),
    ("Any plans next weekend?", days("2023-05-20", "2023-05-22")),
    ("What did you do over the weekend?", days("2023-05-06", "2023-05-08")),
    ("What did I spend last month?", days("2023-04-01", "2023-05-01")),
    ("What is due this month?", days("2023-05-01", "2023-06-01")),
    ("What starts next month?", days("2023-06-01", "2023-07-01")),
    ("What did I read earlier this month?", days("2023-05-01", "2023-05-09")),
    ("Where did we travel last year?", days("2022-01-01", "2023-01-01")),
    ("What are the goals this year?", days("2023-01-01", "2024-01-01")),
    ("Where will we go next year?", days("2024-01-01", "2025-01-01")),
    ("What did Joanna see last summer?", days("2022-06-01", "2022-09-01")),
    # counted back from today
    ("What happened 3 days ago?", days("2023-05-05", "2023-05-06")),
    ("What did she buy two weeks ago?", days("2023-04-24", "2023-05-01")),
    ("Where did Caroline move from 4 years ago?", days("2019-01-01", "2020-01-01")),
    ("What did I start a couple of months ago?", days("2023-03-01", "2023-04-01")),
    ("What did we see a few days ago?", days("2023-05-04", "2023-05-07")),
    ("What happened in the past 3 days?", days("2023-05-05", "2023-05-09")),
    ("What did I learn over the past two weeks?", days("2023-04-24", "2023-05-09")),
    # a relative phrase hung on a date is read from that date
    ("What did John do the week before August 3, 2023?", days("2023-07-24", "2023-07-31")),
    ("What did Maria do last weekend before April 10, 2023?", days("2023-04-08", "2023-04-10")),
    ("What puppy did she get two weeks before August 11, 2023?", days("2023-07-24", "2023-07-31")),
    ("What was shown on the Sunday before October 25, 2022?", days("2022-10-23", "2022-10-24")),
    ("Where did they camp two weekends before 17 July 2023?", days("2023-07-08", "2023-07-10")),
    ("When did she apply, the week of 23 August 2023?", days("2023-08-21", "2023-08-28")),
    # several expressions: the window that covers them, relative ones read from the dated one
    ("Where was John between August 11 and August 15 2023?", days("2023-08-11", "2023-08-16")),
    ("What did Joanna finish last Friday on 23 January, 2022?", days("2022-01-21", "2022-01-24")),
    ("What was Tim's issue last week, as mentioned on November 6, 2023?", days("2023-10-30", "2023-11-07")),
    ("What happened between May and June 2023?", days("2023-05-01", "2023-07-01")),
]


@pytest.mark.parametrize(("query", "expected"), QUERY_WINDOWS, ids=[q for q, _ in QUERY_WINDOWS])
def test_query_window(query: str, expected: tuple[date, date]) -> None:
    assert window(query) == expected


NO_TIME = [
    "When did Caroline go to the LGBTQ support group?",
    "What is Caroline's identity?",
    "May I ask you something?",
    "You may go now.",
    "I have 2 kids and 3 dogs.",
    "We walked in 2000 steps.",
    "She scored 2023 points in her career.",
    "It costs 3.5 dollars.",
    "Room 101 is on the left.",
    "What did Melanie paint recently?",
    "When did we last talk?",
    "What is the name of John's one-year-old child?",
    "Did you march in the parade?",
    "She goes to Sunday school.",
    "",
]


@pytest.mark.parametrize("query", NO_TIME)
def test_query_without_a_time_names_no_window(query: str) -> None:
    assert parse_query_time(query, ANCHOR) is None


TENSE = [
    ("I saw him on Friday.", days("2023-05-05", "2023-05-06")),
    ("I'll see him on Friday.", days("2023-05-12", "2023-05-13")),
    ("We went to Paris in June.", days("2022-06-01", "2022-07-01")),
    ("We're going to Paris in June.", days("2023-06-01", "2023-07-01")),
    ("Her birthday party was on June 3rd.", days("2022-06-03", "2022-06-04")),
    ("Her birthday party will be on June 3rd.", days("2023-06-03", "2023-06-04")),
]


@pytest.mark.parametrize(("text", "expected"), TENSE, ids=[t for t, _ in TENSE])
def test_a_name_without_a_year_follows_the_tense(text: str, expected: tuple[date, date]) -> None:
    assert window(text) == expected


EDGES = [
    ("the current month named plainly is this one", "in May", ANCHOR, days("2023-05-01", "2023-06-01")),
    ("'last' skips the current month", "last May", ANCHOR, days("2022-05-01", "2022-06-01")),
    ("a month not begun yet is last year's", "in March", datetime(2023, 2, 10, tzinfo=UTC),
     days("2022-03-01", "2022-04-01")),
    ("on a Sunday, last weekend is the one before", "last weekend", datetime(2023, 5, 14, tzinfo=UTC),
     days("2023-05-06", "2023-05-08")),
    ("on a Friday, last Friday is a week ago", "last Friday", datetime(2023, 5, 12, tzinfo=UTC),
     days("2023-05-05", "2023-05-06")),
    ("last summer, said in autumn, is this year's", "last summer", datetime(2023, 10, 1, tzinfo=UTC),
     days("2023-06-01", "2023-09-01")),
    ("winter 2023 holds January 2023", "winter 2023", ANCHOR, days("2022-12-01", "2023-03-01")),
    ("this winter, said in October, is the coming one", "this winter", datetime(2023, 10, 1, tzinfo=UTC),
     days("2023-12-01", "2024-03-01")),
    ("a month ago clamps the day", "a month ago", datetime(2023, 3, 31, tzinfo=UTC), days("2023-02-01", "2023-03-01")),
]


@pytest.mark.parametrize(("query", "anchor", "expected"), [c[1:] for c in EDGES], ids=[c[0] for c in EDGES])
def test_edges_of_the_calendar(query: str, anchor: datetime, expected: tuple[date, date]) -> None:
    assert window(query, anchor) == expected


def test_windows_are_whole_days_in_utc_with_an_exclusive_end() -> None:
    found = parse_query_time("What happened on 7 May 2023?", ANCHOR)
    assert found == TimeRange(datetime(2023, 5, 7, tzinfo=UTC), datetime(2023, 5, 8, tzinfo=UTC))
    assert found.contains(datetime(2023, 5, 7, 23, 59, tzinfo=UTC))
    assert not found.contains(datetime(2023, 5, 8, tzinfo=UTC))
    assert found.overlaps(TimeRange(datetime(2023, 5, 7, 12, tzinfo=UTC), datetime(2023, 5, 9, tzinfo=UTC)))
    assert not found.overlaps(TimeRange(datetime(2023, 5, 8, tzinfo=UTC), datetime(2023, 5, 9, tzinfo=UTC)))


def test_days_are_the_anchor_s_local_days() -> None:
    evening_in_new_york = datetime(2023, 5, 8, 23, 30, tzinfo=timezone(timedelta(hours=-5)))  # 04:30 UTC on the 9th
    found = parse_query_time("What did I do yesterday?", evening_in_new_york)
    assert found == TimeRange(datetime(2023, 5, 7, 5, tzinfo=UTC), datetime(2023, 5, 8, 5, tzinfo=UTC))


def test_a_naive_anchor_is_utc() -> None:
    assert parse_query_time("yesterday", ANCHOR.replace(tzinfo=None)) == parse_query_time("yesterday", ANCHOR)


def test_find_dates_resolves_each_mention_against_when_it_was_said() -> None:
    text = "I went to a LGBTQ support group yesterday. Next month I'm visiting Sweden, then Paris on 3 July 2023."
    mentions = find_dates(text, ANCHOR)
    assert [(m.text, m.range.start.date(), m.range.end.date()) for m in mentions] == [
        ("yesterday", date(2023, 5, 7), date(2023, 5, 8)),
        ("Next month", date(2023, 6, 1), date(2023, 7, 1)),
        ("3 July 2023", date(2023, 7, 3), date(2023, 7, 4)),
    ]
    assert all(text[m.start_char:m.end_char] == m.text for m in mentions)


def test_find_dates_keeps_the_longest_reading() -> None:
    assert [m.text for m in find_dates("See you in May 2023, maybe the week before 9 June 2023.", ANCHOR)] == [
        "May 2023", "the week before 9 June 2023",
    ]


def test_find_dates_in_text_without_dates() -> None:
    assert find_dates("The transgender stories were so inspiring!", ANCHOR) == []


TIMESTAMPS = [
    ("1:56 pm on 8 May, 2023", datetime(2023, 5, 8, 13, 56, tzinfo=UTC)),
    ("12:09 am on 13 September, 2023", datetime(2023, 9, 13, 0, 9, tzinfo=UTC)),
    ("8 May 2023", datetime(2023, 5, 8, tzinfo=UTC)),
    ("May 8, 2023 1:56 PM", datetime(2023, 5, 8, 13, 56, tzinfo=UTC)),
    ("Monday, May 8, 2023 at 13:56 UTC", datetime(2023, 5, 8, 13, 56, tzinfo=UTC)),
    ("8 May 2023 13:56 +0200", datetime(2023, 5, 8, 13, 56, tzinfo=timezone(timedelta(hours=2)))),
    ("2023-05-08", datetime(2023, 5, 8, tzinfo=UTC)),
    ("2023-05-08T13:56:00Z", datetime(2023, 5, 8, 13, 56, tzinfo=UTC)),
    ("2023-05-08T13:56:00+02:00", datetime(2023, 5, 8, 11, 56, tzinfo=UTC)),
    ("2023-05-08 13:56", datetime(2023, 5, 8, 13, 56, tzinfo=UTC)),
    ("2023/05/08 13:56", datetime(2023, 5, 8, 13, 56, tzinfo=UTC)),
    ("1683554160", datetime(2023, 5, 8, 13, 56, tzinfo=UTC)),
    ("1683554160000", datetime(2023, 5, 8, 13, 56, tzinfo=UTC)),
]


@pytest.mark.parametrize(("value", "expected"), TIMESTAMPS, ids=[v for v, _ in TIMESTAMPS])
def test_parse_timestamp(value: str, expected: datetime) -> None:
    parsed = parse_timestamp(value)
    assert parsed == expected
    assert parsed is not None and parsed.tzinfo is not None


@pytest.mark.parametrize("value", ["", "   ", "garbage", "13:56", "next Tuesday", "2023"])
def test_parse_timestamp_without_a_date(value: str) -> None:
    assert parse_timestamp(value) is None
