"""How `engram import` cuts its work: a conversation into groups of turns (progress per turn), the
first replacing the document and the rest appending to it."""

from __future__ import annotations

from engram.cli_import import TURN_GROUP_CHARS, _parts, _transcript


def test_a_conversation_is_sent_as_groups_of_whole_turns() -> None:
    messages = [{"role": "user" if n % 2 else "assistant", "content": f"message {n} " + "x" * 150} for n in range(70)]
    item = _transcript(messages, "chat.json")
    whole = item["content"]
    parts = list(_parts([item]))
    assert len(parts) > 2
    assert sum(units for _, units, _ in parts) == 70, "progress counts every turn once"
    assert all(is_turns for _, _, is_turns in parts)
    assert "\n".join(part["content"] for part, _, _ in parts) == whole, "nothing lost, nothing doubled"
    assert [part["update_mode"] for part, _, _ in parts] == ["replace"] + ["append"] * (len(parts) - 1)
    assert all(len(part["content"]) <= TURN_GROUP_CHARS for part, _, _ in parts)
    assert all(part["document_id"] == "chat.json" and "turns" not in part for part, _, _ in parts)


def test_plain_items_go_one_by_one() -> None:
    items = [{"content": f"note {n}"} for n in range(3)]
    assert list(_parts(items)) == [({"content": f"note {n}"}, 1, False) for n in range(3)]
