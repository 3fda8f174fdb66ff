"""Notebook 15: sparse attention and sinks."""
