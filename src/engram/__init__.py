"""Engram: long-term memory for AI agents, speaking Hindsight 1.1.0's HTTP API."""

__version__ = "0.1.0"
