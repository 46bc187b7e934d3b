"""Reflect: answering from memory with an agent loop, mental models and directives."""
