"""The judging page's screenshot in the docs (docs/judging-page.png), taken from the demo.

    python scripts/judging_screenshot.py [--output docs/judging-page.png]

Copies this repository's project (its demo, recording and baseline) to a temporary folder, runs
`python -m retrieval judge` there on a free port of 127.0.0.1, grades three pairs in headless
Chromium (Debian's /usr/bin/chromium, through Playwright, as the browser tests do) and takes the
page. Nothing in the repository is written but the picture.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--output", default=str(ROOT / "docs" / "judging-page.png"))
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    args = parser.parse_args(argv)
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as folder:
        project = Path(folder) / "project"
        project.mkdir()
        for part in ("pyproject.toml", "data", "cassettes", "vectors", "baselines"):
            source = ROOT / part
            (shutil.copytree if source.is_dir() else shutil.copy)(source, project / part)
        server = subprocess.Popen(
            [sys.executable, "-m", "retrieval", "judge", "--judge", "ana", "--port", "0"],
            cwd=project,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert server.stderr is not None
            url = ""
            deadline = time.monotonic() + 300
            while not url and time.monotonic() < deadline:
                line = server.stderr.readline()
                if not line:
                    break
                found = re.search(r"http://127\.0\.0\.1:\d+/", line)
                url = found.group(0) if found else ""
            if not url:
                print("the judging server did not start", file=sys.stderr)
                return 1
            with sync_playwright() as driver:
                browser = driver.chromium.launch_persistent_context(
                    str(Path(folder) / "profile"),
                    executable_path=args.chromium,
                    headless=True,
                    args=FLAGS,
                    viewport={"width": 1200, "height": 860},
                )
                page = browser.new_page()
                page.goto(url)
                page.wait_for_selector("#pair:not([hidden])")
                for grade in ("3", "0", "1"):
                    shown = page.inner_text("#candidate-id")
                    page.keyboard.press(grade)
                    page.wait_for_function(
                        "previous => document.getElementById('candidate-id').textContent !== previous", arg=shown
                    )
                page.screenshot(path=args.output)
                browser.close()
        finally:
            server.terminate()
            server.wait(timeout=30)
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
