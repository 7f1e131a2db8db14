"""The relay is woken over NATS: the outbox no longer sends a NOTIFY with each insert (PostgreSQL serialises
every committing transaction that sent one on one global lock, its WAL flush included)."""

from alembic import op

revision, down_revision = '0007', '0006'


def upgrade() -> None:
    op.execute("DROP TRIGGER IF EXISTS outbox_notify ON outbox")
    op.execute("DROP FUNCTION IF EXISTS threadline_outbox_notify()")


def downgrade() -> None:
    op.execute("CREATE FUNCTION threadline_outbox_notify() RETURNS trigger LANGUAGE plpgsql AS "
               "$$ BEGIN PERFORM pg_notify('threadline_outbox', ''); RETURN NULL; END $$")
    op.execute("CREATE TRIGGER outbox_notify AFTER INSERT ON outbox FOR EACH STATEMENT "
               "EXECUTE FUNCTION threadline_outbox_notify()")
