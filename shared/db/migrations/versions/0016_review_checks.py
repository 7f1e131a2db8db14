"""Review checks flagged at staging (counted in track records) and predictions' resolutions."""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision, down_revision = '0016', '0014'


def upgrade() -> None:
    op.create_table('review_check_flags',
    sa.Column('proposal_id', postgresql.UUID(as_uuid=False), nullable=False),
    sa.Column('item_id', sa.Text(), nullable=False),
    sa.Column('check', sa.Text(), nullable=False),
    sa.Column('case_id', sa.Text(), nullable=False),
    sa.Column('agent_name', sa.Text(), nullable=False),
    sa.Column('severity', sa.Text(), nullable=False),
    sa.Column('message', sa.Text(), nullable=False),
    sa.CheckConstraint("severity IN ('warning', 'info')", name=op.f('ck_review_check_flags_severity_known')),
    sa.PrimaryKeyConstraint('proposal_id', 'item_id', 'check', name=op.f('pk_review_check_flags'))
    )
    op.create_index('ix_review_check_flags_agent', 'review_check_flags', ['agent_name'], unique=False)
    op.create_table('prediction_resolutions',
    sa.Column('resolution_id', postgresql.UUID(as_uuid=False), nullable=False),
    sa.Column('case_id', sa.Text(), nullable=False),
    sa.Column('claim_id', sa.Text(), nullable=False),
    sa.Column('outcome', sa.Text(), nullable=False),
    sa.Column('source_id', sa.Text(), nullable=False),
    sa.Column('resolved_on', sa.Text(), nullable=False),
    sa.Column('note', sa.Text(), nullable=True),
    sa.Column('resolved_by', sa.Text(), nullable=False),
    sa.Column('revision', sa.BigInteger(), nullable=False),
    sa.Column('supersedes', postgresql.UUID(as_uuid=False), nullable=True),
    sa.Column('at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.CheckConstraint("outcome IN ('true', 'false', 'void')", name=op.f('ck_prediction_resolutions_outcome_known')),
    sa.ForeignKeyConstraint(['case_id', 'claim_id'], ['claims.case_id', 'claims.claim_id'],
                            name=op.f('fk_prediction_resolutions_case_id_claim_id_claims')),
    sa.ForeignKeyConstraint(['case_id', 'source_id'], ['sources.case_id', 'sources.source_id'],
                            name=op.f('fk_prediction_resolutions_case_id_source_id_sources')),
    sa.PrimaryKeyConstraint('resolution_id', name=op.f('pk_prediction_resolutions'))
    )
    op.create_index('ix_prediction_resolutions_claim', 'prediction_resolutions', ['case_id', 'claim_id', 'revision'],
                    unique=False)


def downgrade() -> None:
    op.drop_index('ix_prediction_resolutions_claim', table_name='prediction_resolutions')
    op.drop_table('prediction_resolutions')
    op.drop_index('ix_review_check_flags_agent', table_name='review_check_flags')
    op.drop_table('review_check_flags')
