"""Pydantic models of the wire contract (Hindsight 1.1.0 field names and defaults), shared by the API,
the capabilities and the in-process library: memory (banks, retain, recall, operations) and reflect
(reflect, mental models, directives)."""

from engram.types.memory import *  # noqa: F403
from engram.types.memory import TagGroup, TagGroupAnd, TagGroupLeaf, TagGroupNot, TagGroupOr  # noqa: F401
from engram.types.reflect import *  # noqa: F403
