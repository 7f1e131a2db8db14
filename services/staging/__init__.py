"""The staging service: checks agents' stage_* calls against the canonical ledger and stores proposals."""
