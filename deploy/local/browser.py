"""Debian's chromium and chromium-driver for the review page's browser tests, installed when missing.

`python -m deploy.local.browser` (run by `make test`) installs them through apt-get (deploy/local/apt.py);
`driver()` starts headless chromium through Selenium with both paths given explicitly, so Selenium
Manager never tries to download a driver, and with background networking off: nothing is fetched.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")


def missing() -> list[str]:
    return [
        name
        for name, path in (("chromium", CHROMIUM), ("chromium-driver", CHROMEDRIVER))
        if not path.exists()
    ]


def ensure() -> None:
    """Install chromium and chromium-driver if either is missing (UserFacingError when it cannot)."""
    wanted = missing()
    if wanted:
        from deploy.local.apt import install

        install(*wanted, why="the review page's browser tests need Debian's chromium and chromium-driver")


def driver(width: int = 1400, height: int = 1000) -> Any:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--no-first-run", "--disable-extensions", f"--window-size={width},{height}"):  # fmt: skip
        options.add_argument(arg)
    return webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)


def main() -> int:
    from services.runtime.errors import UserFacingError

    try:
        ensure()
    except UserFacingError as exc:
        print(f"browser: {exc}", file=sys.stderr)
        return 1
    print(f"browser: {shutil.which('chromium') or CHROMIUM} and {CHROMEDRIVER} present")
    return 0


if __name__ == "__main__":
    sys.exit(main())
