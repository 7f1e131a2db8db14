"""Which of a schema's shapes (`anyOf`) a refused call meant, so that its refusal tells what is wrong there.

Where the shapes are told apart by `mode`, the call meant the one its `mode` names. Otherwise it meant the
shape it comes closest to: the fewest fields it sent that the shape refuses, then the fewest missing or
unexpected fields, then the fewest faults. When shapes tie — `{sourceFileId}` is as far
from `{companyId, …}` as from `{ticker, …}` — what they have in common is said once, and fields that each
of them wants alone (or refuses beside the other) are named together: "companyId or ticker".
"""

from __future__ import annotations

from typing import Any

from jsonschema.exceptions import ValidationError

EITHER = "either"  # the validator name of a fault that names several fields, one of which is wanted


def relevance(error: ValidationError) -> tuple[int, int, tuple[str, ...]]:
    # Structural faults first (a missing or unexpected field), then the deepest path, then stable order;
    # "matches no shape" only when nothing more precise is known.
    rank = {"required": 0, "dependencies": 0, "additionalProperties": 0, EITHER: 0, "anyOf": 2}.get(
        str(error.validator), 1)
    return (rank, -len(error.absolute_path), tuple(map(str, error.absolute_path)))


def _distance(faults: list[ValidationError]) -> tuple[int, int, int]:
    """How far a call is from one shape: the fields it sent that the shape refuses, its missing or unexpected
    fields, all its faults."""
    return (sum(fault.validator == "additionalProperties" for fault in faults),
            sum(relevance(fault)[0] == 0 for fault in faults), len(faults))


def shape_faults(error: ValidationError, arguments: Any) -> list[ValidationError]:
    """An error as the faults worth telling: for an `anyOf` of shapes, what is wrong inside the shape the
    caller meant (none when `mode` names no shape: that fault is reported instead)."""
    if error.validator != "anyOf" or not error.context:
        return [error]
    faults: dict[int, list[ValidationError]] = {}
    for inner in error.context:
        faults.setdefault(inner.schema_path[0], []).append(inner)
    modes = {
        index: branch["properties"]["mode"]["const"]
        for index, branch in enumerate(error.validator_value)
        if "const" in branch.get("properties", {}).get("mode", {})
    }
    if modes:
        mode = arguments.get("mode") if isinstance(arguments, dict) else None
        chosen = next((faults.get(index, []) for index, const in modes.items() if const == mode), [])
    else:
        nearest = min(map(_distance, faults.values()))
        chosen = _either(error, [shape for shape in faults.values() if _distance(shape) == nearest])
    if not chosen:
        return [error]
    return [fault for inner in chosen for fault in shape_faults(inner, arguments)]


def _key(fault: ValidationError) -> tuple[Any, ...]:
    return (tuple(fault.absolute_path), str(fault.validator), fault.message)


def _either(error: ValidationError, tied: list[list[ValidationError]]) -> list[ValidationError]:
    """The faults of the nearest shapes: of one shape as they are; of several, those common to all once, and
    one fault per shape left (each missing a field, or each refusing one) as one fault naming those fields."""
    if len(tied) == 1:
        return tied[0]
    common = set.intersection(*({_key(f) for f in shape} for shape in tied))
    rest = [[f for f in shape if _key(f) not in common] for shape in tied]
    kinds = {str(f.validator) for shape in rest for f in shape}
    if not all(len(shape) == 1 for shape in rest) or len(kinds) != 1 or kinds - {"required", "additionalProperties"}:
        return tied[0]
    listed = list(error.schema.get("properties", {})) if isinstance(error.schema, dict) else []
    fields = sorted(dict.fromkeys(str(shape[0].path[-1]) for shape in rest if shape[0].path),
                    key=lambda name: listed.index(name) if name in listed else len(listed))
    if len(fields) < 2:
        return tied[0]
    named = " or ".join(fields)
    if kinds == {"required"}:
        message, hint = "none was sent: one of them is required", f"add one of: {', '.join(fields)}"
    else:
        message, hint = "only one of them may be sent", f"send one of {', '.join(fields)}, not several"
    either = ValidationError(message, validator=EITHER, validator_value=hint, instance=error.instance,
                             path=[*error.absolute_path, named])
    return [f for f in tied[0] if _key(f) in common] + [either]
