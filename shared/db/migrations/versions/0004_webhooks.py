"""Webhooks (registrations, the events they receive, deliveries and their attempts) and subscriber tokens."""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision, down_revision = '0004', '0003'


def upgrade() -> None:
    op.create_table('webhook_events',
    sa.Column('event_id', sa.UUID(as_uuid=False), nullable=False),
    sa.Column('stream_seq', sa.BigInteger(), nullable=False),
    sa.Column('aggregate', sa.Text(), nullable=False),
    sa.Column('event_type', sa.Text(), nullable=False),
    sa.Column('revision', sa.BigInteger(), nullable=True),
    sa.Column('envelope', postgresql.JSONB(astext_type=sa.Text()), nullable=False),
    sa.Column('recorded_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.PrimaryKeyConstraint('event_id', name=op.f('pk_webhook_events'))
    )
    op.create_table('webhook_ingest',
    sa.Column('id', sa.Integer(), autoincrement=False, nullable=False),
    sa.Column('stream_seq', sa.BigInteger(), nullable=False),
    sa.CheckConstraint('id = 1', name=op.f('ck_webhook_ingest_one_row')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_webhook_ingest'))
    )
    op.execute("INSERT INTO webhook_ingest (id, stream_seq) VALUES (1, 0)")
    op.create_table('webhooks',
    sa.Column('webhook_id', sa.UUID(as_uuid=False), nullable=False),
    sa.Column('url', sa.Text(), nullable=False),
    sa.Column('case_id', sa.Text(), nullable=True),
    sa.Column('company_id', sa.Text(), nullable=True),
    sa.Column('types', postgresql.JSONB(astext_type=sa.Text()), server_default=sa.text("'[]'::jsonb"), nullable=False),
    sa.Column('secret', sa.Text(), nullable=False),
    sa.Column('status', sa.Text(), server_default='active', nullable=False),
    sa.Column('start_after_seq', sa.BigInteger(), nullable=False),
    sa.Column('created_by', sa.Text(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.Column('failing_since', sa.DateTime(timezone=True), nullable=True),
    sa.Column('deleted_at', sa.DateTime(timezone=True), nullable=True),
    sa.CheckConstraint("status IN ('active', 'failing', 'deleted')", name=op.f('ck_webhooks_status_known')),
    sa.CheckConstraint('case_id IS NULL OR company_id IS NULL', name=op.f('ck_webhooks_one_scope')),
    sa.PrimaryKeyConstraint('webhook_id', name=op.f('pk_webhooks'))
    )
    op.create_table('webhook_deliveries',
    sa.Column('webhook_id', sa.UUID(as_uuid=False), nullable=False),
    sa.Column('event_id', sa.UUID(as_uuid=False), nullable=False),
    sa.Column('stream_seq', sa.BigInteger(), nullable=False),
    sa.Column('aggregate', sa.Text(), nullable=False),
    sa.Column('status', sa.Text(), server_default='pending', nullable=False),
    sa.Column('attempts', sa.Integer(), server_default='0', nullable=False),
    sa.Column('next_attempt_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.Column('first_attempt_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('last_attempt_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('delivered_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('lease_token', sa.UUID(as_uuid=False), nullable=True),
    sa.Column('lease_until', sa.DateTime(timezone=True), nullable=True),
    sa.Column('response_code', sa.Integer(), nullable=True),
    sa.Column('latency_ms', sa.Integer(), nullable=True),
    sa.Column('last_error', sa.Text(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.CheckConstraint("status IN ('pending', 'delivered', 'failed')", name=op.f('ck_webhook_deliveries_status_known')),
    sa.ForeignKeyConstraint(['event_id'], ['webhook_events.event_id'], name=op.f('fk_webhook_deliveries_event_id_webhook_events')),
    sa.ForeignKeyConstraint(['webhook_id'], ['webhooks.webhook_id'], name=op.f('fk_webhook_deliveries_webhook_id_webhooks')),
    sa.PrimaryKeyConstraint('webhook_id', 'event_id', name=op.f('pk_webhook_deliveries'))
    )
    op.create_index('ix_webhook_deliveries_chain', 'webhook_deliveries', ['webhook_id', 'aggregate', 'stream_seq'], unique=False, postgresql_where=sa.text("status <> 'delivered'"))
    op.create_index('ix_webhook_deliveries_due', 'webhook_deliveries', ['next_attempt_at'], unique=False, postgresql_where=sa.text("status = 'pending'"))
    op.create_table('webhook_attempts',
    sa.Column('id', sa.BigInteger(), sa.Identity(always=False), nullable=False),
    sa.Column('webhook_id', sa.UUID(as_uuid=False), nullable=False),
    sa.Column('event_id', sa.UUID(as_uuid=False), nullable=False),
    sa.Column('attempt', sa.Integer(), nullable=False),
    sa.Column('at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.Column('response_code', sa.Integer(), nullable=True),
    sa.Column('latency_ms', sa.Integer(), nullable=False),
    sa.Column('error', sa.Text(), nullable=True),
    sa.Column('response_excerpt', sa.Text(), nullable=True),
    sa.ForeignKeyConstraint(['webhook_id', 'event_id'], ['webhook_deliveries.webhook_id', 'webhook_deliveries.event_id'], name=op.f('fk_webhook_attempts_webhook_id_event_id_webhook_deliveries')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_webhook_attempts'))
    )
    op.create_index('ix_webhook_attempts_delivery', 'webhook_attempts', ['webhook_id', 'event_id'], unique=False)
    op.drop_constraint(op.f('ck_api_tokens_role_known'), 'api_tokens', type_='check')
    op.create_check_constraint(op.f('ck_api_tokens_role_known'), 'api_tokens',
                               "role IN ('agent', 'reviewer', 'admin', 'subscriber')")


def downgrade() -> None:
    op.execute("DELETE FROM api_tokens WHERE role = 'subscriber'")
    op.drop_constraint(op.f('ck_api_tokens_role_known'), 'api_tokens', type_='check')
    op.create_check_constraint(op.f('ck_api_tokens_role_known'), 'api_tokens', "role IN ('agent', 'reviewer', 'admin')")
    op.drop_index('ix_webhook_attempts_delivery', table_name='webhook_attempts')
    op.drop_table('webhook_attempts')
    op.drop_index('ix_webhook_deliveries_due', table_name='webhook_deliveries', postgresql_where=sa.text("status = 'pending'"))
    op.drop_index('ix_webhook_deliveries_chain', table_name='webhook_deliveries', postgresql_where=sa.text("status <> 'delivered'"))
    op.drop_table('webhook_deliveries')
    op.drop_table('webhooks')
    op.drop_table('webhook_events')
    op.drop_table('webhook_ingest')
