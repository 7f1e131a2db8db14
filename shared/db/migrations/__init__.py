"""Alembic migrations for the Threadline schema."""
