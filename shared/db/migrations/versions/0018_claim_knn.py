"""Possible duplicates of a claim found by nearest neighbours in its case, not by comparing every claim of the case.

`threadline_similar_claims` read a case's claims through the primary key (case, kind) and computed the trigram
similarity of each: a stage call's PostgreSQL time grew with its case (18.7 ms per staged claim in a case of 1,520
alike claims, `bench stage`). A GiST index on (case, claim text) answers "the few most similar claims of this case"
by walking the index in order of trigram distance and stops at the limit (0.64 ms on the same case). Its
signatures are 64 bytes, not the default 12: in a case of 20,000 claims, a claim like none of them was answered
in 0.3 ms instead of 7.6 (and one like all of them in 25 ms instead of 39; 107 ms by the GIN index before).
"""

from alembic import op

revision, down_revision = '0018', '0017'

SIMILAR_CLAIMS = """
CREATE OR REPLACE FUNCTION threadline_similar_claims(p_case text, p_keys text[], p_floor real, p_limit int)
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
      WHERE s.kind = 'claim' AND s.case_id = p_case AND s.dup_key % k.key
        AND s.status IN ('canonical', 'pending') AND k.key <> ''
      ORDER BY s.dup_key <-> k.key, s.record_id LIMIT p_limit) AS r;
END $$
"""


def upgrade() -> None:
    op.execute("CREATE EXTENSION IF NOT EXISTS btree_gist")  # the case's equality inside a GiST index
    op.drop_index('ix_search_records_claim_text', table_name='search_records')
    op.execute("CREATE INDEX ix_search_records_claim_knn ON search_records "
               "USING gist (case_id, dup_key gist_trgm_ops (siglen = 64)) WHERE kind = 'claim'")
    op.execute(SIMILAR_CLAIMS)


def downgrade() -> None:  # the function stays: nearest first is the same order, computed row by row without GiST
    op.drop_index('ix_search_records_claim_knn', table_name='search_records')
    op.execute("CREATE INDEX ix_search_records_claim_text ON search_records USING gin (dup_key gin_trgm_ops) "
               "WITH (fastupdate = off) WHERE kind = 'claim'")
