"""Claims' duplicate keys without accents as search reads them: `dup_key` recomputed by the new `normalise`.

`shared/search_text.normalise` dropped every combining mark of the decomposed text (a kana's voicing mark too, so
が was か) and kept the letters that do not decompose (Łódź gave łodz, not lodz, so it did not restate Lodz). It is
now built on `plain`, search's rule. The keys stored before (`search_records.dup_key` of claims; sources' keys are
URLs, unchanged) are recomputed here from the claims' texts: a ledger claim's from `claims`, a pending claim's from
its proposal item, as the projection read them. Only texts that are not plain ASCII can change (both rules leave
ASCII as it is); the downgrade recomputes the same keys by the old rule.
"""

import re
import unicodedata
from collections.abc import Callable

import sqlalchemy as sa
from alembic import op

revision, down_revision = '0020', '0019'

_BATCH = 2000
# Each indexed claim whose text is not plain ASCII, and that text (a pending claim's from its item: a verdict
# patch holds its claim under `claim`).
_CLAIM_TEXTS = r"""
SELECT * FROM (
  SELECT r.case_id, r.record_id, r.proposal_id, c.text
  FROM search_records r JOIN claims c ON c.case_id = r.case_id AND c.claim_id = r.record_id
  WHERE r.kind = 'claim' AND r.proposal_id = ''
  UNION ALL
  SELECT r.case_id, r.record_id, r.proposal_id, COALESCE(i.payload -> 'claim', i.payload) ->> 'text'
  FROM search_records r JOIN proposal_items i ON i.proposal_id::text = r.proposal_id
   AND COALESCE(i.payload -> 'claim', i.payload) ->> 'id' = r.record_id
  WHERE r.kind = 'claim' AND r.proposal_id <> ''
) t WHERE text ~ '[^\x01-\x7f]'
"""
_SET_KEYS = """
UPDATE search_records r SET dup_key = u.dup_key
FROM unnest(CAST(:case_ids AS text[]), CAST(:ids AS text[]), CAST(:proposals AS text[]), CAST(:keys AS text[]))
  AS u(case_id, record_id, proposal_id, dup_key)
WHERE r.case_id = u.case_id AND r.kind = 'claim' AND r.record_id = u.record_id AND r.proposal_id = u.proposal_id
"""

# shared/search_text as of this revision (a migration does not change with the code).
_PLAIN_LETTERS = str.maketrans({"Ø": "O", "ø": "o", "Ł": "L", "ł": "l", "Đ": "D", "đ": "d", "Ð": "D", "ð": "d",
                                "Ħ": "H", "ħ": "h", "ı": "i", "ß": "ss", "ẞ": "SS", "Æ": "AE", "æ": "ae",
                                "Œ": "OE", "œ": "oe", "Þ": "TH", "þ": "th"})
_NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")
_PUNCT = re.compile(r"[^\w\s]+")
_SPACE = re.compile(r"\s+")


def _plain(text: str) -> str:
    bare = re.sub("[\u0300-\u036f]", "", unicodedata.normalize("NFKD", text))
    return unicodedata.normalize("NFC", bare).translate(_PLAIN_LETTERS)


def _unaccent(text: str) -> str:
    """The rule before this revision."""
    return "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))


def _number(match: re.Match[str]) -> str:
    digits = match.group().replace(",", "")
    if "." in digits:
        digits = digits.rstrip("0").rstrip(".")
    return digits.lstrip("0") or "0"


def _normalise(text: str, without_accents: Callable[[str], str]) -> str:
    text = without_accents(text).lower().replace("%", " percent ")
    text = _NUMBER.sub(_number, text)
    text = _PUNCT.sub(" ", text.replace("_", " "))
    return _SPACE.sub(" ", text).strip()


def _recompute(without_accents: Callable[[str], str]) -> None:
    connection = op.get_bind()
    rows = connection.execute(sa.text(_CLAIM_TEXTS)).all()
    for start in range(0, len(rows), _BATCH):
        chunk = rows[start:start + _BATCH]
        connection.execute(sa.text(_SET_KEYS), {
            "case_ids": [r.case_id for r in chunk], "ids": [r.record_id for r in chunk],
            "proposals": [r.proposal_id for r in chunk],
            "keys": [_normalise(r.text, without_accents) for r in chunk]})


def upgrade() -> None:
    _recompute(_plain)


def downgrade() -> None:
    _recompute(_unaccent)
