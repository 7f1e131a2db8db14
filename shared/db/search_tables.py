"""The projection's search index (writer: projection): every record of a case as search reads it.

One row per canonical or retired record of the ledger and per pending proposal item, kept from the change
events at the cost of the change and rebuilt from the ledger with the case views; its text is indexed for
full-text search (English stemming, accents dropped: "Zurich" finds Zürich) and its normalised text (claims)
or URL (sources) for duplicates, and the words of the case's texts (their stems, without accents) for similar
spellings. A search reads these tables only.
"""

from __future__ import annotations

from sqlalchemy import Column, Computed, Index, Integer, PrimaryKeyConstraint, Table, Text
from sqlalchemy.dialects.postgresql import TSVECTOR

from shared.db.base import metadata

Key = Text(collation="C")

search_records = Table(
    "search_records",
    metadata,
    Column("case_id", Text, nullable=False),
    Column("kind", Key, nullable=False),  # source | claim | relation | group
    Column("record_id", Key, nullable=False),
    Column("proposal_id", Key, nullable=False),  # '' for a ledger record; a pending item's proposal
    Column("status", Text, nullable=False),  # canonical | pending | retired
    Column("headline", Text, nullable=False),
    Column("body", Text, nullable=False),
    Column("plain", Text, nullable=False),  # the body without accents (shared/search_text.plain), as searched
    Column("tsv", TSVECTOR, Computed("to_tsvector('english'::regconfig, plain)", persisted=True), nullable=False),
    Column("dup_key", Text),  # a claim's normalised text, a source's normalised URL (shared/search_text.py)
    PrimaryKeyConstraint("case_id", "kind", "record_id", "proposal_id"),
)
Index("ix_search_records_id", search_records.c.case_id, search_records.c.record_id)
# The GIN indexes take each change at once (no pending list a search would read through after many writes).
Index("ix_search_records_tsv", search_records.c.tsv, postgresql_using="gin", postgresql_with={"fastupdate": "off"})
# A claim's most similar claims in its case, nearest first (threadline_similar_claims; btree_gist for the case).
Index("ix_search_records_claim_knn", search_records.c.case_id, search_records.c.dup_key, postgresql_using="gist",
      postgresql_ops={"dup_key": "gist_trgm_ops(siglen=64)"}, postgresql_where=search_records.c.kind == "claim")
Index("ix_search_records_source_url", search_records.c.case_id, search_records.c.dup_key,
      postgresql_where=search_records.c.kind == "source")

search_words = Table(  # the stems of a case's indexed texts, and in how many records each occurs
    "search_words",
    metadata,
    Column("case_id", Text, nullable=False),
    Column("word", Text, nullable=False),  # the database's collation: the trigram index matches the query's
    Column("n", Integer, nullable=False),
    PrimaryKeyConstraint("case_id", "word"),
)
Index("ix_search_words_trgm", search_words.c.word, postgresql_using="gin", postgresql_ops={"word": "gin_trgm_ops"},
      postgresql_with={"fastupdate": "off"})
