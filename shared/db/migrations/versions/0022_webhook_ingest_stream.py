"""The webhooks service's position remembers which event stream it counts in (the stream's creation time), so
that a new stream (a restore into a new data dir) is recognised instead of its first events skipped."""

import sqlalchemy as sa
from alembic import op

revision, down_revision = '0022', '0021'


def upgrade() -> None:
    op.add_column('webhook_ingest', sa.Column('stream_created', sa.Text(), nullable=True))


def downgrade() -> None:
    op.drop_column('webhook_ingest', 'stream_created')
