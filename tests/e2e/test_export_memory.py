"""An export of a case of 30,000 claims streams: the gateway's memory grows by far less than the export's size.

The case is written into the ledger's tables in bulk (30,000 claims citing 3,000 sources, 30,000 relations,
1,000 merge groups, 300 revisions): filling it through staging and review would take most of an hour here,
and the export reads only those tables. The gateway runs as its own process (`threadline serve gateway`), so
its peak resident memory during each export (VmHWM, reset before it) is the gateway's alone. The figures are
printed (`-s`); `THREADLINE_EXPORT_CLAIMS` sets another size. The figures measured are in docs/performance.md
("Exports").
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import httpx2
import pytest
from sqlalchemy import text

from services.cli.embedded import free_port
from tests.factories import new_case
from tests.processes import ServiceProcesses

CLAIMS = int(os.environ.get("THREADLINE_EXPORT_CLAIMS", "30000"))
# `make test` streams the Turtle export (about 25 s here); THREADLINE_FULL=1 streams every format.
FORMATS = ("prov-turtle", "nanopub-trig", "aif-json", "prov-jsonld") if os.environ.get("THREADLINE_FULL") else (
    "prov-turtle",)
REVISIONS = 300
LIMIT_MB = 100

FILL = [
    "UPDATE cases SET revision = :revisions WHERE case_id = :case",
    """INSERT INTO change_log (case_id, revision, decision_id, actor, summary, changes, at)
       SELECT :case, r, md5('d' || r)::uuid, 'rita', 'rita accepted 100 item(s)', '{}'::jsonb, now()
       FROM generate_series(1, :revisions) r""",
    """INSERT INTO sources (case_id, source_id, publisher, title, url, url_key, publication_date, snapshot_date, type,
                            authority, evidence_text, provenance_note, proposal_id, staged_by, staged_at, decision_id,
                            decided_by, decided_at, revision)
       SELECT :case, 's' || i, 'Publisher ' || (i % 40), 'Record number ' || i, 'https://example.org/r/' || i,
              'example.org/r/' || i,
              '2024-05-01', '2026-11-01', 'primary', 'Its own measurements.', repeat('Evidence. ', 100), 'Bulk.',
              md5('p' || (1 + i % :revisions))::uuid, 'agent-' || (i % 8), now(), md5('d' || (1 + i % :revisions))::uuid,
              'rita', now(), 1 + i % :revisions
       FROM generate_series(0, :claims / 10 - 1) i""",
    """INSERT INTO claims (case_id, claim_id, text, kind, confidence, transformation_note, proposal_id, staged_by,
                           staged_at, decision_id, decided_by, decided_at, revision)
       SELECT :case, 'c' || i, 'Claim ' || i || ': ' || repeat('the measured figure holds ', 8), 'observation',
              'supported', 'Quoted the key figure of its source.', md5('p' || (1 + i % :revisions))::uuid,
              'agent-' || (i % 8), now(), md5('d' || (1 + i % :revisions))::uuid, 'rita', now(), 1 + i % :revisions
       FROM generate_series(0, :claims - 1) i""",
    """INSERT INTO claim_sources (case_id, claim_id, source_id, position)
       SELECT :case, 'c' || i, 's' || (i % (:claims / 10)), 0 FROM generate_series(0, :claims - 1) i""",
    """INSERT INTO relations (case_id, relation_id, source_claim_id, target_claim_id, type, rationale,
                              decided_by, decided_at, revision)
       SELECT :case, 'r' || i, 'c' || i, 'c' || ((i + 1) % :claims),
              (ARRAY['supports', 'contradicts', 'qualifies', 'amplifies'])[1 + i % 4], 'The first bears on the second.',
              'rita', now(), :revisions
       FROM generate_series(0, :claims - 1) i""",
    """INSERT INTO merge_groups (case_id, group_id, label, confidence, rationale, decided_by, decided_at, revision)
       SELECT :case, 'g' || i, 'Group ' || i, 'high', 'They restate one figure.', 'rita', now(), :revisions
       FROM generate_series(0, :claims / 30 - 1) i""",
    """INSERT INTO merge_group_members (case_id, group_id, claim_id)
       SELECT :case, 'g' || i, 'c' || (2 * i + m) FROM generate_series(0, :claims / 30 - 1) i, generate_series(0, 1) m""",
]


def status_kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc/{pid}/status")


@pytest.fixture
async def gateway(stack, tmp_path):
    processes = ServiceProcesses("gateway", {**stack.environment(), "THREADLINE_LOG_LEVEL": "WARNING"}, tmp_path)
    port = free_port()
    process = processes.start(THREADLINE_HTTP_PORT=str(port))
    url = f"http://127.0.0.1:{port}"
    async with httpx2.AsyncClient(timeout=2) as http:
        for _ in range(300):
            try:
                if (await http.get(f"{url}/healthz")).status_code == 200:
                    break
            except httpx2.HTTPError:
                pass
            assert process.poll() is None, processes.log_of(process)
            await asyncio.sleep(0.1)
    yield process, url
    processes.stop_all()


@pytest.mark.slow
async def test_exporting_a_case_of_30000_claims_keeps_the_gateways_memory_growth_under_100_mb(stack, gateway):
    process, url = gateway
    case_id = await new_case(stack)
    async with stack.db.engine.begin() as connection:
        for statement in FILL:
            await connection.execute(text(statement), {"case": case_id, "claims": CLAIMS, "revisions": REVISIONS})
    headers = {"Authorization": f"Bearer {stack.tokens['reviewer']}"}
    async with httpx2.AsyncClient(base_url=url, headers=headers, timeout=600) as http:
        warm = await http.get(f"/api/v1/cases/{case_id}/export", params={"format": "aif-json", "asOf": 1})
        assert warm.status_code == 200, warm.text
        for fmt in FORMATS:
            base = status_kb(process.pid, "VmRSS")
            Path(f"/proc/{process.pid}/clear_refs").write_text("5")  # the peak (VmHWM) starts again from now
            started, size, claims_seen, tail = time.monotonic(), 0, 0, b""
            async with http.stream("GET", f"/api/v1/cases/{case_id}/export", params={"format": fmt}) as answer:
                assert answer.status_code == 200
                async for data in answer.aiter_bytes():
                    size += len(data)
                    seen = tail + data  # every claim's text at least once, whatever the format
                    claims_seen += seen.count(b"Claim ")
                    tail = seen[-5:]
            growth_mb = (status_kb(process.pid, "VmHWM") - base) / 1024
            print(f"export {fmt}: {CLAIMS} claims, {size / 2**20:.1f} MB in {time.monotonic() - started:.1f} s; "
                  f"gateway peak RSS {base / 1024:.0f} MB + {growth_mb:.1f} MB")
            assert claims_seen >= CLAIMS
            assert growth_mb < LIMIT_MB
