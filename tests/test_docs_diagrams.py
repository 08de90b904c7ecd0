"""The docs have pictures a code host renders, the pictures say what the rules say, and every Mermaid diagram
parses with Mermaid's own parser (a diagram that does not is shown as an error where it should be)."""
from __future__ import annotations

import json
import re
import runpy
import xml.etree.ElementTree as ElementTree
from importlib import resources
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs"


def test_docs_have_diagrams_of_the_ids_against_the_mark_and_of_recovery():
    picture = DOCS / "diagrams" / "ids-and-mark.svg"
    for page in ("index.md", "semantics.md"):
        assert "](diagrams/ids-and-mark.svg)" in (DOCS / page).read_text(), page
    assert ElementTree.parse(picture).getroot().tag == "{http://www.w3.org/2000/svg}svg"
    drawn = runpy.run_path(str(DOCS / "diagrams" / "ids_and_mark.py"))["draw"]()
    assert picture.read_text() == drawn, "run python docs/diagrams/ids_and_mark.py to redraw it from the model"
    assert re.findall(r">(NOT_DUP|DUP)<", drawn) == ["DUP", "NOT_DUP", "DUP", "NOT_DUP", "DUP", "DUP", "NOT_DUP",
                                                    "NOT_DUP"]
    flows = re.findall(r"```mermaid\n(.*?)```", (DOCS / "semantics.md").read_text(), re.S)
    assert any("snapshot" in flow and "replay" in flow and "recover" in flow for flow in flows)


# --- every diagram parses with Mermaid's own parser -------------------------------------------------------------------

ROOT = DOCS.parent


def _diagrams() -> list:
    """Every Mermaid block of the docs (and the README), as (where, text): where is ``path:line`` of its fence."""
    found = []
    for page in sorted([ROOT / "README.md", *DOCS.rglob("*.md")]):
        text = page.read_text()
        for block in re.finditer(r"^```mermaid\n(.*?)^```", text, re.S | re.M):
            line = text.count("\n", 0, block.start()) + 1
            found.append(pytest.param(block.group(1), id=f"{page.relative_to(ROOT)}:{line}"))
    return found


@pytest.fixture(scope="module")
def mermaid_parse():
    """Mermaid's own parser, ``mermaid.parse`` of mermaid.js (the build mermaidx ships) run by QuickJS: a function
    of a diagram's text that returns None, or Mermaid's error. mermaidx's DOM shim comes first: the parser cleans
    labels with DOMPurify, which needs a document."""
    import quickjs

    assets = resources.files("mermaidx") / "assets"
    context = quickjs.Context()
    context.set_max_stack_size(24 * 1024 * 1024)     # (mermaid.js recurses deeper than QuickJS's default allows)
    for script in ("dom_shim.js", "mermaid.js"):
        context.eval((assets / script).read_text(encoding="utf-8"))
    context.eval("globalThis.mermaid = __esbuild_esm_mermaid_nm.mermaid.default || __esbuild_esm_mermaid_nm.mermaid;")

    def parse(text: str) -> str | None:
        context.eval(f"globalThis.failure = null; mermaid.parse({json.dumps(text)})"
                     ".catch(e => { failure = String((e && e.message) || e).slice(0); });")
        while context.execute_pending_job():
            pass
        return context.eval("failure")

    return parse


def test_mermaids_parser_refuses_a_semicolon_in_a_message(mermaid_parse):
    """The parser the docs are checked with is Mermaid's: a ';' ends a sequence diagram's statement."""
    assert mermaid_parse("sequenceDiagram\n    A->>B: one, two\n") is None
    assert "Parse error on line 2" in mermaid_parse("sequenceDiagram\n    A->>B: one; two\n")


@pytest.mark.parametrize("diagram", _diagrams())
def test_every_diagram_of_the_docs_parses_with_mermaids_parser(mermaid_parse, diagram):
    failure = mermaid_parse(diagram)
    assert failure is None, f"Mermaid cannot parse this diagram (a code host shows the error instead):\n{failure}"
