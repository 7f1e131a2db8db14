"""What repeating each command does: what an answer may promise when a command was sent and its outcome is unknown.

A caller whose answer was lost (NATS gone after the command went out, its service killed before replying, no
reply in time) can only retry. Whether a retry is harmless depends on the command: reads change nothing, the
agents' and reviewers' writes return the first outcome to an identical repeat (DESIGN.md, "Repeats are
harmless"), a few are refused as done once they were, and a few would add another record.
"""

from __future__ import annotations

from enum import StrEnum

from shared.subjects import Command


class Repeat(StrEnum):
    READ = "read"  # changes nothing
    HARMLESS = "harmless"  # ends in the same state however often it runs
    REPLAYED = "replayed"  # an identical repeat returns the first outcome, marked replayed
    REFUSED = "refused"  # once applied, a repeat is refused as done already: nothing doubles
    ADDS = "adds"  # each run adds a record: a repeat would add another


_BY_KIND: dict[Repeat, tuple[Command, ...]] = {
    Repeat.READ: (Command.GET_WORKSPACE, Command.INSPECT_SOURCES, Command.GET_COMPANY_CONTEXT, Command.CASE_LEDGER,
                  Command.LIST_CASES, Command.GET_CASE, Command.CASE_HISTORY, Command.CASE_GRAPH,
                  Command.LIST_PROPOSALS, Command.GET_PROPOSAL, Command.LIST_COMPANIES, Command.GET_COMPANY,
                  Command.LIST_DELTAS, Command.GET_DELTA, Command.LIST_WEBHOOKS, Command.GET_WEBHOOK,
                  Command.LIST_DELIVERIES, Command.CASE_DIFF, Command.CLAIM_TIMELINE, Command.EXPORT_PAGE),
    Repeat.HARMLESS: (Command.SET_FOCUS, Command.DELETE_WEBHOOK, Command.REDELIVER),
    Repeat.REPLAYED: (Command.STAGE_SOURCES, Command.STAGE_CLAIMS, Command.STAGE_RELATIONS, Command.STAGE_MERGE,
                      Command.STAGE_VERDICT, Command.DECIDE, Command.PROPOSE_CLAIM_DELTA),
    Repeat.REFUSED: (Command.CREATE_CASE, Command.RECORD_SOURCES, Command.RETIRE_RECORDS, Command.CREATE_COMPANY,
                     Command.DECIDE_DELTA),
    Repeat.ADDS: (Command.ADD_GUIDANCE, Command.ADD_SOURCE_FILE, Command.ADD_THESIS_CLAIM, Command.REGISTER_WEBHOOK),
}
# Resolving: an identical repeat is refused as resolved so already; the record of an agent is a read.
_BY_KIND[Repeat.REFUSED] += (Command.RESOLVE_PREDICTION,)
_BY_KIND[Repeat.READ] += (Command.AGENT_RECORD,)
REPEAT: dict[Command, Repeat] = {command: kind for kind, commands in _BY_KIND.items() for command in commands}
REPEAT |= {c: Repeat.READ for c in (Command.SEARCH_WORKSPACE, Command.INSPECT_CLAIMS, Command.CASE_SEARCH)}

_AFTER_LOST_ANSWER = {
    Repeat.READ: "retry: a read changes nothing",
    Repeat.HARMLESS: "retry: repeating the call is harmless (it ends in the same state)",
    Repeat.REPLAYED: "retry the identical call: repeating it is harmless (if the first was applied, the repeat "
                     "returns its outcome, marked replayed, and stores nothing twice)",
    Repeat.REFUSED: "retry: repeating the call is harmless (if the first was applied, the repeat is refused as "
                    "done already and nothing is doubled)",
    Repeat.ADDS: "look before repeating it: if the first was applied, a repeat would add a second one",
}


def is_read(command: Command) -> bool:
    return REPEAT[command] is Repeat.READ


def may_have_applied(command: Command) -> str:
    """The `unavailable` message's tail when `command` was sent and its answer lost."""
    return "" if is_read(command) else ": the call may have been applied"


def after_lost_answer(command: Command) -> str:
    """The hint of an answer that was lost after `command` was sent: whether and how to repeat it."""
    return _AFTER_LOST_ANSWER[REPEAT[command]]
