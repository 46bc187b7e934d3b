"""The keyword arm's plan: which words it may leave unread, and when its result proves exact."""

from __future__ import annotations

import itertools

from engram.recall.keyword_plan import BM25_K1, MAX_COMBINED_WORDS, idf, plan, tf_factor, word_bound
from engram.store.keyword_frequencies import ScopeWords, WordCount


def scope(**facts_with_word: int) -> ScopeWords:
    words = {word: WordCount(n, 1, 6) for word, n in facts_with_word.items()}
    return ScopeWords(facts=10_000, total_length=80_000, words=words)


def test_a_word_in_over_half_the_facts_weighs_nothing_and_rarer_words_weigh_more() -> None:
    assert idf(5_001, 10_000) == 0.0
    assert idf(1, 1) > 0, "a word in the only fact still counts"
    assert idf(10, 10_000) > idf(1_000, 10_000) > idf(4_000, 10_000) > 0


def test_the_commonest_words_go_unread_while_the_rest_hold_a_full_list() -> None:
    planned = plan(scope(work=1_500, costa=400, ines=350, everyone=6_000), limit=300)
    assert "everyone" not in planned.weights
    assert planned.commonest_first == ["work", "costa", "ines"]
    assert planned.read == ["ines"] and planned.skipped == 2
    # Fewer facts than the list holds: every word is read.
    assert plan(scope(work=1_500, ines=250), limit=300).read == ["ines", "work"]
    assert plan(scope(ines=350), limit=300).skipped == 0, "the rarest word is always read"


def test_the_bounds_add_up_each_skipped_words_most() -> None:
    planned = plan(scope(work=1_500, costa=400, ines=350), limit=300)
    work, costa = (word_bound(planned.weights[word], WordCount(0, 1, 6), planned.average_length)
                   for word in ("work", "costa"))
    assert planned.bounds[:3] == [0.0, work, work + costa]


def test_a_word_bound_is_never_below_what_the_word_adds_to_a_fact() -> None:
    count = WordCount(facts=10, max_occurrences=3, min_length=5)
    bound = word_bound(2.0, count, average_length=9.0)
    for tf, length in itertools.product([0.5, 1, 1.5, 2, 2.5, 3], range(5, 40)):
        assert 2.0 * tf_factor(tf, length, 9.0) <= bound + 1e-12
    assert word_bound(2.0, WordCount(10, None, None), 9.0) == 2.0 * (BM25_K1 + 1)


def test_a_result_is_exact_only_when_its_full_list_ends_above_the_skipped_words() -> None:
    planned = plan(scope(work=1_500, costa=400, ines=350), limit=3)
    bound = planned.bounds[planned.skipped]
    assert planned.is_exact([9.0, 8.0, bound + 0.01], limit=3)
    assert not planned.is_exact([9.0, 8.0, bound], limit=3), "a fact holding only skipped words may tie"
    assert not planned.is_exact([9.0, 8.0], limit=3), "a list not full has room for them"
    nothing_skipped = plan(scope(ines=350), limit=3)
    assert nothing_skipped.is_exact([], limit=3)


def test_the_second_reading_skips_only_the_words_that_cannot_reach_the_first_lists_end() -> None:
    planned = plan(scope(work=1_500, costa=400, ines=350), limit=3)
    between = (planned.bounds[1] + planned.bounds[2]) / 2
    assert planned.skipping_below([9.0, 8.0, between], limit=3).read == ["costa", "ines"]
    assert planned.skipping_below([9.0, 8.0, planned.bounds[1] / 2], limit=3).skipped == 0
    assert planned.skipping_below([9.0, 8.0], limit=3).skipped == 0, "a list not full proves nothing"


def test_the_second_reading_takes_only_the_combinations_of_skipped_words_that_reach_the_lists_end() -> None:
    planned = plan(scope(work=1_500, costa=400, born=380, ines=350), limit=3)
    assert planned.read == ["ines"] and planned.commonest_first[:3] == ["work", "costa", "born"]
    work, costa, born = (planned.bounds[i + 1] - planned.bounds[i] for i in range(3))
    assert work < costa < born

    def reads(last: float) -> list[tuple[str, ...]]:
        return planned.combinations_to_read([9.0, 8.0, last], limit=3)

    # Above every word alone and the lightest pair: the two pairs with born (not all three: a superset).
    assert reads((work + costa + work + born) / 2) == [("born", "costa"), ("born", "work")]
    # Above every word alone: every pair.
    assert reads((born + work + costa) / 2) == [("born", "costa"), ("born", "work"), ("costa", "work")]
    # Between costa and born: born alone, and costa with work.
    assert reads((costa + born) / 2) == [("born",), ("costa", "work")]
    # Above everything the words could add: nothing; below every word, or a list not full: each alone.
    assert reads(work + costa + born + 0.01) == []
    every = [("born",), ("costa",), ("work",)]
    assert reads(work / 2) == every
    assert planned.combinations_to_read([9.0, 8.0], limit=3) == every


def test_many_skipped_words_are_read_one_by_one() -> None:
    many = {f"w{n}": 1_000 + 100 * n for n in range(MAX_COMBINED_WORDS + 1)}
    planned = plan(scope(**many, rare=400), limit=3)
    assert planned.skipped == MAX_COMBINED_WORDS + 1
    assert planned.combinations_to_read([9.0, 8.0, 0.0], limit=3) == [(w,) for w in sorted(many)]


def test_one_pass_reads_every_posting_unless_the_skipped_words_postings_dwarf_the_first_readings_lookups() -> None:
    # ines is read: 350 facts, each looked up for three words (1,050 lookups); the three words' postings
    # are 2,250, within three times that, so one pass reads them all.
    assert plan(scope(work=1_500, costa=400, ines=350), limit=300).reads_every_posting(fact_types=3)
    # With work in 4,000 of the 10,000 facts the postings (4,750) outnumber the lookups over three to one.
    assert not plan(scope(work=4_000, costa=400, ines=350), limit=300).reads_every_posting(fact_types=3)
    # Every word read (nothing skipped): one pass, whatever the counts.
    assert plan(scope(work=4_000, ines=250), limit=300).reads_every_posting(fact_types=3)


def test_one_pass_is_not_taken_for_more_scans_than_it_saves() -> None:
    many = {f"w{n}": 20 for n in range(22)}  # every word read: one pass would be the cheaper, but for its scans
    assert plan(scope(**many), limit=300).reads_every_posting(fact_types=2)  # 44 scans
    assert not plan(scope(**many), limit=300).reads_every_posting(fact_types=3)  # 66 scans
    assert not plan(scope(), limit=300).reads_every_posting(fact_types=3), "no word: nothing to read"
