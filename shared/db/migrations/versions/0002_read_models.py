"""Read models of the projection service: per-case views and the inbox of applied events."""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision, down_revision = '0002', '0001'


def upgrade() -> None:
    op.create_table('projection_inbox',
    sa.Column('event_id', sa.UUID(as_uuid=False), nullable=False),
    sa.Column('event_type', sa.Text(), nullable=False),
    sa.Column('stream_seq', sa.BigInteger(), nullable=False),
    sa.Column('applied_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.PrimaryKeyConstraint('event_id', name=op.f('pk_projection_inbox'))
    )
    op.create_table('case_views',
    sa.Column('case_id', sa.Text(), nullable=False),
    sa.Column('revision', sa.BigInteger(), nullable=False),
    sa.Column('guidance_marker', sa.Text(), nullable=False),
    sa.Column('unresolved', postgresql.JSONB(astext_type=sa.Text()), nullable=False),
    sa.Column('summary', postgresql.JSONB(astext_type=sa.Text()), nullable=False),
    sa.Column('guidance', postgresql.JSONB(astext_type=sa.Text()), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.ForeignKeyConstraint(['case_id'], ['cases.case_id'], name=op.f('fk_case_views_case_id_cases')),
    sa.PrimaryKeyConstraint('case_id', name=op.f('pk_case_views'))
    )


def downgrade() -> None:
    op.drop_table('case_views')
    op.drop_table('projection_inbox')
