"""mkdocs hooks: the repository's README and results index as site pages, links mapped, config page checked.

README.md (the site's home page) and bench/RESULTS.md live outside docs/ so that they read well on the
repository's front page; they are added to the site here, and every relative link of a page is resolved
against the file it is written in (as a reader of the repository follows it) and rewritten to the site
page of that file. A link to a file the site does not hold stays as written, so the strict build fails on
it. The generated configuration reference must be current (`python -m rlgpt.docs_config`).
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File

REPO = Path(__file__).resolve().parent.parent
INCLUDED = {"README.md": "index.md", "bench/RESULTS.md": "results.md"}
"""Files outside docs/ that the site holds: repository path -> site page."""

_LINK = re.compile(r"(\]\()([^)\s]+)(\))")
_FENCE = re.compile(r"^\s*(```|~~~)")


def on_pre_build(config) -> None:
    from rlgpt.docs_config import PAGE, page_text, undocumented

    missing = undocumented()
    if missing:
        raise PluginError(f"config fields without a docstring: {', '.join(missing)}")
    if (REPO / PAGE).read_text() != page_text():
        raise PluginError(f"{PAGE} is stale: run `python -m rlgpt.docs_config`")


def on_files(files, config):
    for path, uri in INCLUDED.items():
        files.append(File.generated(config, uri, abs_src_path=str(REPO / path)))
    return files


def site_target(source: Path, link: str, docs_dir: Path) -> str | None:
    """The site page (docs-relative) a relative link in `source` points at, or None if the site lacks it."""
    target = (source.parent / link).resolve()
    if target == docs_dir:
        return "index.md"
    if target.is_relative_to(docs_dir):
        return target.relative_to(docs_dir).as_posix()
    return INCLUDED.get(target.relative_to(REPO).as_posix()) if target.is_relative_to(REPO) else None


def on_page_markdown(markdown: str, page, config, files) -> str:
    docs_dir = Path(config["docs_dir"]).resolve()
    source = Path(page.file.abs_src_path).resolve()
    here = posixpath.dirname(page.file.src_uri)

    def rewrite(match: re.Match) -> str:
        link = match.group(2)
        if "://" in link or link.startswith(("#", "mailto:")):
            return match.group(0)
        path, hash_, anchor = link.partition("#")
        uri = site_target(source, path, docs_dir)
        if uri is None:
            return match.group(0)
        return f"{match.group(1)}{posixpath.relpath(uri, here or '.')}{hash_}{anchor}{match.group(3)}"

    out, fenced = [], False
    for line in markdown.split("\n"):
        if _FENCE.match(line):
            fenced = not fenced
        out.append(line if fenced else _LINK.sub(rewrite, line))
    return "\n".join(out)
