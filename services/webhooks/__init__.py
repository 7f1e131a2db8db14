"""The webhooks service: change events delivered to registered HTTP receivers, signed, ordered, retried."""
