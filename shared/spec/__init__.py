"""The MCP tool contract: the spec files verbatim (tools.py) and calls validated against them (validation.py)."""

from shared.spec.tools import EXTENSION_FILES, SPEC_DIR, SPEC_FILES, ToolSpec, all_tools, spec_tools
from shared.spec.validation import (
    NUL_HINT,
    ArgumentError,
    ToolValidator,
    ecma_regex,
    ecma_search,
    validate_arguments,
)

__all__ = [
    "EXTENSION_FILES", "NUL_HINT", "SPEC_DIR", "SPEC_FILES", "ArgumentError", "ToolSpec", "ToolValidator",
    "all_tools", "ecma_regex", "ecma_search", "spec_tools", "validate_arguments",
]
