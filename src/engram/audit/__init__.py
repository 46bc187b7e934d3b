"""The audit log: which requests to record (`policy`), what of them to keep (`redaction`), and the
middleware that records them (`middleware`)."""
