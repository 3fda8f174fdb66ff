"""The course site as the tests see it: built once per test run, and read as a reader would.

The site is built by ``tools.site.build`` (Sphinx in the docs environment of ``tools.docs_env``,
made once under ``build/`` and reused) into ``build/test-site/``, where it can be looked at.
Test processes running side by side (pytest-xdist) build it once between them: the first builds
it under a file lock and signs it with the run's id, the others find it signed.
"""

from __future__ import annotations

import functools
import os
import re
import uuid
from html.parser import HTMLParser
from pathlib import Path

from conftest import ROOT
from filelock import FileLock

from tools import site

OUT = ROOT / "build" / "test-site"


# pytest-xdist gives every worker of one run the same id; a run without it has its own.
RUN = os.environ.get("PYTEST_XDIST_TESTRUNUID") or uuid.uuid4().hex


@functools.cache
def built_site() -> Path:
    """The site built from this working tree, once per test run."""
    signature = OUT.with_name(f"{OUT.name}.run")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(OUT.with_name(f"{OUT.name}.lock")):
        if not signature.exists() or signature.read_text() != RUN:
            signature.unlink(missing_ok=True)
            site.build(OUT)
            signature.write_text(RUN)
    return OUT


def squash(text: str) -> str:
    """Whitespace runs as one space, so code and prose compare across line breaks."""
    return " ".join(text.split())


class Page(HTMLParser):
    """One built page: its tags' attributes, and its text split into what a reader sees and
    what sits inside a closed ``<details>`` (seen only after a click)."""

    TAGS = ("img", "script", "link", "a", "details", "source", "iframe")

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.tags: dict[str, list[dict]] = {tag: [] for tag in self.TAGS}
        self.closed_details = 0  # how many closed <details> enclose the current position
        self.stack: list[bool] = []  # for each open <details>: is it closed?
        self.in_script = False
        self.visible: list[str] = []
        self.folded: list[str] = []
        self.feed(text)
        self.close()

    def handle_starttag(self, tag, attrs):
        if tag in self.tags:
            self.tags[tag].append(dict(attrs))
        if tag == "details":
            closed = "open" not in dict(attrs)
            self.stack.append(closed)
            self.closed_details += closed
        self.in_script = tag in ("script", "style")

    def handle_endtag(self, tag):
        if tag == "details" and self.stack:
            self.closed_details -= self.stack.pop()
        if tag in ("script", "style"):
            self.in_script = False

    def handle_data(self, data):
        if not self.in_script:
            (self.folded if self.closed_details else self.visible).append(data)

    @property
    def visible_text(self) -> str:
        return squash("".join(self.visible))

    @property
    def folded_text(self) -> str:
        return squash("".join(self.folded))


@functools.cache
def page(name: str) -> Page:
    """The parsed page ``name`` ("index", "02_scaled_dot_product_attention", ...)."""
    return Page((built_site() / f"{name}.html").read_text(encoding="utf-8"))


def local_target(href: str) -> str | None:
    """The file a relative link or source points to, or None for the web, data and anchors."""
    if not href or href.startswith("#") or re.match(r"[a-z][a-z0-9+.-]*:", href):
        return None
    return href.split("#")[0].split("?")[0] or None
