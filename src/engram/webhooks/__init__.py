"""Webhooks: events recorded as durable deliveries (`events`), checked targets (`targets`), HMAC
signatures (`signing`) and the worker's sender with retries (`sender`)."""
