"""The review page in a real browser: Debian's chromium, headless, driven by Selenium (one per module).

The demo's thread (the real pipeline's rows) is checked against `incident-memory show`, a Loki pattern
is followed to its raw lines and counted, and a thread full of script, `javascript:` and `onerror=`
payloads is loaded without running any of them. Screenshots go to docs/ (linked from README.md).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from deploy.local import browser as local_browser
from deploy.local import loopback_http
from deploy.local.review_threads import SENTINEL, hostile_thread
from services.runtime.errors import UserFacingError

from .conftest import ROOT, DemoThread

pytestmark = pytest.mark.browser
DOCS = ROOT / "docs"


@pytest.fixture(scope="module")
def chrome() -> Iterator[Any]:
    try:
        local_browser.ensure()
    except UserFacingError as exc:
        pytest.skip(f"chromium cannot be installed here: {exc}")
    driver = local_browser.driver()
    try:
        yield driver
    finally:
        driver.quit()


def _shot(chrome: Any, name: str) -> Path:
    path = DOCS / name
    chrome.save_screenshot(str(path))
    return path


def _show_table(demo: DemoThread) -> list[list[str]]:
    done = subprocess.run(
        [sys.executable, "-m", "services.cli", "show", demo.thread_ts, "--schema", demo.schema],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    lines = done.stdout.splitlines()
    rows = [line for line in lines[2:] if line.strip() and not line.startswith("-")]
    return [[line[0:4].strip(), line[6:9].strip(), line[11:16].strip(), line[18:70].strip(),
             line[72:80].strip(), line[82:92].strip()] for line in rows]  # fmt: skip


def test_the_demos_thread_is_the_table_show_prints(
    chrome: Any, demo_thread: DemoThread, serve_schema
) -> None:
    from selenium.webdriver.common.by import By

    with serve_schema(demo_thread.schema) as served:
        chrome.get(f"{served.url}/threads/{demo_thread.thread_ts}")
        page = []
        for tr in chrome.find_elements(By.CSS_SELECTOR, "#rows tbody tr"):
            cells = [td.text for td in tr.find_elements(By.TAG_NAME, "td")]
            what = tr.find_element(By.CSS_SELECTOR, "td.what a").text
            page.append([cells[0], cells[1], cells[2], what, cells[4], cells[5]])
        totals = [td.text for td in chrome.find_elements(By.CSS_SELECTOR, "#totals td")]
        _shot(chrome, "review-thread.png")
    shown = _show_table(demo_thread)
    expected_rows, expected_total = shown[:-1], shown[-1]
    assert len(page) == len(expected_rows) == 21  # the seed's 20 and the recall row
    for got, want in zip(page, expected_rows, strict=True):
        assert got[:3] == want[:3] and got[4:] == want[4:], (got, want)
        clipped = got[3] if len(got[3]) <= 52 else got[3][:51] + "…"
        assert clipped == want[3]
    assert totals[3:6] == [expected_total[3], expected_total[4], expected_total[5]]


def test_a_loki_pattern_leads_to_exactly_its_raw_lines(
    chrome: Any, demo_thread: DemoThread, serve_schema
) -> None:
    from selenium.webdriver.common.by import By

    with serve_schema(demo_thread.schema) as served:
        chrome.get(f"{served.url}/threads/{demo_thread.thread_ts}")
        chrome.find_element(By.XPATH, "//td[@class='what']/a[starts-with(text(), 'query_loki')]").click()
        assert chrome.find_element(By.ID, "raw-total").get_attribute("data-total") == "412"
        assert (
            len(chrome.find_elements(By.CSS_SELECTOR, "li.raw-line")) == 200
        )  # one page, never the whole raw
        _shot(chrome, "review-raw-beside-compact.png")
        links = chrome.find_elements(By.CSS_SELECTOR, "a.pattern")
        assert len(links) >= 2
        stated = int(links[0].get_attribute("data-count"))
        words = links[0].text
        links[0].click()
        count = chrome.find_element(By.ID, "pattern-count")
        lines = chrome.find_elements(By.CSS_SELECTOR, "li.raw-line")
        _shot(chrome, "review-pattern-lines.png")
    assert stated == 198 and words.startswith("198×")
    assert count.get_attribute("data-stated") == count.get_attribute("data-found") == "198"
    assert len(lines) == min(198, 200)
    assert all("JS heap out of memory" in line.text for line in lines)


def test_hostile_content_is_shown_and_never_run(
    chrome: Any, serve_schema, pg_schema: str, owner_conn
) -> None:
    from selenium.common.exceptions import NoAlertPresentException
    from selenium.webdriver.common.by import By

    ts = hostile_thread(owner_conn)
    with serve_schema(pg_schema) as served:
        for path in (
            "/",
            f"/threads/{ts}",
            f"/threads/{ts}/rows/{ts}:1:tools:0",
            f"/threads/{ts}/rows/{ts}:1:tools:0?pattern=0",
        ):
            chrome.get(served.url + path)
            assert chrome.execute_script(f"return typeof window.{SENTINEL}") == "undefined", path
            with pytest.raises(NoAlertPresentException):
                chrome.switch_to.alert.text  # noqa: B018
            assert (
                chrome.find_elements(
                    By.CSS_SELECTOR, "a[href^='javascript'], [onerror], [onload], img, iframe"
                )
                == []
            )
            scripts = [s.get_attribute("src") for s in chrome.find_elements(By.TAG_NAME, "script")]
            assert scripts == [served.url + "/static/review.js"], path
            assert (
                "<script>window.__pwned=1</script>" in chrome.find_element(By.TAG_NAME, "body").text
                or path == "/"
            )
            if path.endswith(":0"):
                _shot(chrome, "review-hostile.png")
        csp = loopback_http.get(served.url + f"/threads/{ts}").headers["content-security-policy"]
    assert "script-src 'self'" in csp and "'unsafe-inline'" not in csp and "object-src 'none'" in csp


def _agent_counts(demo: DemoThread) -> list[tuple[int, str, int, int]]:
    """(round, node, whole input tokens, message tokens) of each model call, as the demo's agent counted
    and logged them (services/agent/graph.py `RoundGraph.ask`)."""
    found = re.search(r"logs in (\S+);", demo.output)
    assert found, demo.output[-2000:]
    counted = []
    for line in (Path(found.group(1)) / "agent.log").read_text(errors="replace").splitlines():
        rec = json.loads(line) if line.startswith("{") else {}
        if rec.get("msg") == "model call" and rec.get("thread_ts") == demo.thread_ts:
            counted.append(
                (int(rec["round"]), str(rec["node"]), int(rec["input_tokens"]), int(rec["message_tokens"]))
            )
    return counted


def test_a_model_call_shows_the_tokens_the_agent_counted(
    chrome: Any, demo_thread: DemoThread, serve_schema
) -> None:
    """Issue 38 item 4 in the browser: each model call (investigate, hypothesis and judge), rebuilt from
    the rows, has the input tokens the agent counted when it sent that call, tool schemas included; its
    message parts add up to the messages' count, and its tool schemas are listed."""
    from selenium.webdriver.common.by import By

    with serve_schema(demo_thread.schema) as served:
        chrome.get(f"{served.url}/threads/{demo_thread.thread_ts}")
        chrome.find_element(By.ID, "calls-link").click()
        sections = chrome.find_elements(By.CSS_SELECTOR, "section.model-call")
        page = []
        for section in sections:
            tokens = int(section.find_element(By.CSS_SELECTOR, ".message-tokens").text.replace(",", ""))
            whole = int(section.find_element(By.CSS_SELECTOR, ".input-tokens").text.replace(",", ""))
            parts = [
                int(td.text.replace(",", ""))
                for td in section.find_elements(By.CSS_SELECTOR, "td.part-tokens")
            ]
            assert sum(parts) == tokens
            node = section.get_attribute("data-node")
            tools = section.find_elements(By.CSS_SELECTOR, "tr.tool-schema")
            assert bool(tools) == (node == "investigate")  # the telemetry tools, sent beside investigate only
            page.append((int(section.get_attribute("data-round")), node, whole, tokens))
        last = next(s for s in reversed(sections) if s.get_attribute("data-node") == "investigate")
        last.find_element(By.CSS_SELECTOR, "details summary").click()  # open the call's preamble
        chrome.execute_script("arguments[0].scrollIntoView()", last)
        _shot(chrome, "review-model-call.png")
        table = last.find_element(By.CSS_SELECTOR, "table.tools")
        table.find_element(By.CSS_SELECTOR, "details summary").click()  # the first tool's schema, as sent
        chrome.execute_script("arguments[0].scrollIntoView()", table)
        _shot(chrome, "review-model-call-tools.png")
    counted = _agent_counts(demo_thread)
    assert page and page == counted, (page, counted)
