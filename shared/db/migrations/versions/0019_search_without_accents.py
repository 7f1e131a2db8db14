"""Full-text search without accents: a record's text is indexed as the projection writes it without its accents.

Before, `tsv` was computed from the body as written, so a query typed without accents ("Zurich", "Nestle") did
not find a record written with them (Zürich, Nestlé). The projection now also writes `plain`, the body as
`shared/search_text.plain` spells it, and `tsv` is computed from that; a query is searched in the same form.
Existing rows get their `plain` here (computed in Python: the same rules as the projection's, which the
PostgreSQL unaccent extension does not follow), `tsv` is recomputed, and the case's words are counted again
from it, as a rebuild of the index would count them. Text without accents is indexed exactly as before.
"""

import re
import unicodedata

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision, down_revision = '0019', '0018'

_BATCH = 2000
_ACCENTED = "SELECT case_id, kind, record_id, proposal_id, body FROM search_records WHERE body ~ '[^\\x01-\\x7f]'"
_SET_PLAIN = """
UPDATE search_records r SET plain = u.plain
FROM unnest(CAST(:case_ids AS text[]), CAST(:kinds AS text[]), CAST(:ids AS text[]), CAST(:proposals AS text[]),
            CAST(:plains AS text[])) AS u(case_id, kind, record_id, proposal_id, plain)
WHERE r.case_id = u.case_id AND r.kind = u.kind AND r.record_id = u.record_id AND r.proposal_id = u.proposal_id
"""
_COUNT_WORDS = """
INSERT INTO search_words (case_id, word, n)
SELECT case_id, word, count(*) FROM search_records, unnest(tsvector_to_array(tsv)) AS word
GROUP BY case_id, word ORDER BY case_id, word
"""


_PLAIN_LETTERS = str.maketrans({"Ø": "O", "ø": "o", "Ł": "L", "ł": "l", "Đ": "D", "đ": "d", "Ð": "D", "ð": "d",
                                "Ħ": "H", "ħ": "h", "ı": "i", "ß": "ss", "ẞ": "SS", "Æ": "AE", "æ": "ae",
                                "Œ": "OE", "œ": "oe", "Þ": "TH", "þ": "th"})


def _plain(text: str) -> str:
    """shared/search_text.plain as of this revision (a migration does not change with the code)."""
    bare = re.sub("[\u0300-\u036f]", "", unicodedata.normalize("NFKD", text))
    return unicodedata.normalize("NFC", bare).translate(_PLAIN_LETTERS)


def _fill_plain() -> None:
    """Every row's body without accents: the body itself when it is plain ASCII, else computed in batches."""
    op.execute("UPDATE search_records SET plain = body")
    connection = op.get_bind()
    rows = connection.execute(sa.text(_ACCENTED)).all()
    for start in range(0, len(rows), _BATCH):
        chunk = rows[start:start + _BATCH]
        connection.execute(sa.text(_SET_PLAIN), {
            "case_ids": [r.case_id for r in chunk], "kinds": [r.kind for r in chunk],
            "ids": [r.record_id for r in chunk], "proposals": [r.proposal_id for r in chunk],
            "plains": [_plain(r.body) for r in chunk]})


def _index_text_of(column: str) -> None:
    """`tsv` computed from the given column, its GIN index, and the case's words counted again from it."""
    op.drop_index('ix_search_records_tsv', table_name='search_records')
    op.drop_column('search_records', 'tsv')
    op.add_column('search_records', sa.Column(
        'tsv', postgresql.TSVECTOR(),
        sa.Computed(f"to_tsvector('english'::regconfig, {column})", persisted=True), nullable=False))
    op.create_index('ix_search_records_tsv', 'search_records', ['tsv'], postgresql_using='gin',
                    postgresql_with={'fastupdate': 'off'})
    op.execute("DELETE FROM search_words")
    op.execute(_COUNT_WORDS)


def upgrade() -> None:
    op.add_column('search_records', sa.Column('plain', sa.Text(), nullable=True))
    _fill_plain()
    op.alter_column('search_records', 'plain', nullable=False)
    _index_text_of('plain')


def downgrade() -> None:
    _index_text_of('body')
    op.drop_column('search_records', 'plain')
