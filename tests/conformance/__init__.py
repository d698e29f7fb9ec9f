"""Cross-language conformance suite for the stdio link (see README.md)."""
