"""Evidence health: the claims and verdicts a retirement left unsupported or weakened."""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision, down_revision = '0006', '0005'


def upgrade() -> None:
    op.create_table('evidence_health',
    sa.Column('case_id', sa.Text(), nullable=False),
    sa.Column('claim_id', sa.Text(), nullable=False),
    sa.Column('health', sa.Text(), nullable=False),
    sa.Column('lost', postgresql.JSONB(astext_type=sa.Text()), nullable=False),
    sa.Column('revision', sa.BigInteger(), nullable=False),
    sa.CheckConstraint("health IN ('unsupported', 'weakened')", name=op.f('ck_evidence_health_health_known')),
    sa.ForeignKeyConstraint(['case_id', 'claim_id'], ['claims.case_id', 'claims.claim_id'],
                            name=op.f('fk_evidence_health_case_id_claim_id_claims')),
    sa.PrimaryKeyConstraint('case_id', 'claim_id', name=op.f('pk_evidence_health'))
    )


def downgrade() -> None:
    op.drop_table('evidence_health')
