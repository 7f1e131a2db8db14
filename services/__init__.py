"""The Threadline services, one package each, plus the operator CLI."""
