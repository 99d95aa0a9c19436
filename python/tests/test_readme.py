"""The README's "From Python" examples run as written."""

import re

from conftest import ROOT


def test_readme_python_examples_run():
    text = (ROOT / "README.md").read_text()
    section = text.split("## From Python", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(blocks) == 4
    for b in blocks:
        exec(compile(b, "README.md", "exec"), {})
