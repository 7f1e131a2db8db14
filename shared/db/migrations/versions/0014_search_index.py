"""The search index: every record of a case as search reads it (full text, trigram), and the stems of its texts."""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision, down_revision = '0014', '0013'

# The canonical and pending claims of a case whose normalised text resembles each given one (trigram
# similarity at least `floor`, the `limit` most similar each), as staging flags possible duplicates. The
# threshold is set for the statement so that the trigram index itself leaves out whatever is less similar;
# both functions read by index, never by scanning (a trigram compared with every row costs what the case
# holds, and the planner would choose that for a small case).
SIMILAR_CLAIMS = """
CREATE FUNCTION threadline_similar_claims(p_case text, p_keys text[], p_floor real, p_limit int)
RETURNS TABLE (i bigint, record_id text, status text, proposal_id text, similarity real)
LANGUAGE plpgsql VOLATILE SET enable_seqscan = off AS $$
BEGIN
  PERFORM set_config('pg_trgm.similarity_threshold', p_floor::text, true);
  RETURN QUERY
    SELECT k.i, r.record_id::text, r.status, r.proposal_id::text, r.sim
    FROM unnest(p_keys) WITH ORDINALITY AS k(key, i)
    CROSS JOIN LATERAL (
      SELECT s.record_id, s.status, s.proposal_id, similarity(s.dup_key, k.key) AS sim
      FROM search_records s
      WHERE s.kind = 'claim' AND s.dup_key % k.key AND s.case_id = p_case
        AND s.status IN ('canonical', 'pending') AND k.key <> ''
      ORDER BY similarity(s.dup_key, k.key) DESC, s.record_id LIMIT p_limit) AS r;
END $$
"""

# Each stem of a query (parsed and stemmed as the index parses text: stop words dropped), numbered, and the
# case's indexed stems that stand for it: the stem itself when the case holds it; else, for a word (not a
# number) of three letters or more, the `p_each` stems spelled most like it (trigram similarity at least
# `p_floor`), looked up by the trigram index; `exact` says which, and a word with neither is one row of no word.
SIMILAR_WORDS = """
CREATE FUNCTION threadline_similar_words(p_case text, p_query text, p_floor real, p_words int, p_each int)
RETURNS TABLE (i int, word text, exact boolean)
LANGUAGE plpgsql VOLATILE SET enable_seqscan = off AS $$
#variable_conflict use_column
DECLARE
  w text;
  k int := 0;
BEGIN
  PERFORM set_config('pg_trgm.similarity_threshold', p_floor::text, true);
  FOR w IN SELECT unnest(tsvector_to_array(to_tsvector('english', p_query))) LOOP
    k := k + 1;
    EXIT WHEN k > p_words;
    IF EXISTS (SELECT 1 FROM search_words x WHERE x.case_id = p_case AND x.word = w AND x.n > 0) THEN
      RETURN QUERY SELECT k, w, true;
    ELSIF w !~ '[0-9]' AND length(w) >= 3 THEN
      RETURN QUERY SELECT k, s.word::text, false FROM (
        SELECT x.word FROM search_words x
        WHERE x.word % w AND x.case_id = p_case AND x.n > 0
        ORDER BY similarity(x.word, w) DESC, x.word LIMIT p_each) AS s;
      IF NOT FOUND THEN
        RETURN QUERY SELECT k, NULL::text, false;
      END IF;
    ELSE
      RETURN QUERY SELECT k, NULL::text, false;
    END IF;
  END LOOP;
END $$
"""


def upgrade() -> None:
    op.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
    op.create_table('search_records',
    sa.Column('case_id', sa.Text(), nullable=False),
    sa.Column('kind', sa.Text(collation='C'), nullable=False),
    sa.Column('record_id', sa.Text(collation='C'), nullable=False),
    sa.Column('proposal_id', sa.Text(collation='C'), nullable=False),
    sa.Column('status', sa.Text(), nullable=False),
    sa.Column('headline', sa.Text(), nullable=False),
    sa.Column('body', sa.Text(), nullable=False),
    sa.Column('tsv', postgresql.TSVECTOR(), sa.Computed("to_tsvector('english'::regconfig, body)", persisted=True),
              nullable=False),
    sa.Column('dup_key', sa.Text(), nullable=True),
    sa.PrimaryKeyConstraint('case_id', 'kind', 'record_id', 'proposal_id', name=op.f('pk_search_records'))
    )
    op.create_index('ix_search_records_id', 'search_records', ['case_id', 'record_id'])
    op.create_index('ix_search_records_tsv', 'search_records', ['tsv'], postgresql_using='gin',
                    postgresql_with={'fastupdate': 'off'})
    op.create_index('ix_search_records_claim_text', 'search_records', ['dup_key'], postgresql_using='gin',
                    postgresql_ops={'dup_key': 'gin_trgm_ops'}, postgresql_where=sa.text("kind = 'claim'"),
                    postgresql_with={'fastupdate': 'off'})
    op.create_index('ix_search_records_source_url', 'search_records', ['case_id', 'dup_key'],
                    postgresql_where=sa.text("kind = 'source'"))
    op.create_table('search_words',
    sa.Column('case_id', sa.Text(), nullable=False),
    sa.Column('word', sa.Text(), nullable=False),
    sa.Column('n', sa.Integer(), nullable=False),
    sa.PrimaryKeyConstraint('case_id', 'word', name=op.f('pk_search_words'))
    )
    op.create_index('ix_search_words_trgm', 'search_words', ['word'], postgresql_using='gin',
                    postgresql_ops={'word': 'gin_trgm_ops'}, postgresql_with={'fastupdate': 'off'})
    op.execute(SIMILAR_CLAIMS)
    op.execute(SIMILAR_WORDS)
    # Every view is rebuilt from the ledger (the search index with it) when next applied or read.
    op.execute("UPDATE case_views SET revision = -1")


def downgrade() -> None:
    op.execute("DROP FUNCTION IF EXISTS threadline_similar_claims")
    op.execute("DROP FUNCTION IF EXISTS threadline_similar_words")
    op.drop_table('search_words')
    op.drop_table('search_records')
