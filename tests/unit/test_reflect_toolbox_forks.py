"""A reflect answer's tool calls run at once, each on a fork of the toolbox: what each shows reaches
the toolbox in the order the calls were asked, whichever ended first."""

from __future__ import annotations

from engram.reflect.tools import Toolbox


def test_what_forks_show_is_taken_in_the_order_asked() -> None:
    toolbox = Toolbox(services=None, bank_id="b", request=None, config={})  # type: ignore[arg-type]
    toolbox.seen.memories["m0"] = {"text": "shown before"}
    first, second = toolbox.fork(), toolbox.fork()
    second.seen.memories["m2"] = {"text": "the second call's, which ended first"}
    first.seen.memories["m1"] = {"text": "the first call's"}
    first.seen.mental_models["mm"] = {"content": "a model"}
    assert toolbox.seen.memories == {"m0": {"text": "shown before"}}, "kept apart until taken"
    toolbox.take(first)
    toolbox.take(second)
    assert list(toolbox.seen.memories) == ["m0", "m1", "m2"]
    assert list(toolbox.seen.mental_models) == ["mm"]
