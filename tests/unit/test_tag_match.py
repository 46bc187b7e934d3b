"""Tag filters in Python (knowledge-base pages) follow recall's semantics."""

from engram.tag_match import group_matches, parse_tag_groups, tags_match


def test_any_and_all_let_untagged_through_the_strict_forms_do_not() -> None:
    assert tags_match([], ["a"], "any") and tags_match(None, ["a"], "all")
    assert not tags_match([], ["a"], "any_strict") and not tags_match([], ["a"], "all_strict")
    assert tags_match(["a", "b"], ["a", "c"], "any_strict") and not tags_match(["a", "b"], ["a", "c"], "all_strict")
    assert tags_match(["a", "b"], ["b", "a"], "exact") and not tags_match(["a"], ["a", "b"], "exact")
    assert tags_match([], [], "exact") and not tags_match(["a"], [], "exact")


def test_groups_combine_with_and_or_not() -> None:
    (group,) = parse_tag_groups('[{"and": [{"tags": ["a"]}, {"not": {"tags": ["b"]}}]}]')
    assert group_matches(["a"], group) and not group_matches(["a", "b"], group) and not group_matches([], group)
