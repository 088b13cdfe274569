"""The developer scripts under script/: what can be checked without running them."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = sorted((ROOT / "script").iterdir())


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda path: path.name)
def test_scripts_are_executable_bash_that_parses(script: Path) -> None:
    assert script.stat().st_mode & 0o111, f"{script.name} is not executable"
    assert script.read_text().startswith("#!/usr/bin/env bash\n")
    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("no bash here")
    subprocess.run([bash, "-n", str(script)], check=True)


def test_tests_left_out_on_aarch64_still_exist() -> None:
    """A renamed test would silently run (and fail) under emulation again."""
    text = (ROOT / "script" / "test-aarch64").read_text()
    left_out = re.findall(r"--deselect (tests/\S+\.py)::(\w+)", text)
    assert left_out
    for path, name in left_out:
        tree = ast.parse((ROOT / path).read_text())
        functions = {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}
        assert name in functions, f"{path}::{name} is gone"
