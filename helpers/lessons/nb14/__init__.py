"""Notebook 14: automatic prefix caching and chunked prefill."""
