"""The recall playground in Chromium: the agent's answer beside why each result ranks, in the
token's scope, with stored text shown and never run."""

from __future__ import annotations

import json
import urllib.parse
from pathlib import Path

from testkit.browser import Browser
from tests.console.conftest import World, call, needs_chromium, never_ran_script, screenshot, sign_in

pytestmark = needs_chromium


def recall_page(browser: Browser, world: World, **query: str) -> None:
    browser.goto(world.url("/recall?" + urllib.parse.urlencode(query)))


def test_the_answer_shows_the_current_fact_with_its_score_parts(browser: Browser, world: World,
                                                                tmp_path: Path) -> None:
    sign_in(browser, world, "alpha", "/recall")
    browser.wait_for("form.recall")
    browser.fill("form.recall input[name=q]", "Where does Alice live?")
    browser.fill("form.recall input[name=ns]", "/team/alpha")
    browser.click("form.recall button")
    browser.wait_for("section.why")
    berlin = world.ids["facts"]["berlin"]
    card = f".result[data-kind=fact][data-id='{berlin}']"
    assert browser.evaluate(f"!!document.querySelector(\"{card}\")")
    assert "Alice lives in Berlin" in browser.evaluate(f"document.querySelector(\"{card}\").innerText")
    for part in ("vector", "coverage", "own"):  # own: the Berlin fact's source turn is grouped into it
        float(browser.evaluate(f"document.querySelector(\"{card} td.part-{part}\").innerText"))
    assert "episode" in browser.evaluate(f"document.querySelector(\"{card} td:last-child\").innerText")
    legs = browser.evaluate(f"[...document.querySelectorAll(\"{card} .leg\")].map(d => d.innerText)")
    assert "vector" in legs and "text" in legs
    # the superseded Paris fact is not current: recall does not answer it
    paris = f".result[data-kind=fact][data-id='{world.ids['facts']['paris']}']"
    assert browser.evaluate(f"document.querySelector(\"{paris}\")") is None
    # the answer as the agent gets it: JSON with the same results, its size and a token estimate
    answer = json.loads(browser.evaluate("document.querySelector('pre.json').innerText"))
    assert any(r["kind"] == "fact" and r["id"] == berlin and "score_parts" in r for r in answer["results"])
    size = int(browser.evaluate("document.querySelector('.summary .size').innerText").split()[0])
    wire = json.dumps(answer, ensure_ascii=False, separators=(",", ":"))
    assert size == len(wire)
    assert "characters ÷ 4" in browser.text()
    # a bar per result, split into its parts
    assert browser.evaluate("document.querySelectorAll('svg.bars rect.part-vector').length") >= len(answer["results"]) - 1
    screenshot(browser, tmp_path, "recall")


def test_a_token_cannot_recall_another_tree(browser: Browser, world: World) -> None:
    sign_in(browser, world, "alpha", "/recall")
    recall_page(browser, world, q="Bluebird launch code", ns="/team/beta")
    text = browser.text()
    assert "outside this token's namespaces" in text
    assert "Bluebird" not in text  # the question stays in its input, which is not the page's text
    assert browser.evaluate("document.querySelectorAll('.result').length") == 0
    # without a namespace, the token's own trees only
    recall_page(browser, world, q="Bluebird launch code name")
    assert "Bluebird launches" not in browser.text() and "The beta launch code name" not in browser.text()


def test_a_bad_time_is_explained_beside_the_form(browser: Browser, world: World) -> None:
    sign_in(browser, world, "alpha", "/recall")
    recall_page(browser, world, q="Where does Alice live?", as_of="last tuesday")
    assert "not an ISO 8601 time" in browser.text()
    assert browser.evaluate("document.querySelector('form.recall input[name=as_of]').value") == "last tuesday"
    # as of before the move, Alice lived in Paris
    recall_page(browser, world, q="Where does Alice live?", ns="/team/alpha", as_of="2026-03-01T00:00Z")
    browser.wait_for("section.why")
    assert browser.evaluate(
        f"!!document.querySelector(\".result[data-kind=fact][data-id='{world.ids['facts']['paris']}']\")")


def test_stored_script_in_a_result_stays_text(browser: Browser, world: World) -> None:
    sign_in(browser, world, "admin", "/recall")
    recall_page(browser, world, q="Mallory note", ns="/team/alpha", limit="5", context="2")
    browser.wait_for("section.why")
    assert "<script>window.__pwned = 1</script>" in browser.text()
    assert never_ran_script(browser)
    assert browser.evaluate("document.querySelectorAll('main script, main img').length") == 0


def test_the_playground_fits_a_phone(browser: Browser, world: World) -> None:
    sign_in(browser, world, "alpha", "/recall")
    browser.set_viewport(390, 844)
    try:
        recall_page(browser, world, q="Where does Alice live?")
        browser.wait_for("section.why")
        assert browser.evaluate("document.documentElement.scrollWidth - window.innerWidth") <= 1
    finally:
        browser.set_viewport(1280, 800)


def test_a_fact_told_again_shows_where_it_was_told(browser: Browser, world: World) -> None:
    """Two sessions' accounts of one event are one result: the why column names the other
    account's turn as told again, linked, beside the result's own source turns."""
    ns = "/team/alpha/told"
    call(world.store, "create_namespace", namespace=ns)
    turns = [call(world.store, "remember", content=text, namespace=ns).id
             for text in ("Caroline: I went to the pride parade last week, I felt I belonged",
                          "Caroline: that pride parade, I really felt like I belonged there")]
    for text, turn in (("Caroline went to the pride parade and felt she belonged", turns[0]),
                       ("Caroline went to a pride parade and felt that she belonged there", turns[1])):
        call(world.store, "assert_fact", content=text, namespace=ns, source_episode_ids=[turn])
    sign_in(browser, world, "alpha", "/recall")
    recall_page(browser, world, q="Did Caroline go to a pride parade?", ns=ns)
    browser.wait_for("section.why")
    facts = browser.evaluate("[...document.querySelectorAll('.result[data-kind=fact]')].map(r => r.innerText)")
    assert len(facts) == 1, facts  # one account, one slot
    told = browser.evaluate("[...document.querySelectorAll('.result[data-kind=fact] td:last-child a')]"
                            ".map(a => [a.parentElement.innerText.split(':')[0], a.getAttribute('href')])")
    by_label = {label: [href.rsplit("/", 1)[1] for lab, href in told if lab == label] for label, _ in told}
    assert len(by_label["source turns"]) == len(by_label["told again in"]) == 1, told
    assert {*by_label["source turns"], *by_label["told again in"]} == {str(t) for t in turns}, told
