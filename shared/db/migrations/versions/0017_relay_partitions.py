"""Relay partitions: each outbox row's slot, a stable hash of its aggregate, generated for existing rows too."""

import sqlalchemy as sa
from alembic import op

revision, down_revision = '0017', '0016'

SLOT_SQL = "(('x'::text || substr(md5(aggregate), 1, 3)))::bit(12)::integer"


def upgrade() -> None:
    # A stored generated column: PostgreSQL fills it for every row already there (published or not), so the
    # partitioned relay publishes what an older relay left behind.
    op.add_column('outbox', sa.Column('slot', sa.SmallInteger(), sa.Computed(SLOT_SQL, persisted=True),
                                      nullable=False))


def downgrade() -> None:
    op.drop_column('outbox', 'slot')
