"""Initial schema: cases and their ledger, proposals and decisions, identities, theses, the outbox."""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision, down_revision = '0001', None


def _ledger_record_columns() -> list[sa.Column]:
    """What every canonical record of a case carries: where it came from, and how it left the ledger."""
    return [
        sa.Column('proposal_id', sa.UUID(as_uuid=False), nullable=True),
        sa.Column('staged_by', sa.Text(), nullable=True),
        sa.Column('staged_at', sa.DateTime(timezone=True), nullable=True),
        sa.Column('decision_id', sa.UUID(as_uuid=False), nullable=True),
        sa.Column('decided_by', sa.Text(), nullable=False),
        sa.Column('decided_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('revision', sa.BigInteger(), nullable=False),
        sa.Column('status', sa.Text(), server_default='active', nullable=False),
        sa.Column('ended_by', sa.Text(), nullable=True),
        sa.Column('ended_at', sa.DateTime(timezone=True), nullable=True),
        sa.Column('ended_revision', sa.BigInteger(), nullable=True),
        sa.Column('superseded_by', sa.Text(), nullable=True),
    ]


def upgrade() -> None:
    op.create_table('api_tokens',
    sa.Column('token_id', sa.UUID(as_uuid=False), nullable=False),
    sa.Column('name', sa.Text(), nullable=False),
    sa.Column('role', sa.Text(), nullable=False),
    sa.Column('token_hash', sa.LargeBinary(), nullable=False),
    sa.Column('created_by', sa.Text(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.Column('revoked_at', sa.DateTime(timezone=True), nullable=True),
    sa.CheckConstraint("role IN ('agent', 'reviewer', 'admin')", name=op.f('ck_api_tokens_role_known')),
    sa.PrimaryKeyConstraint('token_id', name=op.f('pk_api_tokens')),
    sa.UniqueConstraint('token_hash', name=op.f('uq_api_tokens_token_hash'))
    )
    op.create_table('cases',
    sa.Column('case_id', sa.Text(), nullable=False),
    sa.Column('title', sa.Text(), nullable=False),
    sa.Column('question', sa.Text(), nullable=False),
    sa.Column('revision', sa.BigInteger(), server_default='0', nullable=False),
    sa.Column('created_by', sa.Text(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.CheckConstraint('revision >= 0', name=op.f('ck_cases_revision_non_negative')),
    sa.PrimaryKeyConstraint('case_id', name=op.f('pk_cases'))
    )
    op.create_table('companies',
    sa.Column('company_id', sa.UUID(as_uuid=False), nullable=False),
    sa.Column('ticker', sa.Text(), nullable=False),
    sa.Column('name', sa.Text(), nullable=False),
    sa.Column('thesis_revision', sa.BigInteger(), server_default='0', nullable=False),
    sa.Column('created_by', sa.Text(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.PrimaryKeyConstraint('company_id', name=op.f('pk_companies')),
    sa.UniqueConstraint('ticker', name=op.f('uq_companies_ticker'))
    )
    op.create_table('outbox',
    sa.Column('id', sa.BigInteger(), sa.Identity(always=False), nullable=False),
    sa.Column('event_id', sa.UUID(as_uuid=False), nullable=False),
    sa.Column('aggregate', sa.Text(), nullable=False),
    sa.Column('subject', sa.Text(), nullable=False),
    sa.Column('event_type', sa.Text(), nullable=False),
    sa.Column('envelope', postgresql.JSONB(astext_type=sa.Text()), nullable=False),
    sa.Column('headers', postgresql.JSONB(astext_type=sa.Text()), server_default=sa.text("'{}'::jsonb"), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.Column('published_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('stream_seq', sa.BigInteger(), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_outbox')),
    sa.UniqueConstraint('event_id', name=op.f('uq_outbox_event_id'))
    )
    op.create_index('ix_outbox_pending', 'outbox', ['id'], unique=False, postgresql_where=sa.text('published_at IS NULL'))
    op.create_table('agent_discoveries',
    sa.Column('agent_name', sa.Text(), nullable=False),
    sa.Column('case_id', sa.Text(), nullable=False),
    sa.Column('revision', sa.BigInteger(), nullable=False),
    sa.Column('discovered_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.ForeignKeyConstraint(['case_id'], ['cases.case_id'], name=op.f('fk_agent_discoveries_case_id_cases')),
    sa.PrimaryKeyConstraint('agent_name', name=op.f('pk_agent_discoveries'))
    )
    op.create_table('agents',
    sa.Column('name', sa.Text(), nullable=False),
    sa.Column('assigned_case_id', sa.Text(), nullable=True),
    sa.Column('updated_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.ForeignKeyConstraint(['assigned_case_id'], ['cases.case_id'], name=op.f('fk_agents_assigned_case_id_cases')),
    sa.PrimaryKeyConstraint('name', name=op.f('pk_agents'))
    )
    op.create_table('case_focus',
    sa.Column('case_id', sa.Text(), nullable=False),
    sa.Column('focus', sa.Text(), nullable=False),
    sa.Column('updated_by', sa.Text(), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.ForeignKeyConstraint(['case_id'], ['cases.case_id'], name=op.f('fk_case_focus_case_id_cases')),
    sa.PrimaryKeyConstraint('case_id', name=op.f('pk_case_focus'))
    )
    op.create_table('change_log',
    sa.Column('case_id', sa.Text(), nullable=False),
    sa.Column('revision', sa.BigInteger(), nullable=False),
    sa.Column('decision_id', sa.UUID(as_uuid=False), nullable=True),
    sa.Column('actor', sa.Text(), nullable=False),
    sa.Column('summary', sa.Text(), nullable=False),
    sa.Column('changes', postgresql.JSONB(astext_type=sa.Text()), nullable=False),
    sa.Column('correlation_id', sa.Text(), nullable=True),
    sa.Column('at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.ForeignKeyConstraint(['case_id'], ['cases.case_id'], name=op.f('fk_change_log_case_id_cases')),
    sa.PrimaryKeyConstraint('case_id', 'revision', name=op.f('pk_change_log'))
    )
    op.create_table('claims',
    sa.Column('case_id', sa.Text(), nullable=False),
    sa.Column('claim_id', sa.Text(), nullable=False),
    sa.Column('text', sa.Text(), nullable=False),
    sa.Column('kind', sa.Text(), nullable=False),
    sa.Column('confidence', sa.Text(), nullable=False),
    sa.Column('transformation_note', sa.Text(), nullable=False),
    sa.Column('proposal_rationale', sa.Text(), nullable=True),
    sa.Column('lane', sa.Text(), nullable=True),
    sa.Column('display_order', sa.Integer(), nullable=True),
    *_ledger_record_columns(),
    sa.ForeignKeyConstraint(['case_id'], ['cases.case_id'], name=op.f('fk_claims_case_id_cases')),
    sa.PrimaryKeyConstraint('case_id', 'claim_id', name=op.f('pk_claims'))
    )
    op.create_index('ix_claims_case_status', 'claims', ['case_id', 'status'], unique=False)
    op.create_index('uq_claims_active_verdict', 'claims', ['case_id'], unique=True, postgresql_where=sa.text("kind = 'verdict' AND status = 'active'"))
    op.create_table('delta_operations',
    sa.Column('operation_id', sa.UUID(as_uuid=False), nullable=False),
    sa.Column('company_id', sa.UUID(as_uuid=False), nullable=False),
    sa.Column('caller', sa.Text(), nullable=False),
    sa.Column('idempotency_key', sa.Text(), nullable=False),
    sa.Column('payload_digest', sa.Text(), nullable=False),
    sa.Column('payload', postgresql.JSONB(astext_type=sa.Text()), nullable=False),
    sa.Column('delta', postgresql.JSONB(astext_type=sa.Text()), nullable=False),
    sa.Column('base_revision', sa.BigInteger(), nullable=False),
    sa.Column('status', sa.Text(), server_default='previewed', nullable=False),
    sa.Column('expires_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('correlation_id', sa.Text(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.Column('committed_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('decided_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('decided_by', sa.Text(), nullable=True),
    sa.Column('note', sa.Text(), nullable=True),
    sa.Column('revision_after', sa.BigInteger(), nullable=True),
    sa.CheckConstraint("status IN ('previewed', 'committed', 'accepted', 'rejected')", name=op.f('ck_delta_operations_status_known')),
    sa.ForeignKeyConstraint(['company_id'], ['companies.company_id'], name=op.f('fk_delta_operations_company_id_companies')),
    sa.PrimaryKeyConstraint('operation_id', name=op.f('pk_delta_operations')),
    sa.UniqueConstraint('company_id', 'caller', 'idempotency_key', name=op.f('uq_delta_operations_company_id_caller_idempotency_key'))
    )
    op.create_index('ix_delta_operations_company_status', 'delta_operations', ['company_id', 'status'], unique=False)
    op.create_table('guidance_notes',
    sa.Column('note_id', sa.UUID(as_uuid=False), nullable=False),
    sa.Column('case_id', sa.Text(), nullable=False),
    sa.Column('author', sa.Text(), nullable=False),
    sa.Column('text', sa.Text(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.ForeignKeyConstraint(['case_id'], ['cases.case_id'], name=op.f('fk_guidance_notes_case_id_cases')),
    sa.PrimaryKeyConstraint('note_id', name=op.f('pk_guidance_notes'))
    )
    op.create_index('ix_guidance_notes_case', 'guidance_notes', ['case_id', 'created_at'], unique=False)
    op.create_table('merge_groups',
    sa.Column('case_id', sa.Text(), nullable=False),
    sa.Column('group_id', sa.Text(), nullable=False),
    sa.Column('label', sa.Text(), nullable=False),
    sa.Column('confidence', sa.Text(), nullable=False),
    sa.Column('rationale', sa.Text(), nullable=False),
    *_ledger_record_columns(),
    sa.ForeignKeyConstraint(['case_id'], ['cases.case_id'], name=op.f('fk_merge_groups_case_id_cases')),
    sa.PrimaryKeyConstraint('case_id', 'group_id', name=op.f('pk_merge_groups'))
    )
    op.create_table('proposals',
    sa.Column('proposal_id', sa.UUID(as_uuid=False), nullable=False),
    sa.Column('case_id', sa.Text(), nullable=False),
    sa.Column('kind', sa.Text(), nullable=False),
    sa.Column('pinned_revision', sa.BigInteger(), nullable=False),
    sa.Column('agent_name', sa.Text(), nullable=False),
    sa.Column('token_id', sa.UUID(as_uuid=False), nullable=True),
    sa.Column('correlation_id', sa.Text(), nullable=True),
    sa.Column('item_count', sa.Integer(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.ForeignKeyConstraint(['case_id'], ['cases.case_id'], name=op.f('fk_proposals_case_id_cases')),
    sa.PrimaryKeyConstraint('proposal_id', name=op.f('pk_proposals'))
    )
    op.create_index('ix_proposals_case_created', 'proposals', ['case_id', 'created_at'], unique=False)
    op.create_table('source_files',
    sa.Column('source_file_id', sa.UUID(as_uuid=False), nullable=False),
    sa.Column('company_id', sa.UUID(as_uuid=False), nullable=False),
    sa.Column('title', sa.Text(), nullable=False),
    sa.Column('url', sa.Text(), nullable=False),
    sa.Column('text', sa.Text(), nullable=False),
    sa.Column('created_by', sa.Text(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.ForeignKeyConstraint(['company_id'], ['companies.company_id'], name=op.f('fk_source_files_company_id_companies')),
    sa.PrimaryKeyConstraint('source_file_id', name=op.f('pk_source_files'))
    )
    op.create_index('ix_source_files_company', 'source_files', ['company_id'], unique=False)
    op.create_table('sources',
    sa.Column('case_id', sa.Text(), nullable=False),
    sa.Column('source_id', sa.Text(), nullable=False),
    sa.Column('publisher', sa.Text(), nullable=False),
    sa.Column('title', sa.Text(), nullable=False),
    sa.Column('url', sa.Text(), nullable=False),
    sa.Column('publication_date', sa.Text(), nullable=False),
    sa.Column('snapshot_date', sa.Text(), nullable=False),
    sa.Column('type', sa.Text(), nullable=False),
    sa.Column('authority', sa.Text(), nullable=False),
    sa.Column('evidence_text', sa.Text(), nullable=False),
    sa.Column('provenance_note', sa.Text(), nullable=False),
    sa.Column('transcriptions', postgresql.JSONB(astext_type=sa.Text()), server_default=sa.text("'[]'::jsonb"), nullable=False),
    *_ledger_record_columns(),
    sa.ForeignKeyConstraint(['case_id'], ['cases.case_id'], name=op.f('fk_sources_case_id_cases')),
    sa.PrimaryKeyConstraint('case_id', 'source_id', name=op.f('pk_sources'))
    )
    op.create_table('thesis_claims',
    sa.Column('claim_id', sa.UUID(as_uuid=False), nullable=False),
    sa.Column('company_id', sa.UUID(as_uuid=False), nullable=False),
    sa.Column('text', sa.Text(), nullable=False),
    sa.Column('label', sa.Text(), nullable=False),
    sa.Column('section', sa.Text(), nullable=False),
    sa.Column('source_url', sa.Text(), nullable=True),
    sa.Column('status', sa.Text(), server_default='active', nullable=False),
    sa.Column('revision', sa.BigInteger(), nullable=False),
    sa.Column('origin_operation_id', sa.UUID(as_uuid=False), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.Column('retired_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('retired_by', sa.Text(), nullable=True),
    sa.CheckConstraint("label IN ('CONFIRMED', 'INFERRED', 'UNVERIFIED')", name=op.f('ck_thesis_claims_label_known')),
    sa.ForeignKeyConstraint(['company_id'], ['companies.company_id'], name=op.f('fk_thesis_claims_company_id_companies')),
    sa.PrimaryKeyConstraint('claim_id', name=op.f('pk_thesis_claims'))
    )
    op.create_index('ix_thesis_claims_company', 'thesis_claims', ['company_id', 'status'], unique=False)
    op.create_table('claim_sources',
    sa.Column('case_id', sa.Text(), nullable=False),
    sa.Column('claim_id', sa.Text(), nullable=False),
    sa.Column('source_id', sa.Text(), nullable=False),
    sa.Column('position', sa.Integer(), nullable=False),
    sa.ForeignKeyConstraint(['case_id', 'claim_id'], ['claims.case_id', 'claims.claim_id'], name=op.f('fk_claim_sources_case_id_claim_id_claims')),
    sa.ForeignKeyConstraint(['case_id', 'source_id'], ['sources.case_id', 'sources.source_id'], name=op.f('fk_claim_sources_case_id_source_id_sources')),
    sa.PrimaryKeyConstraint('case_id', 'claim_id', 'source_id', name=op.f('pk_claim_sources'))
    )
    op.create_index('ix_claim_sources_source', 'claim_sources', ['case_id', 'source_id'], unique=False)
    op.create_table('decisions',
    sa.Column('decision_id', sa.UUID(as_uuid=False), nullable=False),
    sa.Column('proposal_id', sa.UUID(as_uuid=False), nullable=False),
    sa.Column('case_id', sa.Text(), nullable=False),
    sa.Column('reviewer', sa.Text(), nullable=False),
    sa.Column('note', sa.Text(), nullable=True),
    sa.Column('expected_revision', sa.BigInteger(), nullable=True),
    sa.Column('revision_after', sa.BigInteger(), nullable=True),
    sa.Column('refused', postgresql.JSONB(astext_type=sa.Text()), server_default=sa.text("'[]'::jsonb"), nullable=False),
    sa.Column('correlation_id', sa.Text(), nullable=True),
    sa.Column('decided_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.ForeignKeyConstraint(['case_id'], ['cases.case_id'], name=op.f('fk_decisions_case_id_cases')),
    sa.ForeignKeyConstraint(['proposal_id'], ['proposals.proposal_id'], name=op.f('fk_decisions_proposal_id_proposals')),
    sa.PrimaryKeyConstraint('decision_id', name=op.f('pk_decisions'))
    )
    op.create_index('ix_decisions_case', 'decisions', ['case_id', 'decided_at'], unique=False)
    op.create_table('merge_group_members',
    sa.Column('case_id', sa.Text(), nullable=False),
    sa.Column('group_id', sa.Text(), nullable=False),
    sa.Column('claim_id', sa.Text(), nullable=False),
    sa.ForeignKeyConstraint(['case_id', 'claim_id'], ['claims.case_id', 'claims.claim_id'], name=op.f('fk_merge_group_members_case_id_claim_id_claims')),
    sa.ForeignKeyConstraint(['case_id', 'group_id'], ['merge_groups.case_id', 'merge_groups.group_id'], name=op.f('fk_merge_group_members_case_id_group_id_merge_groups')),
    sa.PrimaryKeyConstraint('case_id', 'group_id', 'claim_id', name=op.f('pk_merge_group_members'))
    )
    op.create_index('ix_merge_group_members_claim', 'merge_group_members', ['case_id', 'claim_id'], unique=False)
    op.create_table('proposal_items',
    sa.Column('proposal_id', sa.UUID(as_uuid=False), nullable=False),
    sa.Column('item_id', sa.Text(), nullable=False),
    sa.Column('position', sa.Integer(), nullable=False),
    sa.Column('payload', postgresql.JSONB(astext_type=sa.Text()), nullable=False),
    sa.ForeignKeyConstraint(['proposal_id'], ['proposals.proposal_id'], name=op.f('fk_proposal_items_proposal_id_proposals')),
    sa.PrimaryKeyConstraint('proposal_id', 'item_id', name=op.f('pk_proposal_items'))
    )
    op.create_table('relations',
    sa.Column('case_id', sa.Text(), nullable=False),
    sa.Column('relation_id', sa.Text(), nullable=False),
    sa.Column('source_claim_id', sa.Text(), nullable=False),
    sa.Column('target_claim_id', sa.Text(), nullable=False),
    sa.Column('type', sa.Text(), nullable=False),
    sa.Column('rationale', sa.Text(), nullable=False),
    sa.Column('verdict_basis', sa.Boolean(), server_default=sa.text('false'), nullable=False),
    *_ledger_record_columns(),
    sa.CheckConstraint('source_claim_id <> target_claim_id', name=op.f('ck_relations_no_self_relation')),
    sa.ForeignKeyConstraint(['case_id', 'source_claim_id'], ['claims.case_id', 'claims.claim_id'], name=op.f('fk_relations_case_id_source_claim_id_claims')),
    sa.ForeignKeyConstraint(['case_id', 'target_claim_id'], ['claims.case_id', 'claims.claim_id'], name=op.f('fk_relations_case_id_target_claim_id_claims')),
    sa.PrimaryKeyConstraint('case_id', 'relation_id', name=op.f('pk_relations'))
    )
    op.create_index('ix_relations_source', 'relations', ['case_id', 'source_claim_id'], unique=False)
    op.create_index('ix_relations_target', 'relations', ['case_id', 'target_claim_id'], unique=False)
    op.create_table('thesis_claim_history',
    sa.Column('id', sa.BigInteger(), sa.Identity(always=False), nullable=False),
    sa.Column('claim_id', sa.UUID(as_uuid=False), nullable=False),
    sa.Column('company_id', sa.UUID(as_uuid=False), nullable=False),
    sa.Column('revision', sa.BigInteger(), nullable=False),
    sa.Column('action', sa.Text(), nullable=False),
    sa.Column('before', postgresql.JSONB(astext_type=sa.Text()), nullable=True),
    sa.Column('after', postgresql.JSONB(astext_type=sa.Text()), nullable=True),
    sa.Column('actor', sa.Text(), nullable=False),
    sa.Column('operation_id', sa.UUID(as_uuid=False), nullable=True),
    sa.Column('at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.ForeignKeyConstraint(['claim_id'], ['thesis_claims.claim_id'], name=op.f('fk_thesis_claim_history_claim_id_thesis_claims')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_thesis_claim_history'))
    )
    op.create_index('ix_thesis_claim_history_company', 'thesis_claim_history', ['company_id', 'revision'], unique=False)
    op.create_table('item_decisions',
    sa.Column('proposal_id', sa.UUID(as_uuid=False), nullable=False),
    sa.Column('item_id', sa.Text(), nullable=False),
    sa.Column('decision_id', sa.UUID(as_uuid=False), nullable=False),
    sa.Column('outcome', sa.Text(), nullable=False),
    sa.CheckConstraint("outcome IN ('accepted', 'rejected')", name=op.f('ck_item_decisions_outcome_known')),
    sa.ForeignKeyConstraint(['decision_id'], ['decisions.decision_id'], name=op.f('fk_item_decisions_decision_id_decisions')),
    sa.ForeignKeyConstraint(['proposal_id', 'item_id'], ['proposal_items.proposal_id', 'proposal_items.item_id'], name=op.f('fk_item_decisions_proposal_id_item_id_proposal_items')),
    sa.PrimaryKeyConstraint('proposal_id', 'item_id', name=op.f('pk_item_decisions'))
    )

    # The relay LISTENs on this channel, so a committed event is published without waiting for a poll.
    op.execute(
        """
        CREATE FUNCTION threadline_outbox_notify() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            PERFORM pg_notify('threadline_outbox', '');
            RETURN NULL;
        END $$
        """
    )
    op.execute(
        "CREATE TRIGGER outbox_notify AFTER INSERT ON outbox "
        "FOR EACH STATEMENT EXECUTE FUNCTION threadline_outbox_notify()"
    )


def downgrade() -> None:
    op.execute("DROP TRIGGER IF EXISTS outbox_notify ON outbox")
    op.execute("DROP FUNCTION IF EXISTS threadline_outbox_notify()")
    op.drop_table('item_decisions')
    op.drop_index('ix_thesis_claim_history_company', table_name='thesis_claim_history')
    op.drop_table('thesis_claim_history')
    op.drop_index('ix_relations_target', table_name='relations')
    op.drop_index('ix_relations_source', table_name='relations')
    op.drop_table('relations')
    op.drop_table('proposal_items')
    op.drop_index('ix_merge_group_members_claim', table_name='merge_group_members')
    op.drop_table('merge_group_members')
    op.drop_index('ix_decisions_case', table_name='decisions')
    op.drop_table('decisions')
    op.drop_index('ix_claim_sources_source', table_name='claim_sources')
    op.drop_table('claim_sources')
    op.drop_index('ix_thesis_claims_company', table_name='thesis_claims')
    op.drop_table('thesis_claims')
    op.drop_table('sources')
    op.drop_index('ix_source_files_company', table_name='source_files')
    op.drop_table('source_files')
    op.drop_index('ix_proposals_case_created', table_name='proposals')
    op.drop_table('proposals')
    op.drop_table('merge_groups')
    op.drop_index('ix_guidance_notes_case', table_name='guidance_notes')
    op.drop_table('guidance_notes')
    op.drop_index('ix_delta_operations_company_status', table_name='delta_operations')
    op.drop_table('delta_operations')
    op.drop_index('uq_claims_active_verdict', table_name='claims', postgresql_where=sa.text("kind = 'verdict' AND status = 'active'"))
    op.drop_index('ix_claims_case_status', table_name='claims')
    op.drop_table('claims')
    op.drop_table('change_log')
    op.drop_table('case_focus')
    op.drop_table('agents')
    op.drop_table('agent_discoveries')
    op.drop_index('ix_outbox_pending', table_name='outbox', postgresql_where=sa.text('published_at IS NULL'))
    op.drop_table('outbox')
    op.drop_table('companies')
    op.drop_table('cases')
    op.drop_table('api_tokens')
