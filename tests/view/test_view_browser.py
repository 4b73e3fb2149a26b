"""``glyphforge view`` in headless Chromium: the grid shows ``ds[i]``'s labels, the class filter picks the rows,
overlays toggle, an example opens in full, videos play, statistics show, and a screenshot has content."""
from __future__ import annotations

import time

import numpy as np
import pytest
from PIL import Image

import glyphforge

from support import viewer as viewer_support
from support.viewer import headless_chromium, running_viewer

pytestmark = pytest.mark.timeout(180)

#: The page's default number of rows a page.
PAGE = 48


@pytest.fixture(scope="module")
def viewer(viewer_data):
    with running_viewer(viewer_data.data_dir) as running:
        yield running.address


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    with headless_chromium(tmp_path_factory.mktemp("chromium-profile")) as driver:
        yield driver


def wait(driver, check, what, timeout=30):
    """Wait until ``check(driver)`` is true; fail naming ``what`` and the page's message."""
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.support.ui import WebDriverWait

    try:
        return WebDriverWait(driver, timeout).until(check)
    except TimeoutException:
        message = driver.find_element("id", "message").text
        raise AssertionError(f"timed out waiting for {what}; the page says {message!r}") from None


def cards(driver):
    """The grid's cards as ``[(example index, caption)]``, once every image of the grid has loaded."""
    wait(driver, lambda d: d.execute_script(
        "return [...document.querySelectorAll('#grid img.image')].every(i => i.complete && i.naturalWidth > 0)"),
        "the grid's images")
    return [(int(card.get_attribute("data-index")), card.find_element("class name", "caption").text)
            for card in driver.find_elements("css selector", "#grid .card")]


def open_dataset(driver, address, key, expected):
    driver.get(f"{address}#{key}")
    wait(driver, lambda d: len(d.find_elements("css selector", "#grid .card")) == expected, f"{expected} cards")


def reload_grid(driver, action, what):
    """Run ``action`` (a filter) and wait for the grid to load again."""
    before = driver.find_element("id", "grid").get_attribute("data-loaded")
    action()
    wait(driver, lambda d: d.find_element("id", "grid").get_attribute("data-loaded") != before, what)


def scene_caption(ds, i):
    targets = ds[i][1]
    return " ".join(ds.classes[label] for label in targets["labels"][:int(targets["n_glyphs"])])


@pytest.mark.slow  # about 10 s on 2 busy cores; run by CI's full suite
def test_built_scenes_in_the_browser(viewer, viewer_data, browser, tmp_path):
    from selenium.webdriver.support.ui import Select

    ds = viewer_data.scenes
    open_dataset(browser, viewer, ds.key, PAGE)
    shown = cards(browser)
    assert shown == [(i, scene_caption(ds, i)) for i in range(PAGE)]
    boxes = browser.find_elements("css selector", "#grid .ov-box")
    assert len(boxes) == int(ds["n_glyphs"][:PAGE].sum()) and all(box.is_displayed() for box in boxes[:5])

    browser.find_element("id", "show-boxes").click()  # boxes off, labels still on
    assert not any(box.is_displayed() for box in boxes[:5])
    assert browser.find_elements("css selector", "#grid .ov-label")[0].is_displayed()
    browser.find_element("id", "show-boxes").click()
    assert boxes[0].is_displayed()

    name = ds.classes[int(ds["labels"][0, 0])]
    reload_grid(browser, lambda: Select(browser.find_element("id", "class-filter")).select_by_value(name),
                "the filtered grid")
    labels, counts = ds["labels"], ds["n_glyphs"]
    wanted = [i for i in range(len(ds)) if ds.classes.index(name) in labels[i, :counts[i]]]
    assert [i for i, _ in cards(browser)] == wanted[:PAGE]
    assert f"({len(wanted)} examples)" in browser.find_element("id", "page-info").text

    browser.find_elements("css selector", "#grid .card")[1].click()
    wait(browser, lambda d: d.find_element("id", "detail").is_displayed(), "the detail view")
    table = {row.find_elements("tag name", "td")[0].text: row.find_elements("tag name", "td")[1].text
             for row in browser.find_elements("css selector", "#targets tr")}
    assert table["labels"].replace(" ", "") == str(ds[wanted[1]][1]["labels"].tolist()).replace(" ", "")
    objects = [[cell.text for cell in row.find_elements("tag name", "td")]
               for row in browser.find_elements("css selector", "#objects-table tbody tr")]
    targets = ds[wanted[1]][1]
    assert [line[2] for line in objects] == [ds.classes[label] for label in targets["labels"][:targets["n_glyphs"]]]
    Select(browser.find_element("id", "zoom")).select_by_value("8")
    assert browser.find_element("css selector", "#detail-view img.image").size["width"] == 8 * ds.layout[
        ds.image_name]["shape"][1]

    shot = tmp_path / "scenes.png"
    assert browser.save_screenshot(str(shot))
    pixels = np.asarray(Image.open(shot).convert("RGB"))
    assert pixels.shape[0] >= 600 and pixels.shape[1] >= 1000
    assert len(np.unique(pixels.reshape(-1, 3), axis=0)) > 50  # a picture, not a blank page


def test_a_prepared_dataset_in_the_browser(viewer, viewer_data, browser):
    from selenium.webdriver.support.ui import Select

    [entry] = [e for e in glyphforge.DataContext.resolve(data_dir=viewer_data.data_dir).store.ls() if e.kind == "mnist"]
    mnist = glyphforge.MNIST(subset="all", data_dir=viewer_data.data_dir, download=False)
    open_dataset(browser, viewer, entry.key, PAGE)
    assert cards(browser) == [(i, mnist.classes[mnist[i][1]]) for i in range(PAGE)]
    assert not browser.find_element("id", "show-boxes").is_displayed()  # no overlays for one class an image

    reload_grid(browser, lambda: Select(browser.find_element("id", "class-filter")).select_by_value("3"),
                "the filtered grid")
    assert [i for i, _ in cards(browser)] == np.flatnonzero(mnist.labels == 3)[:PAGE].tolist()

    browser.find_element("id", "show-stats").click()
    bars = browser.find_elements("css selector", "#charts .bar-row")
    counts = [int(bar.find_element("class name", "count").text) for bar in bars]
    assert counts == np.bincount(mnist.labels, minlength=10).tolist()
    info = browser.find_element("id", "info").text
    assert entry.key in info and "examples 360" in info


def test_videos_play_in_place(viewer, viewer_data, browser):
    ds = viewer_data.videos
    open_dataset(browser, viewer, ds.key, len(ds))

    def frame_shown(driver):
        return driver.find_element("css selector", "#grid img.image").get_attribute("src").rsplit("frame=", 1)[1]

    seen = set()

    def played(driver):
        seen.add(frame_shown(driver))
        return len(seen) >= 3

    wait(browser, played, "three frames played")
    browser.find_element("id", "play").click()
    stopped = frame_shown(browser)
    for _ in range(3):
        time.sleep(0.25)  # longer than a frame
        assert frame_shown(browser) == stopped


@pytest.mark.parametrize("required", [False, True])
def test_without_chromium_the_browser_tests_skip_or_with_the_ci_setting_fail(tmp_path, monkeypatch, required):
    monkeypatch.setattr(viewer_support, "CHROMIUM", tmp_path / "no-chromium")
    monkeypatch.setenv(viewer_support.REQUIRE_ENV, "1" if required else "0")
    outcome = pytest.fail.Exception if required else pytest.skip.Exception
    with pytest.raises(outcome, match="no-chromium: install Debian's chromium and chromium-driver"):
        with headless_chromium(tmp_path / "profile"):
            pass


def test_omniglot_and_backgrounds_in_the_browser(more_data, browser, tmp_path):
    from selenium.webdriver.support.ui import Select

    entries = {e.kind: e for e in glyphforge.DataContext.resolve(data_dir=more_data).store.ls()}
    alphabets = entries["omniglot"].meta["alphabets"]
    with running_viewer(more_data) as running:
        open_dataset(browser, running.address, entries["omniglot"].key, PAGE)
        first = alphabets[0]["name"]
        assert cards(browser) == [(i, f"{first},{i // 20 + 1}") for i in range(PAGE)]  # 20 drawings a character
        name = f"{alphabets[1]['name']},2"
        reload_grid(browser, lambda: Select(browser.find_element("id", "class-filter")).select_by_value(name),
                    "the filtered grid")
        start = (len(alphabets[0]["characters"]) + 1) * 20
        assert cards(browser) == [(i, name) for i in range(start, start + 20)]

        names = sorted(entries["backgrounds"].meta["backgrounds"])
        open_dataset(browser, running.address, entries["backgrounds"].key, len(names))
        assert cards(browser) == list(enumerate(names))
        shot = tmp_path / "backgrounds.png"
        assert browser.save_screenshot(str(shot))
    pixels = np.asarray(Image.open(shot).convert("RGB"))
    assert len(np.unique(pixels.reshape(-1, 3), axis=0)) > 50  # the textures, not a blank page
