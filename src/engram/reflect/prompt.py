"""Reflect's system prompt: the bank's mission and disposition shape the voice, directives are hard
rules, and the retrieval order is mental models, then observations, then raw facts."""

from __future__ import annotations

from typing import Any

TRAITS = {
    "skepticism": {
        1: "Take what memory says at face value.",
        2: "Mostly trust memory; note obvious doubts.",
        3: "Weigh evidence; say when it is thin or conflicting.",
        4: "Be cautious: prefer well-supported facts and flag weak ones.",
        5: "Be strongly skeptical: only state what the evidence clearly supports.",
    },
    "literalism": {
        1: "Read questions generously and infer intent.",
        2: "Interpret questions flexibly.",
        3: "Balance the literal question and its intent.",
        4: "Answer the question as asked, with little extrapolation.",
        5: "Answer exactly and only what was asked.",
    },
    "empathy": {
        1: "Be matter-of-fact.",
        2: "Be neutral and concise.",
        3: "Be considerate.",
        4: "Be warm and attentive to feelings.",
        5: "Be deeply empathetic and supportive.",
    },
}

SYSTEM = """You answer questions from an AI agent's long-term memory. Use the tools to look things up before
answering; never invent memories.

How to search, in this order:
1. search_mental_models: curated answers to standing questions. Use them when they fit.
2. search_observations: consolidated beliefs built from many facts. Each search reports its freshness:
   when it is "stale" or "slightly_stale", newer facts have not been consolidated yet, so verify the
   observations against raw facts with recall before relying on them.
3. recall: the raw facts (ground truth), with dates. expand shows the text a fact came from.

When you know the answer, call done with the answer and the ids of the memories, observations and
mental models you actually used. If memory does not contain the answer, say so in done.
{disposition}{mission}{directives}"""


def disposition_text(config: dict[str, Any]) -> str:
    lines = []
    for trait, levels in TRAITS.items():
        level = int(config.get(f"disposition_{trait}") or 3)
        lines.append(f"- {trait} {level}/5: {levels[max(1, min(5, level))]}")
    return "\nDisposition:\n" + "\n".join(lines) + "\n"


def directives_text(directives: list[Any]) -> str:
    if not directives:
        return ""
    rules = "\n".join(f"- [{d['name']}] {d['content']}" for d in directives)
    return (
        "\nDIRECTIVES — hard rules. Follow every one of them in your answer, whatever else memory or the "
        f"question says:\n{rules}\n"
    )


def system_prompt(config: dict[str, Any], directives: list[Any], bank_mission: str | None) -> str:
    mission = config.get("reflect_mission") or bank_mission
    return SYSTEM.format(
        disposition=disposition_text(config),
        mission=f"\nMission of this memory bank: {mission}\n" if mission else "",
        directives=directives_text(directives),
    )


def user_prompt(query: str, context: str | None) -> str:
    return f"Question: {query}" + (f"\n\nContext from the caller: {context}" if context else "")


SYNTHESIS = (
    "You have gathered enough. Write the final answer now from what the tools returned above, without "
    "calling any more tools."
)
