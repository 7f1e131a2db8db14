"""PostgreSQL: table definitions, migrations and session handling."""
