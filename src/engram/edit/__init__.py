"""Editing what a bank holds: a document's tags and scopes, reprocessing a document, one memory."""
