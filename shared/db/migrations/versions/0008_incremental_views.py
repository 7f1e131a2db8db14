"""Case views kept row by row (counters, claims, sources, groups, unresolved items) instead of one blob."""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision, down_revision = '0008', '0007'

KEY = sa.Text(collation='C')
FOCUS_ORDER = ['lane_rank', 'lane_key', 'order_key', 'revision', 'claim_id']


def upgrade() -> None:
    # Every existing view is rebuilt from the ledger when it is next needed (revision -1: never built).
    op.execute("UPDATE case_views SET revision = -1")
    for column in ('guidance_marker', 'unresolved', 'summary', 'guidance'):
        op.drop_column('case_views', column)
    op.add_column('case_views', sa.Column('verdict_id', KEY, nullable=True))
    op.create_table('view_counts',
    sa.Column('case_id', sa.Text(), nullable=False),
    sa.Column('name', KEY, nullable=False),
    sa.Column('value', sa.BigInteger(), nullable=False),
    sa.PrimaryKeyConstraint('case_id', 'name', name=op.f('pk_view_counts'))
    )
    op.create_table('view_sources',
    sa.Column('case_id', sa.Text(), nullable=False),
    sa.Column('source_id', KEY, nullable=False),
    sa.Column('type', sa.Text(), nullable=False),
    sa.Column('revision', sa.BigInteger(), nullable=False),
    sa.Column('strong', sa.Boolean(), nullable=False),
    sa.Column('cited_by', sa.Integer(), nullable=False),
    sa.Column('origin', sa.Text(), nullable=False),
    sa.PrimaryKeyConstraint('case_id', 'source_id', name=op.f('pk_view_sources'))
    )
    op.create_index('ix_view_sources_ledger_order', 'view_sources', ['case_id', 'revision', 'source_id'])
    op.create_index('ix_view_sources_strong_first', 'view_sources',
                    ['case_id', sa.text('strong DESC'), 'revision', 'source_id'])
    op.create_table('view_claims',
    sa.Column('case_id', sa.Text(), nullable=False),
    sa.Column('claim_id', KEY, nullable=False),
    sa.Column('kind', sa.Text(), nullable=False),
    sa.Column('confidence', sa.Text(), nullable=False),
    sa.Column('lane', sa.Text(), nullable=True),
    sa.Column('display_order', sa.Integer(), nullable=True),
    sa.Column('revision', sa.BigInteger(), nullable=False),
    sa.Column('source_ids', postgresql.ARRAY(sa.Text()), nullable=False),
    sa.Column('lane_rank', sa.SmallInteger(), nullable=False),
    sa.Column('lane_key', KEY, nullable=False),
    sa.Column('order_key', sa.Integer(), nullable=False),
    sa.Column('strong', sa.Boolean(), nullable=False),
    sa.Column('open', sa.Boolean(), nullable=False),
    sa.Column('contradicted_by', postgresql.ARRAY(sa.Text()), nullable=False),
    sa.Column('unit', KEY, nullable=False),
    sa.Column('health', sa.Text(), nullable=False),
    sa.Column('lost', postgresql.JSONB(astext_type=sa.Text()), nullable=False),
    sa.PrimaryKeyConstraint('case_id', 'claim_id', name=op.f('pk_view_claims'))
    )
    op.create_index('ix_view_claims_focus_all', 'view_claims', ['case_id', *FOCUS_ORDER])
    op.create_index('ix_view_claims_focus_unresolved', 'view_claims', ['case_id', sa.text('open DESC'), *FOCUS_ORDER])
    op.create_index('ix_view_claims_focus_primary', 'view_claims', ['case_id', sa.text('strong DESC'), *FOCUS_ORDER])
    op.create_index('ix_view_claims_unit', 'view_claims', ['case_id', 'unit'])
    op.create_index('ix_view_claims_unsupported', 'view_claims', ['case_id', 'revision', 'claim_id'],
                    postgresql_where=sa.text("health = 'unsupported'"))
    op.create_table('view_origins',
    sa.Column('case_id', sa.Text(), nullable=False),
    sa.Column('origin', sa.Text(), nullable=False),
    sa.Column('sources', sa.Integer(), nullable=False),
    sa.PrimaryKeyConstraint('case_id', 'origin', name=op.f('pk_view_origins'))
    )
    op.create_table('view_group_members',
    sa.Column('case_id', sa.Text(), nullable=False),
    sa.Column('group_id', KEY, nullable=False),
    sa.Column('claim_id', KEY, nullable=False),
    sa.PrimaryKeyConstraint('case_id', 'group_id', 'claim_id', name=op.f('pk_view_group_members'))
    )
    op.create_index('ix_view_group_members_claim', 'view_group_members', ['case_id', 'claim_id'])
    op.create_table('view_unresolved',
    sa.Column('case_id', sa.Text(), nullable=False),
    sa.Column('band', sa.SmallInteger(), nullable=False),
    sa.Column('claim_revision', sa.BigInteger(), nullable=False),
    sa.Column('claim_id', KEY, nullable=False),
    sa.Column('position', sa.SmallInteger(), nullable=False),
    sa.Column('type', sa.Text(), nullable=False),
    sa.Column('detail', sa.Text(), nullable=False),
    sa.Column('action', sa.Text(), nullable=False),
    sa.PrimaryKeyConstraint('case_id', 'band', 'claim_revision', 'claim_id', 'position',
                            name=op.f('pk_view_unresolved'))
    )
    op.create_index('ix_view_unresolved_claim', 'view_unresolved', ['case_id', 'claim_id'])


def downgrade() -> None:
    for table in ('view_unresolved', 'view_group_members', 'view_origins', 'view_claims', 'view_sources',
                  'view_counts'):
        op.drop_table(table)
    op.drop_column('case_views', 'verdict_id')
    op.execute("DELETE FROM case_views")  # the blobs are recomputed at the next read
    op.add_column('case_views', sa.Column('guidance_marker', sa.Text(), nullable=False))
    for column in ('unresolved', 'summary', 'guidance'):
        op.add_column('case_views', sa.Column(column, postgresql.JSONB(astext_type=sa.Text()), nullable=False))
