"""The documentation: a short README, links that resolve, a configuration reference that matches the code.

The full site build (`mkdocs build --strict`, anchors included) is `make docs`, run by `.ci/run`; these
checks are the cheap part that needs no docs extra.
"""

from __future__ import annotations

import dataclasses
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rlgpt import docs_config
from rlgpt.config import MacroConfig, RunConfig, TrainConfig

REPO = Path(__file__).resolve().parent.parent
README_MAX_LINES = 200
_LINK = re.compile(r"\]\(([^)\s]+)\)")
_FENCE = re.compile(r"^\s*(```|~~~)")


def doc_files() -> list[Path]:
    """README, the results index and every page under docs/ (drafts waiting in docs/_incoming aside)."""
    pages = [p for p in (REPO / "docs").rglob("*.md") if "_incoming" not in p.parts]
    return [REPO / "README.md", REPO / "bench" / "RESULTS.md", *sorted(pages)]


def relative_links(path: Path) -> list[str]:
    """The relative link targets of a Markdown file (fenced code left out), anchors stripped."""
    links, fenced = [], False
    for line in path.read_text().splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if fenced:
            continue
        for target in _LINK.findall(line):
            if "://" in target or target.startswith(("#", "mailto:")):
                continue
            links.append(target.partition("#")[0])
    return links


def test_readme_is_a_short_landing_page_with_the_layout_map_near_the_top():
    lines = (REPO / "README.md").read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines (at most {README_MAX_LINES})"
    headings = [line for line in lines if line.startswith("## ")]
    assert headings[0] == "## Layout", headings[:3]


def test_every_relative_link_in_readme_and_docs_resolves():
    broken = [f"{path.relative_to(REPO)}: {link}"
              for path in doc_files() for link in relative_links(path)
              if not (path.parent / link).resolve().exists()]
    assert len(doc_files()) > 10
    assert not broken, "broken links:\n" + "\n".join(broken)


def test_the_link_check_sees_a_broken_link(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("[ok](page.md) [gone](missing.md#x) [web](https://example.org)\n```\n[code](no.md)\n```\n")
    assert relative_links(page) == ["page.md", "missing.md"]


def test_every_config_field_has_a_docstring():
    assert docs_config.undocumented() == []
    classes = docs_config.config_classes()
    assert {RunConfig, TrainConfig, MacroConfig} <= set(classes)
    # every field of every class is read, not only the first of each
    assert set(docs_config.field_docs(MacroConfig)) == {f.name for f in dataclasses.fields(MacroConfig)}


def test_a_field_without_a_docstring_is_found():
    @dataclasses.dataclass
    class Knobs:
        documented: int = 1
        """Says what it is."""
        bare: int = 2

    assert docs_config.field_docs(Knobs) == {"documented": "Says what it is."}


def test_the_configuration_reference_is_current():
    page = (REPO / docs_config.PAGE).read_text()
    assert page == docs_config.page_text(), "docs/config.md is stale: run `python -m rlgpt.docs_config`"
    for key, doc in (("learning_rate", "Adam learning rate."), ("max_outer", "Outer iterations")):
        assert re.search(rf"^\| `{key}` \|.*{re.escape(doc)}", page, re.M), key


@pytest.mark.parametrize("stale", [True, False])
def test_the_check_command_fails_on_a_stale_page(tmp_path, stale):
    out = tmp_path / "config.md"
    out.write_text(docs_config.page_text() + ("edited by hand\n" if stale else ""))
    assert docs_config.main(["--check", "--out", str(out)]) == (1 if stale else 0)
    assert docs_config.main(["--out", str(out)]) == 0
    assert docs_config.main(["--check", "--out", str(out)]) == 0


def _build(repo: Path, site: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
                          cwd=repo, capture_output=True, text=True, timeout=300)


def test_the_site_builds_strictly_with_readme_and_results_as_pages(tmp_path):
    pytest.importorskip("mkdocs", reason="the `docs` extra (in the Makefile's EXTRAS) is not installed")
    done = _build(REPO, tmp_path / "site")
    assert done.returncode == 0, done.stderr
    home = (tmp_path / "site" / "index.html").read_text()
    assert 'href="install/"' in home
    assert 'href="results/#the-models-own-code-the-headline-faults-learners"' in home
    assert (tmp_path / "site" / "results" / "index.html").exists()


def test_a_broken_anchor_in_the_readme_fails_the_site_build(tmp_path):
    pytest.importorskip("mkdocs", reason="the `docs` extra (in the Makefile's EXTRAS) is not installed")
    copy = tmp_path / "repo"
    shutil.copytree(REPO / "docs", copy / "docs", ignore=shutil.ignore_patterns("_incoming"))
    (copy / "bench").mkdir()
    for name in ("mkdocs.yml", "README.md", "bench/RESULTS.md"):
        shutil.copy(REPO / name, copy / name)
    with (copy / "README.md").open("a") as f:
        f.write("\n[gone](docs/install.md#no-such-section)\n")
    done = _build(copy, tmp_path / "site")
    assert done.returncode != 0
    assert "no-such-section" in done.stderr
