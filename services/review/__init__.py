"""The review service: human decisions on proposals, applied atomically to the canonical ledger."""
