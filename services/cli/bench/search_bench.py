"""`threadline bench search`: search latency, recall and possible-duplicate detection as a case grows.

Cases of 100, 3,000 and `--claims` canonical claims are filled from the generator (search_corpus.py) through
the ledger's write path, their search index built by the projection's rebuild (search_fill.py). Then, side
by side — each sampled query run on every case in turn, so that whatever else the machine does falls on all
sizes alike — the engine behind search_workspace answers four kinds of query: an exact id, four of a claim's
words, the same words with one misspelled, and the words filtered (claims only, any status). Latency is the
engine's (both of its statements), recall@3 whether the sampled claim is among the first three hits.
Possible duplicates are measured on the largest case with staging's own statement: restatements of sampled
claims (word order, case, punctuation, one word changed, a number reformatted) against claims generated apart.
"""

from __future__ import annotations

import random
import secrets
import time
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
from sqlalchemy import text

from services.cli.bench import search_corpus as corpus
from services.cli.bench.search_fill import fill_case
from services.cli.bench.stats import percentile
from services.cli.bench.system import machine
from services.projection.search import Search, run
from services.staging import duplicates
from shared.db.session import Database
from shared.search_text import normalise
from shared.settings import Settings

KINDS = ("id", "words", "misspelled", "filtered")
BASE_SIZES = (100, 3000)
SWEEP = (0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8)
TARGETS = {"recallWords": 0.95, "recallMisspelled": 0.85, "p50Ratio": 1.5, "p99Ms": 100.0,
           "duplicatesFlagged": 0.90, "unrelatedFlagged": 0.05}
_CASE_TABLES = ("search_records", "search_words", "view_counts", "view_sources", "view_origins", "view_claims",
                "view_group_members", "view_unresolved", "case_views", "claim_sources", "claims", "sources",
                "change_log", "cases")


@dataclass(frozen=True)
class SearchOptions:
    claims: int = 30_000
    samples: int = 200
    seed: int = 7
    keep: bool = False


@dataclass(frozen=True)
class Probe:
    claim_id: str
    query: dict[str, str]  # kind of query → its text


def _probes(made: list[corpus.Claim], samples: int, rng: random.Random) -> list[Probe]:
    out = []
    for claim in rng.sample(made, min(samples, len(made))):
        words = corpus.four_words(claim.text, rng)
        query = " ".join(words)
        out.append(Probe(claim.claim_id, {"id": claim.claim_id, "words": query, "filtered": query,
                                          "misspelled": corpus.misspelled_query(words, rng)}))
    return out


async def _timed(connection: Any, case_id: str, kind: str, query: str) -> tuple[float, list[str]]:
    search = Search(case_id, query, ("claim",), "any") if kind == "filtered" else Search(case_id, query)
    start = time.perf_counter()
    hits = (await run(connection, search)).hits
    return (time.perf_counter() - start) * 1000, [h["id"] for h in hits]


async def _similar(connection: Any, case_id: str, keys: list[str], floor: float) -> list[list[tuple[str, float]]]:
    found: list[list[tuple[str, float]]] = [[] for _ in keys]
    rows = await connection.execute(text("SELECT i, record_id, similarity FROM threadline_similar_claims("
                                         ":case_id, CAST(:keys AS text[]), :floor, :limit)"),
                                    {"case_id": case_id, "keys": keys, "floor": floor, "limit": duplicates.PER_ITEM})
    for i, record_id, similarity in rows:
        found[i - 1].append((record_id, similarity))
    return found


async def _duplicates(connection: Any, case_id: str, made: list[corpus.Claim], options: SearchOptions,
                      rng: random.Random) -> dict[str, Any]:
    sampled = rng.sample(made, min(options.samples, len(made)))
    restated = [(c.claim_id, corpus.restated(c.text, random.Random(f"{options.seed}-{i}"))) for i, c in enumerate(sampled)]
    unrelated = corpus.claims(len(sampled), seed=options.seed + 1_000_003, prefix="u")
    lookups: list[float] = []
    best_restated, best_unrelated = [], []
    for (original, restatement), other in zip(restated, unrelated, strict=True):
        for key, out, target in ((normalise(restatement), best_restated, original),
                                 (normalise(other.text), best_unrelated, None)):
            start = time.perf_counter()
            (found,) = await _similar(connection, case_id, [key], duplicates.THRESHOLD)
            lookups.append((time.perf_counter() - start) * 1000)
            (wide,) = await _similar(connection, case_id, [key], min(SWEEP))
            out.append(max((s for r, s in wide if target is None or r == target), default=0.0))
    sweep = [{"threshold": t, "restatementsFlagged": _share(best_restated, t), "unrelatedFlagged": _share(best_unrelated, t)}
             for t in SWEEP]
    return {"threshold": duplicates.THRESHOLD, "pairs": len(restated),
            "restatementsFlagged": _share(best_restated, duplicates.THRESHOLD),
            "unrelatedFlagged": _share(best_unrelated, duplicates.THRESHOLD), "sweep": sweep,
            "lookupMs": {"p50": _ms(percentile(lookups, 0.5)), "p99": _ms(percentile(lookups, 0.99))}}


def _share(values: list[float], threshold: float) -> float:
    return round(sum(v >= threshold for v in values) / len(values), 3) if values else 0.0


def _ms(value: float | None) -> float | None:
    return round(value, 2) if value is not None else None


async def run_search(settings: Settings, options: SearchOptions, console: Console) -> dict[str, Any]:
    db = Database.from_url(settings.resolved_database_url(), pool_size=2, application_name="threadline-bench")
    run_id = secrets.token_hex(3)
    sizes = sorted({*BASE_SIZES, options.claims})
    cases = {size: f"bench-search-{run_id}-{size}" for size in sizes}
    made = {size: corpus.claims(size, seed=options.seed + size, prefix="c") for size in sizes}
    rng = random.Random(options.seed)
    try:
        with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), console=console,
                      transient=True) as progress:
            for size in sizes:
                task = progress.add_task(f"filling a case of {size:,} claims", total=size)
                await fill_case(db, cases[size], made[size], lambda n, task=task: progress.advance(task, n))
            probes = {size: _probes(made[size], options.samples, rng) for size in sizes}
            latencies: dict[int, dict[str, list[float]]] = {s: {k: [] for k in KINDS} for s in sizes}
            top3: dict[int, dict[str, list[bool]]] = {s: {k: [] for k in KINDS} for s in sizes}
            async with db.engine.connect() as connection:
                for size in sizes:  # warm the caches and plans alike on every case
                    for probe in probes[size][:10]:
                        for kind in KINDS:
                            await _timed(connection, cases[size], kind, probe.query[kind])
                task = progress.add_task("searching, side by side", total=options.samples * len(sizes))
                for i in range(options.samples):
                    for size in sizes:
                        if i >= len(probes[size]):
                            continue
                        probe = probes[size][i]
                        for kind in KINDS:
                            ms, ids = await _timed(connection, cases[size], kind, probe.query[kind])
                            latencies[size][kind].append(ms)
                            top3[size][kind].append(probe.claim_id in ids[:3])
                        progress.advance(task)
                progress.add_task("possible duplicates", total=None)
                dups = await _duplicates(connection, cases[sizes[-1]], made[sizes[-1]], options, rng)
                await connection.rollback()
    finally:
        if not options.keep:
            await _drop_cases(db, list(cases.values()))
        await db.dispose()
    return _report(sizes, latencies, top3, dups)


def _report(sizes: list[int], latencies: dict[int, dict[str, list[float]]], top3: dict[int, dict[str, list[bool]]],
            dups: dict[str, Any]) -> dict[str, Any]:
    rows = []
    for size in sizes:
        every = [ms for kind in KINDS for ms in latencies[size][kind]]
        row: dict[str, Any] = {"claims": size, "all": {"p50": _ms(percentile(every, 0.5)), "p99": _ms(percentile(every, 0.99))}}
        for kind in KINDS:
            row[kind] = {"p50": _ms(percentile(latencies[size][kind], 0.5)), "p99": _ms(percentile(latencies[size][kind], 0.99))}
        row["recallWords"] = round(sum(top3[size]["words"]) / max(1, len(top3[size]["words"])), 3)
        row["recallMisspelled"] = round(sum(top3[size]["misspelled"]) / max(1, len(top3[size]["misspelled"])), 3)
        rows.append(row)
    small, large = rows[0], rows[-1]
    ratio = round(large["all"]["p50"] / small["all"]["p50"], 2) if small["all"]["p50"] else None
    checks = {
        "recallWords": large["recallWords"] >= TARGETS["recallWords"],
        "recallMisspelled": large["recallMisspelled"] >= TARGETS["recallMisspelled"],
        "p50Ratio": ratio is not None and ratio <= TARGETS["p50Ratio"],
        "p99Ms": max(large[k]["p99"] for k in KINDS) < TARGETS["p99Ms"],
        "duplicatesFlagged": dups["restatementsFlagged"] >= TARGETS["duplicatesFlagged"],
        "unrelatedFlagged": dups["unrelatedFlagged"] <= TARGETS["unrelatedFlagged"],
    }
    return {"sizes": rows, "p50Ratio": ratio, "duplicates": dups, "targets": TARGETS, "met": checks,
            "machine": machine()}


async def _drop_cases(db: Database, case_ids: list[str]) -> None:
    """The bench's cases, gone: every row they wrote (the bench writes no events)."""
    async with db.engine.begin() as connection:
        for table in _CASE_TABLES:
            await connection.execute(text(f"DELETE FROM {table} WHERE case_id = ANY(CAST(:ids AS text[]))"),
                                     {"ids": case_ids})


def search_tables(report: dict[str, Any]) -> list[Any]:
    from rich.table import Table

    latency = Table(title="threadline bench search: latency of the search engine (ms) and recall@3")
    latency.add_column("claims", justify="right")
    for kind in (*KINDS, "all"):
        latency.add_column(f"{kind} p50/p99", justify="right")
    latency.add_column("recall words", justify="right")
    latency.add_column("recall misspelled", justify="right")
    for row in report["sizes"]:
        latency.add_row(f"{row['claims']:,}", *(f"{row[k]['p50']} / {row[k]['p99']}" for k in (*KINDS, "all")),
                        f"{row['recallWords']:.1%}", f"{row['recallMisspelled']:.1%}")
    dups = report["duplicates"]
    flagged = Table(title=f"possible duplicates on the largest case ({dups['pairs']} restatements, "
                          f"{dups['pairs']} unrelated claims; staging's lookup p50 {dups['lookupMs']['p50']} ms, "
                          f"p99 {dups['lookupMs']['p99']} ms)")
    for column in ("threshold", "restatements flagged", "unrelated flagged"):
        flagged.add_column(column, justify="right")
    for row in dups["sweep"]:
        mark = " (used)" if abs(row["threshold"] - dups["threshold"]) < 1e-9 else ""
        flagged.add_row(f"{row['threshold']}{mark}", f"{row['restatementsFlagged']:.1%}", f"{row['unrelatedFlagged']:.1%}")
    met = Table(title=f"targets (p50 at the largest case / p50 at 100 claims: {report['p50Ratio']}×)")
    met.add_column("target")
    met.add_column("met")
    for name, ok in report["met"].items():
        met.add_row(f"{name} ({report['targets'][name]})", "yes" if ok else "NO")
    return [latency, flagged, met]
