"""What consolidation makes of the configured strategies (bank config or
`HINDSIGHT_API_CONSOLIDATION_STRATEGIES`): they are read leniently at use, so a malformed entry is
dropped silently and an unknown `tags_match` acts as "all". The preview reports both, so a user who
configured strategies by environment can see what each entry really claims."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from engram.consolidate.strategies import Strategy, parse_strategies

WHERE = "consolidation_strategies"


@dataclass
class ConfiguredStrategies:
    strategies: list[Strategy] = field(default_factory=list)  # what consolidation uses, in order
    dropped: list[dict[str, Any]] = field(default_factory=list)  # {index, problem}: ignored entirely
    relaxed: list[dict[str, Any]] = field(default_factory=list)  # {index, problem}: kept, read leniently


def read_configured(raw: Any) -> ConfiguredStrategies:
    """The strategies exactly as `settings_for_scope` reads them, with why each other entry is not."""
    report = ConfiguredStrategies()
    if raw is None:
        return report
    if not isinstance(raw, list):
        report.dropped.append({"index": None, "problem": f"{WHERE}: must be a list of strategies"})
        return report
    for index, entry in enumerate(raw):
        where = f"{WHERE}[{index}]"
        lenient = parse_strategies([entry], strict=False, where=WHERE)
        try:
            parse_strategies([entry], strict=True, where=WHERE)
            problem = None
        except ValueError as exc:
            problem = str(exc).replace(f"{WHERE}[0]", where, 1)
        if not lenient:
            report.dropped.append({"index": index, "problem": problem})
            continue
        report.strategies.extend(lenient)
        if problem:
            report.relaxed.append({"index": index, "problem": problem})
    return report
