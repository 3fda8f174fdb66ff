"""The course site in headless Chromium, as a learner uses it, with no network.

The built site (``site_tools.built_site``) is served on 127.0.0.1 at a free port. Every request
the browser makes is intercepted: one that leaves the site is recorded and refused, and each
test ends by asserting that there was none and that every file of the site that a page asked
for was there. Screenshots land in ``test-artifacts/site/``.

In CI (``CI=true``) these tests must run; elsewhere they are skipped without Chromium.
"""

from __future__ import annotations

import functools
import http.server
import re
import threading
from collections import Counter
from pathlib import Path

import pytest
from browser_tools import axe_script, free_port, why_no_browser
from conftest import NOTEBOOKS, ROOT
from notebook_tools import read, solutions
from site_tools import built_site

from tools.syllabus import read_lesson

ARTIFACTS = ROOT / "test-artifacts" / "site"
REASON = why_no_browser()  # in CI, a missing browser is an error, not a skip
pytestmark = [
    pytest.mark.skipif(REASON is not None, reason=f"site browser tests skipped: {REASON}"),
    pytest.mark.skipif(len(NOTEBOOKS) < 2, reason="previous/next needs two notebooks"),
]
DESKTOP = {"width": 1366, "height": 900}
PHONE = {"width": 390, "height": 844}
WORD = re.compile(r"[a-z]{9,}")


class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def server():
    """The built site, served on 127.0.0.1; yields its base URL."""
    handler = functools.partial(Quiet, directory=str(built_site()))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


class Requests:
    """What the pages of one browser context asked for, sorted into the site's and the rest."""

    def __init__(self, base: str):
        self.base = base
        self.remote: list[str] = []
        self.missing: list[str] = []
        self.errors: list[str] = []

    def route(self, route):
        url = route.request.url
        if url.startswith(self.base + "/") or url.startswith(("data:", "blob:")):
            route.continue_()
        else:
            self.remote.append(url)
            route.abort()

    def response(self, response):
        if response.url.startswith(self.base) and response.status >= 400:
            self.missing.append(f"{response.status} {response.url}")


@pytest.fixture
def open_page(browser, server):
    """``open_page(path, **context options)``: a page of the site in a fresh browser context.

    At the end: no request left 127.0.0.1, none of the site's files was missing, and no page
    had a JavaScript error.
    """
    contexts, requests = [], Requests(server)

    def opener(path: str, **options):
        context = browser.new_context(**{"viewport": DESKTOP, **options})
        context.route("**/*", requests.route)
        context.on("response", requests.response)
        contexts.append(context)
        page = context.new_page()
        page.on("pageerror", lambda error: requests.errors.append(str(error)))
        page.goto(f"{server}/{path}")
        page.wait_for_load_state("networkidle")
        return page

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    yield opener
    for context in contexts:
        context.close()
    assert requests.remote == [], f"requests left 127.0.0.1: {requests.remote}"
    assert requests.missing == [], f"the site lacks files its pages asked for: {requests.missing}"
    assert requests.errors == [], f"JavaScript errors: {requests.errors}"


def shot(page, name: str, full_page: bool = False) -> None:
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=full_page)


def prose_words(path: Path) -> Counter:
    """The long words of a notebook's prose (no code, links or solutions), with counts."""
    text = " ".join(c.source for c in read(path).cells if c.cell_type == "markdown")
    text = re.sub(r"<details>.*?</details>|```.*?```|`[^`]*`|\]\([^)]*\)", " ", text, flags=re.S)
    return Counter(WORD.findall(text.lower()))


def word_of_one_notebook() -> tuple[str, Path]:
    """A word of one notebook's prose that no other notebook and no guide contains at all."""
    everything = {path: " ".join(c.source for c in read(path).cells).lower() for path in NOTEBOOKS}
    guides = " ".join(
        (ROOT / name).read_text(encoding="utf-8").lower() for name in ("TEACHING.md",)
    )
    for path in reversed(NOTEBOOKS):
        others = guides + " ".join(text for p, text in everything.items() if p != path)
        own = [(-n, w) for w, n in prose_words(path).items() if w not in others]
        if own:
            return min(own)[1], path
    raise AssertionError("no notebook has a word of its own to search for")


def test_search_finds_a_word_of_one_notebook_and_leads_to_its_page(open_page):
    word, path = word_of_one_notebook()
    page = open_page("index.html")
    shot(page, "index-light")
    page.locator(".search-button__button:visible").first.click()
    box = page.locator("form.bd-search input[name='q']:visible").first
    box.fill(word)
    box.press("Enter")
    page.wait_for_url(re.compile(r"search\.html\?q="))
    results = page.locator("#search-results ul.search li a")
    results.first.wait_for(timeout=15_000)
    shot(page, "search")
    hit = page.locator(f"#search-results ul.search li a[href^='{path.stem}.html']")
    assert hit.count() >= 1, (
        f"searching {word!r} does not list {path.stem}: {results.all_inner_texts()}"
    )
    hit.first.click()
    page.wait_for_url(re.compile(rf"/{path.stem}\.html"))
    assert read_lesson(path).title in page.locator("h1").first.inner_text()
    assert page.get_by_text(re.compile(word, re.I)).count() >= 1


def test_a_solution_starts_closed_and_opens_on_click(open_page):
    path = next(p for p in NOTEBOOKS if solutions(read(p)))
    page = open_page(f"{path.stem}.html")
    solution = page.locator("details:has(> summary:text-is('Solution'))").first
    code = solution.locator("pre").first
    assert code.count() == 1, "the Solution box holds no code"
    solution.scroll_into_view_if_needed()
    page.mouse.wheel(0, -200)
    assert solution.evaluate("d => d.open") is False, "a solution starts open"
    assert not code.is_visible(), "the solution's code shows before a click"
    shot(page, "solution-closed")
    solution.locator("summary").click()
    assert solution.evaluate("d => d.open") is True
    assert code.is_visible() and "check(" in code.inner_text()
    shot(page, "solution-open")


def test_next_and_previous_walk_the_lessons_in_reading_order(open_page):
    first, second = NOTEBOOKS[0].stem, NOTEBOOKS[1].stem
    page = open_page("index.html")
    page.locator("a.right-next").click()
    page.wait_for_url(re.compile(rf"/{first}\.html"))
    page.locator("a.right-next").click()
    page.wait_for_url(re.compile(rf"/{second}\.html"))
    assert read_lesson(NOTEBOOKS[1]).title in page.locator("h1").first.inner_text()
    page.locator("a.left-prev").click()
    page.wait_for_url(re.compile(rf"/{first}\.html"))
    page.locator("a.right-next").scroll_into_view_if_needed()
    shot(page, "previous-next")


def test_dark_mode_follows_the_system_and_every_explorer_shows_its_picture(open_page):
    for path in NOTEBOOKS:
        page = open_page(f"{path.stem}.html", color_scheme="dark")
        assert page.locator("html").get_attribute("data-theme") == "dark"
        explorers = page.locator(".course-widget:has(img.course-widget-image)")
        assert explorers.count() >= 1, f"{path.stem}.html shows no explorer's saved picture"
        explorer = explorers.first
        explorer.scroll_into_view_if_needed()
        assert explorer.locator("img").evaluate("i => i.complete && i.naturalWidth > 0")
        assert "live in Jupyter" in explorer.inner_text()
        if path == NOTEBOOKS[min(2, len(NOTEBOOKS) - 1)]:
            shot(page, "explorer-dark")
        page.close()


def test_phone_width_hides_the_sidebar_behind_a_menu_button(open_page):
    page = open_page(f"{NOTEBOOKS[0].stem}.html", viewport=PHONE, is_mobile=True, has_touch=True)
    lesson = page.locator(f"a.reference.internal[href='{NOTEBOOKS[1].stem}.html']")
    assert lesson.filter(visible=True).count() == 0, "the sidebar covers a phone screen"
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= PHONE["width"], f"the page is {width} px wide on a {PHONE['width']} px phone"
    shot(page, "phone")
    page.locator("button.primary-toggle:visible").first.click()
    shown = lesson.filter(visible=True).first
    shown.wait_for(timeout=5_000)
    inside = (
        "a => { const r = a.getBoundingClientRect(); return r.left >= 0 && r.right <= innerWidth; }"
    )
    page.wait_for_function(inside, arg=shown.element_handle(), timeout=5_000)  # slid in
    shot(page, "phone-menu")


# What hides content or blurs it, measured in the page: the page wider than the screen, a code
# or output block whose lines run past its box, a picture drawn larger than its pixels.
LAYOUT = """() => {
  const hidden = [], stretched = [];
  for (const pre of document.querySelectorAll('.bd-article pre')) {
    if (pre.offsetParent && pre.scrollWidth > pre.clientWidth + 1)
      hidden.push(pre.textContent.trim().slice(0, 60));
  }
  for (const img of document.querySelectorAll('.bd-article img')) {
    const width = img.getBoundingClientRect().width;
    if (img.offsetParent && img.naturalWidth && width > img.naturalWidth + 1)
      stretched.push(`${img.alt.slice(0, 50)}: ${Math.round(width)} px for ${img.naturalWidth}`);
  }
  return {width: document.documentElement.scrollWidth, hidden, stretched};
}"""
SIZES = {"desktop": {"viewport": DESKTOP}, "phone": {"viewport": PHONE, "is_mobile": True}}


@pytest.mark.parametrize("size", SIZES)
def test_every_page_fits_the_screen_hides_no_line_and_stretches_no_picture(open_page, size):
    pages = sorted(p.name for p in built_site().glob("*.html"))
    assert {f"{p.stem}.html" for p in NOTEBOOKS} <= set(pages)
    width = SIZES[size]["viewport"]["width"]
    faults = []
    for name in pages:
        page = open_page(name, **SIZES[size])
        found = page.evaluate(LAYOUT)
        if found["width"] > width:
            faults.append(f"{name} is {found['width']} px wide on a {width} px screen")
        faults += [f"{name}: a block hides part of its lines: {t!r}" for t in found["hidden"]]
        faults += [f"{name}: a stretched picture: {t}" for t in found["stretched"]]
        if name == f"{NOTEBOOKS[min(8, len(NOTEBOOKS) - 1)].stem}.html":
            page.evaluate("window.scrollTo(0, document.body.scrollHeight / 3)")
            shot(page, f"lesson-{size}")
        page.context.close()
    assert faults == [], "\n".join(faults)


# Every picture of a lesson's outputs (figures and explorers), at its rendered size in CSS pixels
# and its own pixels' size.
PICTURE_SIZES = """() => [...document.querySelectorAll('.bd-article .cell_output img')]
  .filter(i => i.offsetParent && i.naturalWidth)
  .map(i => ({alt: i.alt.slice(0, 50), shown: i.getBoundingClientRect().width,
              natural: i.naturalWidth, attribute: Number(i.getAttribute('width'))}))"""


def test_on_a_high_density_screen_every_picture_has_a_pixel_per_screen_pixel(open_page):
    """At a device pixel ratio of 2, each figure and explorer picture of a lesson is shown at
    its displayed size (its width attribute), with twice as many pixels: sharp, not larger."""
    path = NOTEBOOKS[min(2, len(NOTEBOOKS) - 1)]
    page = open_page(f"{path.stem}.html", device_scale_factor=2)
    assert page.evaluate("devicePixelRatio") == 2
    sizes = page.evaluate(PICTURE_SIZES)
    assert sizes, f"{path.stem}.html shows no picture"
    for size in sizes:
        assert size["attribute"] and abs(size["shown"] - size["attribute"]) <= 1, size
        assert size["natural"] in (2 * size["attribute"], 2 * size["attribute"] + 1), size
    shot(page, "pictures-at-2x")


def test_a_shrunk_explorer_opens_full_size_on_click(open_page):
    for path in reversed(NOTEBOOKS):  # the later lessons have the widest explorers
        page = open_page(f"{path.stem}.html", viewport=PHONE)
        zoomable = page.locator("img.course-zoomable")
        if zoomable.count():
            break
        page.context.close()
    else:
        raise AssertionError("no picture is shrunk on a phone, so none can be opened")
    picture = zoomable.first
    picture.scroll_into_view_if_needed()
    # Its full size: its width attribute (it has twice the pixels), else its pixels' width.
    natural = picture.evaluate("i => Number(i.getAttribute('width')) || i.naturalWidth")
    picture.click()
    full = page.locator("dialog.course-zoom[open] img")
    full.wait_for(timeout=5_000)
    assert full.evaluate("i => i.getBoundingClientRect().width") == natural
    shot(page, "picture-full-size")
    page.keyboard.press("Escape")
    assert page.locator("dialog.course-zoom").count() == 0


def test_a_lesson_has_copy_buttons_and_downloads_its_committed_notebook(open_page):
    path = NOTEBOOKS[min(2, len(NOTEBOOKS) - 1)]
    page = open_page(f"{path.stem}.html")
    code = page.locator(".cell_input div.highlight > pre")
    copy = page.locator(".cell_input button.copybtn")
    assert code.count() >= 1 and copy.count() == code.count(), (
        f"{code.count()} code cells, {copy.count()} copy buttons"
    )
    assert page.locator(".output button.copybtn").count() == 0, "outputs get no copy button"
    download = page.locator(f"a[href='_sources/{path.name}']")
    assert download.count() == 1, "no download-.ipynb button"
    response = page.request.get(download.first.evaluate("a => a.href"))
    assert response.ok and response.body() == path.read_bytes(), "not the committed notebook"
    favicon = page.locator("link[rel='icon']").first.get_attribute("href")
    assert favicon and page.request.get(f"{page.url.rsplit('/', 1)[0]}/{favicon}").ok


# The pages axe checks: the home page, search results with hits and the guide's tables in
# every size and scheme; a lesson with explorers, figures, exercises and math, opened from a
# search (hits highlighted), at a desktop's size in light mode and a phone's in dark (each size
# and each scheme once: a lesson takes axe as long as the three others together).
AXE_PAGES = ["index.html", "search.html?q=attention", "TEACHING.html"]
LESSON_AXED = {("desktop", "light"), ("phone", "dark")}
AXE_IMPACTS = ("critical", "serious")
# Code blocks are left out of axe's view: their colours are the theme's accessible Pygments
# styles, and axe checks the contrast of every token (three times as long). The rest of the
# page is checked by every rule.
# No preload: axe would fetch the theme's stylesheets again, resolving their @import wrongly.
AXE_RUN = """async () => (await axe.run({exclude: [['div.highlight pre']]},
    {resultTypes: ['violations'], preload: false})).violations
  .map(v => ({id: v.id, impact: v.impact, nodes: v.nodes.map(n => n.target.join(' '))}))"""


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("size", SIZES)
def test_axe_finds_no_critical_or_serious_violation(open_page, size, scheme):
    script, reason = axe_script(ROOT / "build")
    if script is None:
        pytest.skip(f"axe-core: {reason}")
    lesson = f"{NOTEBOOKS[min(2, len(NOTEBOOKS) - 1)].stem}.html?highlight=attention"
    faults = []
    for name in [*AXE_PAGES, lesson] if (size, scheme) in LESSON_AXED else AXE_PAGES:
        page = open_page(name, color_scheme=scheme, **SIZES[size])
        if name.startswith("search"):
            page.locator("#search-results ul.search li").first.wait_for(timeout=15_000)
        page.add_script_tag(path=str(script))
        for violation in page.evaluate(AXE_RUN):
            if violation["impact"] in AXE_IMPACTS:
                faults.append(
                    f"{name}: {violation['impact']} {violation['id']}: {violation['nodes'][:3]}"
                )
        page.context.close()
    assert faults == [], "\n".join(faults)
