"""The benchmarks behind `threadline bench stage|scale|agents|events` (figures, not pass/fail)."""
