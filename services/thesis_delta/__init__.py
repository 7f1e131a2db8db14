"""The thesis-delta service: Prism claim-delta previews and commits, and their human review."""
