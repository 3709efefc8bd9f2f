"""mkdocs hook: a Markdown file of the repository's root shown as a page of the site.

docs/benchmarks.md is the root's BENCHMARKS.md, named on a line of its own:
`--8<-- "BENCHMARKS.md"`. That file links to the manual as `docs/PAGE.md`, which is right
where it lives (GitHub, a checkout); on the site the page sits inside docs/, beside those
pages. So the file's text is put in place here, before Markdown runs, with `](docs/` read as
`](`: `mkdocs build --strict` then checks its links and anchors like any page's.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

ROOT_FILE = re.compile(r'^--8<-- "([\w.-]+\.md)"$', re.M)


def on_page_markdown(markdown: str, config: Any, **_: Any) -> str:
    root = Path(config.config_file_path).parent

    def text(match: re.Match[str]) -> str:
        return (root / match[1]).read_text().replace("](docs/", "](")

    return ROOT_FILE.sub(text, markdown)
