"""Closed proposals: each proposal whose every item is decided, so that pending is read without its items."""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision, down_revision = '0009', '0008'

# Every proposal already fully decided, with the status its outcomes give and its last decision's time.
BACKFILL = """
INSERT INTO closed_proposals (proposal_id, case_id, status, closed_at)
SELECT p.proposal_id, p.case_id,
       CASE WHEN bool_and(d.outcome = 'accepted') THEN 'accepted'
            WHEN bool_and(d.outcome = 'rejected') THEN 'rejected'
            ELSE 'partially_accepted' END,
       max(dn.decided_at)
FROM proposals p
JOIN proposal_items i ON i.proposal_id = p.proposal_id
LEFT JOIN item_decisions d ON d.proposal_id = i.proposal_id AND d.item_id = i.item_id
LEFT JOIN decisions dn ON dn.decision_id = d.decision_id
GROUP BY p.proposal_id, p.case_id
HAVING count(d.item_id) = count(*)
"""


def upgrade() -> None:
    op.create_table('closed_proposals',
    sa.Column('proposal_id', postgresql.UUID(as_uuid=False), nullable=False),
    sa.Column('case_id', sa.Text(), nullable=False),
    sa.Column('status', sa.Text(), nullable=False),
    sa.Column('closed_at', sa.DateTime(timezone=True), nullable=False),
    sa.CheckConstraint("status IN ('accepted', 'rejected', 'partially_accepted')",
                       name=op.f('ck_closed_proposals_status_known')),
    sa.ForeignKeyConstraint(['case_id'], ['cases.case_id'], name=op.f('fk_closed_proposals_case_id_cases')),
    sa.ForeignKeyConstraint(['proposal_id'], ['proposals.proposal_id'],
                            name=op.f('fk_closed_proposals_proposal_id_proposals')),
    sa.PrimaryKeyConstraint('proposal_id', name=op.f('pk_closed_proposals'))
    )
    op.create_index('ix_closed_proposals_case_closed', 'closed_proposals', ['case_id', 'closed_at'])
    op.execute(BACKFILL)


def downgrade() -> None:
    op.drop_index('ix_closed_proposals_case_closed', table_name='closed_proposals')
    op.drop_table('closed_proposals')
