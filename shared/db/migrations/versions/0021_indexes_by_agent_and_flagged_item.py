"""Two reads that scanned a whole table get an index: a pending item's later restatements and the queue's
duplicates filter look up `possible_duplicates` by the item a flag names (`of_proposal_id`, `of_id`), and an
agent's track record counts its thesis deltas by `delta_operations.caller`."""

from alembic import op

revision, down_revision = '0021', '0020'


def upgrade() -> None:
    op.create_index('ix_possible_duplicates_of_item', 'possible_duplicates', ['of_proposal_id', 'of_id'])
    op.create_index('ix_delta_operations_caller', 'delta_operations', ['caller'])


def downgrade() -> None:
    op.drop_index('ix_delta_operations_caller', table_name='delta_operations')
    op.drop_index('ix_possible_duplicates_of_item', table_name='possible_duplicates')
