"""The classroom kit: what every lesson uses around the library — the explorer toolkit,
``check()`` and its registry, plots, the environment, measuring, shared toy data and the
library's argument checks. Nothing here imports a lesson."""
