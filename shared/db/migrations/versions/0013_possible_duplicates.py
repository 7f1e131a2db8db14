"""Possible duplicates: what a staged claim or source resembles, flagged at staging; pg_trgm for similarity."""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision, down_revision = '0013', '0012'


def upgrade() -> None:
    op.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
    op.create_table('possible_duplicates',
    sa.Column('proposal_id', postgresql.UUID(as_uuid=False), nullable=False),
    sa.Column('item_id', sa.Text(), nullable=False),
    sa.Column('rank', sa.Integer(), nullable=False),
    sa.Column('of_kind', sa.Text(), nullable=False),
    sa.Column('of_id', sa.Text(), nullable=False),
    sa.Column('of_status', sa.Text(), nullable=False),
    sa.Column('of_proposal_id', postgresql.UUID(as_uuid=False), nullable=True),
    sa.Column('similarity', sa.Float(), nullable=False),
    sa.CheckConstraint("of_kind IN ('claim', 'source')", name=op.f('ck_possible_duplicates_of_kind_known')),
    sa.CheckConstraint("of_status IN ('canonical', 'pending')", name=op.f('ck_possible_duplicates_of_status_known')),
    sa.ForeignKeyConstraint(['proposal_id', 'item_id'], ['proposal_items.proposal_id', 'proposal_items.item_id'],
                            name=op.f('fk_possible_duplicates_proposal_id_item_id_proposal_items')),
    sa.PrimaryKeyConstraint('proposal_id', 'item_id', 'of_kind', 'of_id', name=op.f('pk_possible_duplicates'))
    )


def downgrade() -> None:
    op.drop_table('possible_duplicates')
