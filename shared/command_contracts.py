"""Every command's request contract in one table: the services check their handlers against it, the AsyncAPI
document and the spec tests read it. It sits above the contract modules, so none of them imports another's."""

from __future__ import annotations

from pydantic import BaseModel

from shared import contracts as c
from shared.graph_contracts import CaseGraphRef
from shared.history_contracts import history_requests
from shared.resolution_contracts import AgentRecordRef, ResolvePrediction
from shared.search_contracts import search_requests
from shared.subjects import Command
from shared.webhook_contracts import ListDeliveries, ListWebhooks, Redeliver, RegisterWebhook, WebhookRef


def command_requests() -> dict[Command, type[BaseModel]]:
    """The request contract of every command (for documentation: the handlers declare the same types)."""
    return {
        Command.STAGE_SOURCES: c.ToolRequest[c.StageSourcesArgs],
        Command.STAGE_CLAIMS: c.ToolRequest[c.StageClaimsArgs],
        Command.STAGE_RELATIONS: c.ToolRequest[c.StageRelationsArgs],
        Command.STAGE_MERGE: c.ToolRequest[c.StageMergeArgs],
        Command.STAGE_VERDICT: c.ToolRequest[c.StageVerdictArgs],
        Command.GET_WORKSPACE: c.ToolRequest[c.GetWorkspaceArgs],
        Command.INSPECT_SOURCES: c.ToolRequest[c.InspectSourcesArgs],
        Command.SET_FOCUS: c.ToolRequest[c.SetFocusArgs],
        Command.GET_COMPANY_CONTEXT: c.ToolRequest[c.GetCompanyContextArgs],
        Command.CREATE_CASE: c.CreateCase,
        Command.LIST_CASES: c.ListCases,
        Command.GET_CASE: c.CaseRef,
        Command.CASE_HISTORY: c.CaseHistory,
        Command.CASE_GRAPH: CaseGraphRef,
        Command.ADD_GUIDANCE: c.AddGuidance,
        Command.RECORD_SOURCES: c.RecordSources,
        Command.RETIRE_RECORDS: c.RetireRecords,
        Command.LIST_PROPOSALS: c.ListProposals,
        Command.GET_PROPOSAL: c.ProposalRef,
        Command.DECIDE: c.Decide,
        Command.PROPOSE_CLAIM_DELTA: c.ProposeClaimDeltaRequest,
        Command.CREATE_COMPANY: c.CreateCompany,
        Command.LIST_COMPANIES: c.ListCompanies,
        Command.GET_COMPANY: c.CompanyRef,
        Command.ADD_SOURCE_FILE: c.AddSourceFile,
        Command.ADD_THESIS_CLAIM: c.AddThesisClaim,
        Command.LIST_DELTAS: c.ListDeltas,
        Command.GET_DELTA: c.DeltaRef,
        Command.DECIDE_DELTA: c.DecideDelta,
        Command.REGISTER_WEBHOOK: RegisterWebhook,
        Command.LIST_WEBHOOKS: ListWebhooks,
        Command.GET_WEBHOOK: WebhookRef,
        Command.DELETE_WEBHOOK: WebhookRef,
        Command.LIST_DELIVERIES: ListDeliveries,
        Command.REDELIVER: Redeliver,
        **history_requests(),  # CASE_LEDGER's contract there (as of a revision), and the history commands
        **search_requests(),  # search_workspace, inspect_claims, the case search
        Command.RESOLVE_PREDICTION: ResolvePrediction,
        Command.AGENT_RECORD: AgentRecordRef,
    }
