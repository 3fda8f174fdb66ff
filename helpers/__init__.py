"""Helpers for the course *Attention, Head by Head*.

Each module holds one concern; the notebooks build these pieces in front of the learner and
then import them from here.
"""

__version__ = "0.1.0"
