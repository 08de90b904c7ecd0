"""Issue 12, point 19: the docs have pictures a code host renders, and the pictures say what the rules say."""
from __future__ import annotations

import re
import runpy
import xml.etree.ElementTree as ElementTree
from pathlib import Path

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
