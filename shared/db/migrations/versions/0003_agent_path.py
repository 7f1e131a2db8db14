"""The agent path: harmless repeats (request digests), rebased pins, and staging's one-call write."""

import sqlalchemy as sa
from alembic import op

revision, down_revision = '0003', '0002'

# Staging's write: under the case's shared lock, and only if the case is still at the revision the call
# was checked against, store the proposal, its items and its outbox event in one statement (one round
# trip). 'moved' tells the caller to check again against the newer ledger; 'replayed' names the proposal
# an identical earlier call of the same agent stored.
STAGE_FUNCTION = """
CREATE FUNCTION threadline_stage(
    p_case_id text, p_checked_revision bigint, p_proposal_id uuid, p_kind text, p_pinned_revision bigint,
    p_agent_name text, p_token_id uuid, p_correlation_id text, p_request_digest text, p_items jsonb,
    p_event_id uuid, p_event_subject text, p_event_type text, p_envelope jsonb, p_headers jsonb,
    OUT outcome text, OUT proposal_id uuid
) LANGUAGE plpgsql AS $$
DECLARE
    current bigint;
BEGIN
    PERFORM pg_advisory_xact_lock_shared(7271, hashtext(p_case_id));
    SELECT revision INTO current FROM cases WHERE case_id = p_case_id;
    IF current IS DISTINCT FROM p_checked_revision THEN
        outcome := 'moved';
        RETURN;
    END IF;
    INSERT INTO proposals (proposal_id, case_id, kind, pinned_revision, staged_revision, agent_name, token_id,
                           correlation_id, item_count, request_digest)
    VALUES (p_proposal_id, p_case_id, p_kind, p_pinned_revision, current, p_agent_name, p_token_id,
            p_correlation_id, jsonb_array_length(p_items), p_request_digest)
    ON CONFLICT (agent_name, request_digest) WHERE request_digest IS NOT NULL DO NOTHING;
    IF NOT FOUND THEN
        outcome := 'replayed';
        SELECT p.proposal_id INTO proposal_id FROM proposals p
        WHERE p.agent_name = p_agent_name AND p.request_digest = p_request_digest;
        RETURN;
    END IF;
    INSERT INTO proposal_items (proposal_id, item_id, position, payload)
    SELECT p_proposal_id, item->>0, (ordinality - 1)::int, item->1
    FROM jsonb_array_elements(p_items) WITH ORDINALITY AS t(item, ordinality);
    INSERT INTO outbox (event_id, aggregate, subject, event_type, envelope, headers)
    VALUES (p_event_id, 'case:' || p_case_id, p_event_subject, p_event_type, p_envelope, p_headers);
    outcome := 'stored';
    proposal_id := p_proposal_id;
END $$
"""


def upgrade() -> None:
    op.add_column('proposals', sa.Column('request_digest', sa.Text(), nullable=True))
    op.add_column('proposals', sa.Column('staged_revision', sa.BigInteger(), nullable=True))
    op.create_index('uq_proposals_agent_request', 'proposals', ['agent_name', 'request_digest'], unique=True,
                    postgresql_where=sa.text('request_digest IS NOT NULL'))
    op.add_column('decisions', sa.Column('request_digest', sa.Text(), nullable=True))
    op.create_index('uq_decisions_request', 'decisions', ['proposal_id', 'reviewer', 'request_digest'],
                    unique=True, postgresql_where=sa.text('request_digest IS NOT NULL'))
    op.execute(STAGE_FUNCTION)


def downgrade() -> None:
    op.execute("DROP FUNCTION IF EXISTS threadline_stage")
    op.drop_index('uq_decisions_request', table_name='decisions')
    op.drop_column('decisions', 'request_digest')
    op.drop_index('uq_proposals_agent_request', table_name='proposals')
    op.drop_column('proposals', 'staged_revision')
    op.drop_column('proposals', 'request_digest')
