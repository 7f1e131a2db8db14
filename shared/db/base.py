"""The MetaData every table is defined on, with its naming convention, and the column every table's rows
carry when they were created. tables.py, view_tables.py and webhook_tables.py all build on it."""

from __future__ import annotations

from sqlalchemy import Column, DateTime, MetaData, func

metadata = MetaData(naming_convention={
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_N_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
})


def _now() -> Column:
    return Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now())
