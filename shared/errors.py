"""Named errors the domain raises, and the one map from error codes to HTTP statuses."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from shared.problems import Problem


class ThreadlineError(Exception):
    """An error a caller can act on: a code, a message, the field at fault and how to fix it, and — when
    a call has several faults — every one of them (`problems`, each with its field and fix)."""

    code: ClassVar[str] = "internal"

    def __init__(
        self,
        message: str,
        *,
        field: str | None = None,
        hint: str | None = None,
        details: dict[str, Any] | None = None,
        problems: Sequence[Problem | dict[str, str]] = (),
    ) -> None:
        super().__init__(message)
        self.message = message
        self.field = field
        self.hint = hint
        self.details = details or {}
        self.problems = [x if isinstance(x, dict) else x.to_dict() for x in problems]

    @classmethod
    def of(cls, problems: Sequence[Problem], what: str = "") -> ThreadlineError:
        """One refusal naming every problem: the first in the message, all of them in `problems`."""
        first = problems[0]
        more = len(problems) - 1
        tail = f" (and {more} more problem{'s' if more > 1 else ''}: see problems)" if more else ""
        return cls(f"{first.field}: {first.message}{tail}{what}", field=first.field, hint=first.hint,
                   problems=problems)

    def to_dict(self) -> dict[str, Any]:
        body: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.field is not None:
            body["field"] = self.field
        if self.hint is not None:
            body["hint"] = self.hint
        if self.problems:
            body["problems"] = self.problems
        if self.details:
            body["details"] = self.details
        return body


class InvalidArgument(ThreadlineError):
    code = "invalid_argument"


class Unauthenticated(ThreadlineError):
    code = "unauthenticated"


class Forbidden(ThreadlineError):
    code = "forbidden"


class NotFound(ThreadlineError):
    code = "not_found"


class AlreadyExists(ThreadlineError):
    code = "already_exists"


class WrongCase(ThreadlineError):
    """The call names a case other than the one the agent most recently discovered."""

    code = "wrong_case"


class NoActiveCase(ThreadlineError):
    code = "no_active_case"


class StaleRevision(ThreadlineError):
    """The call was pinned to a revision the ledger has moved past."""

    code = "stale_revision"


class Conflict(ThreadlineError):
    code = "conflict"


class IdempotencyConflict(ThreadlineError):
    code = "idempotency_conflict"


class InvalidCommitToken(ThreadlineError):
    code = "invalid_commit_token"


class Expired(ThreadlineError):
    code = "expired"


class NotYetSupported(ThreadlineError):
    code = "not_yet_supported"


class Unavailable(ThreadlineError):
    code = "unavailable"


class InternalError(ThreadlineError):
    code = "internal"


class MalformedRequest(ThreadlineError):
    """The request cannot be read at all: a body that is not JSON, a form that does not parse."""

    code = "malformed_request"


class MethodNotAllowed(ThreadlineError):
    code = "method_not_allowed"


class PayloadTooLarge(ThreadlineError):
    code = "payload_too_large"


HTTP_STATUS: dict[str, int] = {
    InvalidArgument.code: 422,
    Unauthenticated.code: 401,
    Forbidden.code: 403,
    NotFound.code: 404,
    AlreadyExists.code: 409,
    WrongCase.code: 409,
    NoActiveCase.code: 409,
    StaleRevision.code: 409,
    Conflict.code: 409,
    IdempotencyConflict.code: 409,
    InvalidCommitToken.code: 403,
    Expired.code: 410,
    NotYetSupported.code: 501,
    Unavailable.code: 503,
    InternalError.code: 500,
    MalformedRequest.code: 400,
    MethodNotAllowed.code: 405,
    PayloadTooLarge.code: 413,
}

_BY_CODE: dict[str, type[ThreadlineError]] = {
    cls.code: cls
    for cls in (InvalidArgument, Unauthenticated, Forbidden, NotFound, AlreadyExists, WrongCase, NoActiveCase,
                StaleRevision, Conflict, IdempotencyConflict, InvalidCommitToken, Expired, NotYetSupported,
                Unavailable, InternalError, MalformedRequest, MethodNotAllowed, PayloadTooLarge)
}


def from_dict(body: dict[str, Any]) -> ThreadlineError:
    """Rebuild an error carried in a reply envelope."""
    cls = _BY_CODE.get(body.get("code", ""), InternalError)
    return cls(
        body.get("message", "internal error"),
        field=body.get("field"),
        hint=body.get("hint"),
        details=body.get("details"),
        problems=body.get("problems") or (),
    )
