"""Notifications: channels (where messages go), rules (which events), the outbox (messages
owed, delivered by the reaper)."""
