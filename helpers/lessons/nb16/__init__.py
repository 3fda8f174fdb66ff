"""Notebook 16: linear attention and hybrids."""
