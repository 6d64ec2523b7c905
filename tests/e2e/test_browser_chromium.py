"""The memory browser at /ui in a real browser: Debian's chromium, headless, driven by Selenium
through its chromedriver, against the app served by uvicorn on 127.0.0.1.

One scenario as a person would go through it, mostly with the keyboard: sign in (a wrong
token first), search ("/" then type, Enter), read a memory's provenance, edit it and find the
new text, say it helped, read the skill it feeds and that skill's diff, forget the memory
from its confirmation page, see it gone, visit the overview. On every page: one <h1>, a
<main>, and a label for every form control. The browser's own network log proves that every
request it made went to the server under test (an accidental CDN fetch would fail anyway:
every host name but 127.0.0.1 resolves to nothing).

Screenshots of the search, a memory and a skill go to ULTRON_SCREENSHOTS when set (the docs'
images: ``ULTRON_SCREENSHOTS=docs/images``), else to the test's own temporary directory.
The HTTP-level checks of the same pages are in test_memory_browser.py.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import tempfile
import threading
import time
from pathlib import Path

import pytest

CHROMIUM = next((p for p in ("/usr/bin/chromium", shutil.which("chromium")) if p and os.path.exists(p)), None)
CHROMEDRIVER = next((p for p in ("/usr/bin/chromedriver", shutil.which("chromedriver")) if p and os.path.exists(p)),
                    None)
try:
    from selenium import webdriver
    from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import WebDriverWait
except ImportError:
    webdriver = None
if not (CHROMIUM and CHROMEDRIVER and webdriver):
    pytest.skip("no Chromium here: apt-get install chromium chromium-driver (Debian) to run the browser tests",
                allow_module_level=True)

import httpx  # noqa: E402
import sqlalchemy as sa  # noqa: E402
import uvicorn  # noqa: E402

from tests.e2e.test_forget_everywhere import SERVICES, failing_session, ingest, marker, pipeline  # noqa: E402
from ultron.api.app import create_app  # noqa: E402
from ultron.memory.service import Provenance  # noqa: E402

TOKEN = "chromium-test-token-0123456789"
WAIT = 20  # seconds for a page or an element

#: Memories a team might have uploaded, so the search page looks like a real store.
UPLOADS = [
    ("Docker build fails with 'no space left on device' on the CI runner: run docker system prune -af "
     "--volumes to drop the build cache, then rebuild.",
     "CI runner disk full during docker build", "docker system prune -af --volumes", ["docker", "ci", "disk"]),
    ("A container cannot reach Postgres on the Linux host through host.docker.internal: start it with "
     "--add-host=host.docker.internal:host-gateway.",
     "docker run on Linux, database on the host", "add the host-gateway mapping", ["docker", "networking"]),
    ("docker compose starts the api before the database accepts connections: give db a pg_isready "
     "healthcheck and make api depend on it with condition: service_healthy.",
     "compose stack, api crashes at startup", "depends_on with service_healthy", ["docker", "compose"]),
    ("Rerun only the tests that failed last time and stop at the first error: pytest --lf -x -q.",
     "a long pytest run with a few failures", "pytest --lf -x -q", ["pytest", "workflow"]),
    ("A session-scoped pytest fixture that opens a database connection must close it after its yield, "
     "or the test run hangs at exit.",
     "pytest hangs after the last test", "close the connection in the fixture's teardown", ["pytest", "fixtures"]),
    ("pytest -n auto with tests sharing one Postgres database gives flaky failures: give each worker its "
     "own database, named after the worker id.",
     "pytest-xdist with a shared database", "one database per xdist worker", ["pytest", "postgres"]),
    ("git rebase stops with conflicts in the lock file: regenerate it with uv lock instead of merging it "
     "by hand, then git add it and git rebase --continue.",
     "rebasing a branch that changed dependencies", "uv lock, then git rebase --continue", ["git", "rebase"]),
    ("Undo the last commit but keep its changes staged: git reset --soft HEAD~1.",
     "committed too early", "git reset --soft HEAD~1", ["git"]),
]

#: What each page must have for a keyboard or screen-reader user; returns the problems found.
PAGE_CHECK = """
const problems = [];
const h1 = document.querySelectorAll('h1').length;
if (h1 !== 1) problems.push(h1 + ' <h1> elements');
if (document.querySelectorAll('main').length !== 1) problems.push('no single <main>');
for (const el of document.querySelectorAll('input, select, textarea')) {
  if (el.type === 'hidden' || el.hidden) continue;
  const labelled = el.getAttribute('aria-label') || el.getAttribute('aria-labelledby')
    || (el.id && document.querySelector('label[for="' + CSS.escape(el.id) + '"]')) || el.closest('label');
  if (!labelled) problems.push('unlabelled ' + el.outerHTML.slice(0, 120));
}
return problems;
"""


def screenshot_dir(tmp_path: Path) -> Path:
    """ULTRON_SCREENSHOTS (README's and the docs' pictures: ``ULTRON_SCREENSHOTS=docs/images``),
    else the test's temporary directory."""
    wanted = os.environ.get("ULTRON_SCREENSHOTS")
    folder = Path(wanted) if wanted else tmp_path
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def browser():
    options = Options()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,900",
                "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
                "--no-proxy-server", "--no-first-run", "--disable-background-networking", "--disable-component-update",
                "--disable-sync", "--disable-default-apps", "--lang=en-US"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"performance": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()


@pytest.fixture
def svc(client):
    """The SDK on the shared test database, its ULTRON_HOME (with the inbox the sessions are
    ingested from) under a short path: the memory page shows it, and so does the screenshot."""
    from ultron.sdk import Ultron
    from ultron.settings import Settings

    home = Path(tempfile.mkdtemp(prefix="ultron-browser-"))
    yield Ultron(Settings.from_env(home=home, llm_provider="rules"), db=client.db)
    shutil.rmtree(home, ignore_errors=True)


@pytest.fixture
def served(svc):
    """The app served for real by uvicorn on 127.0.0.1 and a free port, in a thread."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(svc.settings, client=svc, token=TOKEN), host="127.0.0.1",
                                           port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, name="uvicorn-browser-test", daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            if httpx.get(f"{base}/health", timeout=2, trust_env=False).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not answer /health"
        time.sleep(0.1)
    yield base
    server.should_exit = True
    thread.join(timeout=15)


def seed(svc) -> dict[str, str]:
    """Nine sessions of one failure, each with a detail of its own (five make the skill, four more
    its version 1.1.0), then the uploads above. The billing session's detail is the word to
    search for; returns it, the skill's slug, the billing memory's id and its session file."""
    theme, word = "stale-lockfile-timeout", "ledger-fsync-stall"
    details = [word, "shard-drift", "cert-expiry", "heartbeat-lag", "font-fallback", "clock-skew", "dns-flap",
               "quota-exceeded", "thumbnail-oom"]
    sessions = {f"{s[0]}.jsonl": failing_session(theme, *s, extra=details[i]) for i, s in enumerate(SERVICES)}
    names = list(sessions)
    paths = ingest(svc, {n: sessions[n] for n in names[:5]}, "agent-ops")
    pipeline(svc)
    published = svc.run_skill_evolution()["published"]
    assert len(published) == 1, published
    with svc.db.engine.begin() as conn:        # the next version wins (as in test_memory_browser)
        conn.execute(sa.text("UPDATE skills SET score = 0.01"))
    ingest(svc, {n: sessions[n] for n in names[5:]}, "agent-ops")
    pipeline(svc)
    assert [p["version"] for p in svc.run_skill_evolution()["published"]] == ["1.1.0"]
    for content, context, resolution, tags in UPLOADS:
        svc.memory.upload_memory(content, context, resolution, tags, provenance=Provenance(agent_id="agent-dev"))
    with svc.db.engine.connect() as conn:
        ids = conn.execute(sa.text("SELECT id FROM memory_records WHERE session_file = :f"),
                           {"f": paths["billing.jsonl"]}).scalars().all()
    assert len(ids) == 1, ids
    return {"word": word, "slug": published[0]["slug"], "memory_id": ids[0], "session": paths["billing.jsonl"]}


class Page:
    """The browser with the waits and checks every step needs. What a page shows is read with
    JavaScript in the page, not through element references: right after a navigation
    chromedriver may still resolve a reference against the page before ("Node with given id
    does not belong to the document"). Only clicks and keys go through WebDriver's input."""

    def __init__(self, driver, base: str, shots: Path) -> None:
        self.driver, self.base, self.shots = driver, base, shots

    def wait(self, condition, what: str):
        return WebDriverWait(self.driver, WAIT, ignored_exceptions=(WebDriverException,)).until(
            condition, f"waited {WAIT}s for {what}")

    def js(self, script: str, *args):
        return self.driver.execute_script(script, *args)

    def loaded(self) -> None:
        self.wait(lambda d: d.execute_script("return document.readyState") == "complete", "the page to load")
        problems = self.js(PAGE_CHECK)
        assert not problems, (self.driver.current_url, problems)

    def go(self, path: str) -> None:
        self.driver.get(self.base + path)
        self.loaded()

    def leave_by(self, action) -> None:
        """Do what navigates (a click, Enter in a form) and wait for the next page: a new
        document, which has not got the mark this one is given first."""
        self.js("window.__leaving = true")
        action()
        self.wait(lambda d: d.execute_script("return window.__leaving !== true"), "the next page")
        self.loaded()

    def click(self, css: str) -> None:
        def press():
            for attempt in range(3):
                try:
                    self.driver.find_element(By.CSS_SELECTOR, css).click()
                    return
                except (StaleElementReferenceException, WebDriverException):
                    if attempt == 2 or self.js("return window.__leaving !== true"):
                        raise      # not a stale reference: the click happened, or keeps failing
                    time.sleep(0.2)
        assert self.count(css), f"nothing to click at {css} on {self.driver.current_url}"
        self.leave_by(press)

    def keys(self, *keys: str) -> None:
        """Keys to whatever has the focus, as a person types them."""
        ActionChains(self.driver).send_keys(*keys).perform()

    def type_into(self, element_id: str, text: str) -> None:
        """Replace a field's text by typing, as a person would after selecting it all."""
        self.js("const el = document.getElementById(arguments[0]); el.focus(); el.select();", element_id)
        self.keys(text)

    def focused(self) -> str:
        return self.js("return document.activeElement ? document.activeElement.id : ''")

    def count(self, css: str) -> int:
        return self.js("return document.querySelectorAll(arguments[0]).length", css)

    def text(self, css: str) -> str:
        found = self.js("const el = document.querySelector(arguments[0]); return el ? el.innerText : null", css)
        assert found is not None, f"no {css} on {self.driver.current_url}"
        return found

    def attr(self, css: str, name: str) -> str | None:
        return self.js("const el = document.querySelector(arguments[0]); return el && el.getAttribute(arguments[1])",
                       css, name)

    def main_text(self) -> str:
        return self.text("main")

    def html(self) -> str:
        return self.js("return document.documentElement.outerHTML")

    def search_by_keyboard(self, words: str) -> None:
        if not self.count("#q"):   # "/" on a page without the search box goes to the list, focused
            self.leave_by(lambda: self.keys("/"))
            assert self.driver.current_url == f"{self.base}/ui/memories#q"
        else:
            self.keys("/")
        assert self.focused() == "q", "'/' did not focus the search box"
        self.leave_by(lambda: self.keys(words, Keys.ENTER))

    def result_ids(self) -> list[str]:
        return self.js("return [...document.querySelectorAll('a.title')].map(a => a.getAttribute('href')"
                       ".split('/').pop())")

    def screenshot(self, name: str, max_height: int = 900) -> Path:
        """The page at 1280 wide, as tall as it is up to ``max_height``, from its top."""
        d = self.driver
        d.execute_script("window.scrollTo(0, 0)")
        for _ in range(2):  # the window's own height is not quite the page's: measure, then correct
            missing = d.execute_script("return document.documentElement.scrollHeight - window.innerHeight")
            d.set_window_size(1280, max(300, min(max_height, d.get_window_size()["height"] + missing)))
        path = self.shots / name
        assert d.save_screenshot(str(path)), path
        d.set_window_size(1280, 900)
        return path

    def requested_urls(self) -> list[str]:
        """Every URL the pages requested (Network.requestWillBeSent), since the last call."""
        urls = []
        for entry in self.driver.get_log("performance"):
            message = json.loads(entry["message"])["message"]
            if message.get("method") == "Network.requestWillBeSent":
                urls.append(message["params"]["request"]["url"])
        return urls


def test_the_browser_view_in_chromium(browser, served, svc, tmp_path):
    seeded = seed(svc)
    word, slug, memory_id = seeded["word"], seeded["slug"], seeded["memory_id"]
    page = Page(browser, served, screenshot_dir(tmp_path))
    browser.delete_all_cookies()
    page.requested_urls()  # drop what an earlier test's pages requested

    # Signing in with the keyboard alone: the focus starts in the token field.
    page.go("/ui/memories")
    assert browser.current_url == f"{served}/ui/signin?next=%2Fui%2Fmemories"
    assert page.focused() == "token"
    page.leave_by(lambda: page.keys("not-the-token", Keys.ENTER))
    assert "does not open this server" in page.text("#signin-error") and page.attr("#signin-error", "role") == "alert"
    assert page.focused() == "token" and page.attr("#token", "aria-invalid") == "true"
    page.leave_by(lambda: page.keys(TOKEN, Keys.ENTER))
    assert browser.current_url == f"{served}/ui/memories"
    assert "memories, newest first" in page.main_text()

    # Search with the keyboard: "/" focuses the box from anywhere.
    page.search_by_keyboard("docker")
    assert "/ui/memories?q=docker" in browser.current_url
    titles = page.js("return [...document.querySelectorAll('a.title')].map(a => a.innerText)")
    assert len(titles) >= 3 and sum("docker" in t.lower() for t in titles[:3]) == 3, titles
    page.screenshot("browser-search.png", max_height=1400)

    page.search_by_keyboard(word)
    assert page.result_ids()[0] == memory_id
    page.click(f'a.title[href="/ui/memories/{memory_id}"]')

    # Its provenance: the session it came from, its lines and the trajectory score.
    text = page.main_text()
    assert seeded["session"] in text and "trajectory score" in text
    assert f"{word} raised by billing on port 8081" in text      # a line of the session itself
    assert page.js("return document.querySelector('ol.session').getBoundingClientRect().height") > 100
    page.screenshot("browser-memory.png", max_height=2600)

    # Edit: the new text is what the search then finds.
    edited = marker("edited")
    page.click("#edit-link")
    assert page.text("h1") == "Edit memory"
    page.type_into("content", f"Start the billing service with --port 8091 when it fails with {word}; {edited}.")
    page.type_into("tags", "billing, startup")
    page.click("#save")
    assert browser.current_url.endswith(f"/ui/memories/{memory_id}?saved=1")
    assert edited in page.text("#memory-content")
    assert "Saved." in page.main_text() and "Before the edit of" in page.main_text()
    page.search_by_keyboard(edited)
    assert page.result_ids() == [memory_id]
    page.click(f'a.title[href="/ui/memories/{memory_id}"]')

    # Feedback.
    assert "0 helped" in page.main_text()
    page.click("#helped")
    assert "recorded as helpful" in page.main_text() and "1 helped" in page.main_text()

    # The skill it feeds, its versions and the diff between them.
    page.click(f'a[href="/ui/skills/{slug}"]')
    assert page.count(f'#skill-md a[href="/ui/memories/{memory_id}"]')     # the memory is evidence of a step
    assert "1.1.0" in page.main_text() and "1.0.0" in page.main_text()
    page.click("a.diff-link")
    assert page.count("#diff span.add") and page.count("#diff span.del")
    assert "Changes from 1.0.0 to 1.1.0" in page.main_text()
    page.screenshot("browser-skill.png", max_height=1300)

    # Forget it from its confirmation page, which names the skill built from it.
    page.go(f"/ui/memories/{memory_id}")
    page.click("#forget-link")
    cascade = page.text("#cascade")
    assert f"skill {slug}" in cascade and "deleted" in cascade
    page.click("#confirm-forget")
    assert f"Memory {memory_id} was forgotten" in page.main_text()
    page.search_by_keyboard(edited)
    assert memory_id not in page.result_ids()
    page.go(f"/ui/memories/{memory_id}")
    assert page.text("h1").startswith("404")
    page.go(f"/ui/skills/{slug}")
    assert memory_id not in page.html() and edited not in page.html()

    # The other sections, by the navigation links.
    page.click('nav[aria-label="Sections"] a[href="/ui/skills"]')
    assert page.count(f'a.title[href="/ui/skills/{slug}"]') == 1
    page.click('nav[aria-label="Sections"] a[href="/ui/overview"]')
    assert page.text("h1") == "Overview"
    assert "Tiers" in page.main_text() and "New memories by week" in page.main_text()
    # The first Tab reaches "Skip to content", which moves the focus to the page's <main>.
    page.keys(Keys.TAB)
    assert page.js("return document.activeElement.textContent") == "Skip to content"
    page.keys(Keys.ENTER)
    page.wait(lambda d: page.focused() == "main", "the focus on <main>")

    # Signing out ends the session: pages ask for the token again.
    page.click("form.signout button")
    assert browser.current_url == f"{served}/ui/signin"
    page.go("/ui/overview")
    assert browser.current_url == f"{served}/ui/signin?next=%2Fui%2Foverview"

    # Nothing left the machine: every request went to the server under test.
    urls = page.requested_urls()
    print("\nrequested by the browser:\n  " + "\n  ".join(dict.fromkeys(urls)))
    assert any(u.startswith(f"{served}/ui/static/ultron.css") for u in urls)
    foreign = [u for u in urls if not (u.startswith(served + "/") or u == served or u.startswith("data:")
                                       or u == "about:blank")]
    assert not foreign, foreign
