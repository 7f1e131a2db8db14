"""The `threadline` command line: run the system, operate it, review from a terminal."""
