"""Consolidation: turning facts into evidence-backed observations that evolve."""
