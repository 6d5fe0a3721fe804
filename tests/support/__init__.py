"""Reusable test helpers shared by kforge's Python test suites."""
