"""What get_workspace marks each claim with beside the view rows: its grounding, a prediction's resolution,
and the predictions still open — read from the ledger as it stood at the view's revision."""

from __future__ import annotations

from typing import Any

from sqlalchemy import or_, select
from sqlalchemy.ext.asyncio import AsyncConnection

from shared.db.review_tables import prediction_resolutions
from shared.db.tables import claims
from shared.grounding import grounding_for


class ClaimMarks:
    connection: AsyncConnection

    async def grounding(self, case_id: str, claim_ids: list[str], revision: int) -> dict[str, dict[str, Any]]:
        return await grounding_for(self.connection, case_id, claim_ids, as_of=revision)

    async def resolutions(self, case_id: str, claim_ids: list[str], revision: int) -> dict[str, dict[str, Any]]:
        if not claim_ids:
            return {}
        rows = await self.connection.execute(
            select(prediction_resolutions.c.claim_id, prediction_resolutions.c.outcome,
                   prediction_resolutions.c.resolved_on, prediction_resolutions.c.source_id)
            .where(prediction_resolutions.c.case_id == case_id, prediction_resolutions.c.claim_id.in_(claim_ids),
                   prediction_resolutions.c.revision <= revision)
            .order_by(prediction_resolutions.c.revision))
        return {r.claim_id: {"outcome": r.outcome, "resolvedOn": r.resolved_on, "sourceId": r.source_id} for r in rows}

    async def open_predictions(self, case_id: str, revision: int) -> list[tuple[str, str]]:
        resolved = select(prediction_resolutions.c.claim_id).where(
            prediction_resolutions.c.case_id == case_id, prediction_resolutions.c.revision <= revision)
        rows = await self.connection.execute(
            select(claims.c.claim_id, claims.c.text).where(
                claims.c.case_id == case_id, claims.c.kind == "prediction", claims.c.revision <= revision,
                or_(claims.c.ended_revision.is_(None), claims.c.ended_revision > revision),
                claims.c.claim_id.not_in(resolved)).order_by(claims.c.claim_id))
        return [(r.claim_id, r.text) for r in rows]
