"""Review UI sessions: the cookie holds a random session id; the session is stored, revocable and expiring."""

import sqlalchemy as sa
from alembic import op

revision, down_revision = '0005', '0004'


def upgrade() -> None:
    op.create_table('ui_sessions',
    sa.Column('session_hash', sa.LargeBinary(), nullable=False),
    sa.Column('token_id', sa.UUID(as_uuid=False), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.Column('expires_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('revoked_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['token_id'], ['api_tokens.token_id'], name=op.f('fk_ui_sessions_token_id_api_tokens')),
    sa.PrimaryKeyConstraint('session_hash', name=op.f('pk_ui_sessions'))
    )


def downgrade() -> None:
    op.drop_table('ui_sessions')
