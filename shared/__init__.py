"""Code every Threadline service shares: settings, logging, message contracts, subjects, tables."""
