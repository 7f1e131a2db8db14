"""The outbox relay: the one process that moves committed events from every service's outbox to JetStream."""
