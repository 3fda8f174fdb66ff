"""The verdict marks on the site, drawn without an emoji font.

The lessons' checks print ✅, ❌ and ⏳ (``helpers/kit``). A machine without an emoji font shows
them as empty boxes. After Sphinx, :func:`wrap_marks` puts each one in the built pages in a
``<span class="course-mark …" role="img" aria-label="passed">``; ``docs/_static/course.css``
draws the span as a small picture (an SVG inside the stylesheet, so no font and no request)
and hides the character itself, which stays in the page for copying and searching.
"""

from __future__ import annotations

import re

# character: (what a screen reader says, the class course.css draws it with)
MARKS = {
    "✅": ("passed", "course-mark-pass"),
    "❌": ("failed", "course-mark-fail"),
    "⏳": ("not done yet", "course-mark-wait"),
}
MARK = re.compile(f"[{''.join(MARKS)}]\ufe0f?")
# What is not text of the page: tags (their attributes), scripts, styles, the window title.
NOT_TEXT = re.compile(
    r"(<script\b.*?</script>|<style\b.*?</style>|<title>.*?</title>|<[^>]*>)", re.S | re.I
)


def _span(match: re.Match) -> str:
    label, kind = MARKS[match.group(0)[0]]
    return (
        f'<span class="course-mark {kind}" role="img" aria-label="{label}">{match.group(0)}</span>'
    )


def wrap_marks(page: str) -> str:
    """``page`` (HTML) with every verdict mark in its text wrapped in its span."""
    parts = NOT_TEXT.split(page)  # text at even places, what is not text at odd ones
    return "".join(part if i % 2 else MARK.sub(_span, part) for i, part in enumerate(parts))
