"""Check a report in a headless browser: the page loads, no errors, every image decodes.

Usage::

    python -m analysis.browser_check results/quick/report.html --screenshot /tmp/quick.png

A copy of the page with a small probe script is opened in headless Chromium (``chromium``,
``chromium-browser`` or ``google-chrome`` on PATH; on Debian ``apt-get install -y chromium``).
After load the probe writes the number of ``<img>`` elements, how many decoded
(``naturalWidth > 0``) and how many script or resource errors fired into the DOM, which
``--dump-dom`` hands back. Exit status 0 when every image decoded and no error fired, 1
otherwise, 2 when no browser is installed or the page is missing.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

__all__ = ["BrowserCheck", "find_browser", "check_in_browser", "main"]

_BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")

_PROBE = """
<script>
window.__compctlErrors = 0;
window.addEventListener('error', function () { window.__compctlErrors += 1; }, true);
window.addEventListener('load', function () {
  var ims = Array.prototype.slice.call(document.images);
  var ok = ims.filter(function (i) { return i.complete && i.naturalWidth > 0; }).length;
  var pre = document.createElement('pre');
  pre.id = 'compctl-probe';
  pre.textContent = 'PROBE images=' + ims.length + ' decoded=' + ok +
                    ' errors=' + window.__compctlErrors + ' END';
  document.body.appendChild(pre);
});
</script>
"""

_RESULT = re.compile(r"PROBE images=(\d+) decoded=(\d+) errors=(\d+) END")


@dataclass(frozen=True)
class BrowserCheck:
    """What the headless browser saw."""

    images: int
    decoded: int
    errors: int

    @property
    def ok(self) -> bool:
        """Every image decoded and nothing failed."""
        return self.errors == 0 and self.decoded == self.images


def find_browser() -> str | None:
    """Path of a headless-capable Chromium, or None."""
    for name in _BROWSERS:
        found = shutil.which(name)
        if found:
            return found
    return None


def _chromium(browser: str, *args: str, timeout_s: float) -> subprocess.CompletedProcess[str]:
    cmd = [
        browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
        "--virtual-time-budget=10000", *args,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False)


def check_in_browser(
    page: str | Path, *, screenshot: str | Path | None = None, timeout_s: float = 120.0
) -> BrowserCheck:
    """Open ``page`` headless and report images/decoded/errors; RuntimeError without a browser."""
    browser = find_browser()
    if browser is None:
        raise RuntimeError("no headless Chromium found (apt-get install -y chromium)")
    src = Path(page).resolve()
    text = src.read_text(encoding="utf-8")
    with tempfile.TemporaryDirectory(prefix="compctl-browser-") as tmp:
        probe_page = Path(tmp) / "probe.html"
        cut = text.rfind("</body>")
        probe_page.write_text(
            text[:cut] + _PROBE + text[cut:] if cut >= 0 else text + _PROBE, encoding="utf-8"
        )
        user_dir = f"--user-data-dir={Path(tmp) / 'profile'}"
        done = _chromium(browser, user_dir, "--dump-dom", probe_page.as_uri(), timeout_s=timeout_s)
        if screenshot is not None:
            shot = Path(screenshot).resolve()
            _chromium(
                browser, user_dir, f"--screenshot={shot}", "--window-size=1280,4000",
                src.as_uri(), timeout_s=timeout_s,
            )
    m = _RESULT.search(done.stdout)
    if m is None:
        raise RuntimeError(f"the browser did not run the probe (exit {done.returncode})")
    return BrowserCheck(int(m.group(1)), int(m.group(2)), int(m.group(3)))


def main(argv: list[str] | None = None) -> int:
    """Command-line entry: ``python -m analysis.browser_check PAGE [--screenshot PNG]``."""
    ap = argparse.ArgumentParser(prog="python -m analysis.browser_check", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("page", help="HTML report to open")
    ap.add_argument("--screenshot", default=None, help="also save a full-page PNG screenshot")
    args = ap.parse_args(argv)
    if not Path(args.page).is_file():
        sys.stderr.write(f"{args.page}: no such file\n")
        return 2
    try:
        res = check_in_browser(args.page, screenshot=args.screenshot)
    except RuntimeError as exc:
        sys.stderr.write(f"{exc}\n")
        return 2
    sys.stdout.write(
        f"images={res.images} decoded={res.decoded} errors={res.errors} "
        f"{'OK' if res.ok else 'FAILED'}\n"
    )
    return 0 if res.ok else 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
