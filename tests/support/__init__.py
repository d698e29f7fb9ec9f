"""Helpers shared by the test suites: a real host process and real clients."""
