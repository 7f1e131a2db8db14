"""The projection service: agents' read views (workspace, sources, company context) and focus."""
