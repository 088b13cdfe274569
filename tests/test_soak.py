"""A short soak (benchmarks/soak.py) on the tiny model: every valid request of a
realistic mix is served, the bad ones get the answers they should, and the server
ends with the open files and threads it started with."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.support.reference_model import BuiltModel

REPO = Path(__file__).resolve().parents[1]


def test_a_short_soak_serves_every_valid_request_and_leaks_no_files_or_threads(
    tiny_model: BuiltModel, tmp_path: Path
):
    results_path = tmp_path / "soak.json"
    done = subprocess.run(
        [
            sys.executable, str(REPO / "benchmarks" / "soak.py"),
            "--config", str(tiny_model.config_path),
            "--requests", "40",
            "--clients", "4",
            "--voices", "5",
            "--max-loaded-voices", "2",
            "--warm-up", "10",
            "--json", str(results_path),
        ],
        cwd=REPO, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    results = json.loads(results_path.read_text())

    assert results["requests"] == 40
    assert results["failures"] == {}, done.stdout
    assert results["served"] == 40
    assert set(results["bad_request_answers"]) <= {
        "unknown-voice: error",
        "malformed: error",
        "malformed: info",
        "malformed: closed",
    }
    before, settled = results["before"], results["settled"]
    assert settled["open_files"] <= before["open_files"], results
    assert settled["threads"] <= before["threads"], results
