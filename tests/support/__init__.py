"""Shared test utilities (not a test module)."""
