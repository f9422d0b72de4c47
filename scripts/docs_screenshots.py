"""Screenshots of the built documentation site, taken in headless Chromium (Debian's chromium
and chromium-driver, driven by Selenium), as the site is read offline: from ``file://``.

Usage: ``python scripts/docs_screenshots.py [SITE_DIR]`` (default ``site``, built by
``scripts/docs.sh``). Writes ``docs/img/site/home.png`` and ``docs/img/site/tutorial-sql-flow.png``.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.chrome.service import Service

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "img" / "site"
PAGES = {"home.png": "index.html", "tutorial-sql-flow.png": "tutorials/sql-flow.html"}


def open_chromium(width: int = 1280, height: int = 900) -> webdriver.Chrome:
    """A headless Chromium of the given window size.

    Raises:
        RuntimeError: chromium or chromedriver is not installed (scripts/setup_core.sh installs both).
    """
    chromium, driver_bin = shutil.which("chromium"), shutil.which("chromedriver")
    if chromium is None or driver_bin is None:
        raise RuntimeError("needs Debian's chromium and chromium-driver: run scripts/setup_core.sh")
    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        opts.add_argument(flag)
    opts.add_argument(f"--window-size={width},{height}")
    driver = webdriver.Chrome(service=Service(driver_bin), options=opts)
    driver.set_page_load_timeout(30)
    return driver


def main(argv: list[str]) -> int:
    site = Path(argv[0] if argv else ROOT / "site").resolve()
    if not (site / "index.html").is_file():
        print(f"{site}/index.html not found: build the site first (scripts/docs.sh)", file=sys.stderr)
        return 1
    OUT.mkdir(parents=True, exist_ok=True)
    driver = open_chromium()
    try:
        for name, page in PAGES.items():
            driver.get((site / page).as_uri())
            driver.save_screenshot(str(OUT / name))
            print(OUT / name)
    finally:
        driver.quit()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
