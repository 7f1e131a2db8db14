"""The gateway: the only network edge (MCP, reviewers' HTTP API, web UI, operator endpoints)."""
