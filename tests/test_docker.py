"""The Dockerfile, read instruction by instruction (no Docker engine runs here).

What a build would do cannot be checked without an engine; what the file says can:
its base argument, volume, port, health check and entry point, that torch comes
from the CPU wheel index, that no build tools are installed, and that the build
context keeps what the Dockerfile copies. The entry point script runs for real.
"""

from __future__ import annotations

import argparse
import fnmatch
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
ENTRYPOINT = "/usr/local/bin/pocket-tts-entrypoint"


def parse_dockerfile(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs: continuations joined, blanks collapsed, comments dropped."""
    instructions, pending = [], ""
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("#") or (not stripped and not pending):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        whole = " ".join((pending + stripped).split())
        pending = ""
        if whole:
            keyword, _, arguments = whole.partition(" ")
            instructions.append((keyword.upper(), arguments.strip()))
    assert not pending, "the Dockerfile ends in a continuation line"
    return instructions


@pytest.fixture(scope="module")
def instructions() -> list[tuple[str, str]]:
    return parse_dockerfile((ROOT / "Dockerfile").read_text())


def values(instructions, keyword: str) -> list[str]:
    return [arguments for name, arguments in instructions if name == keyword]


def test_parser_joins_continuations() -> None:
    parsed = parse_dockerfile("# c\nFROM x\nRUN a \\\n    && b\n\nEXPOSE 1\n")
    assert parsed == [("FROM", "x"), ("RUN", "a && b"), ("EXPOSE", "1")]


def test_base_comes_from_build_from_with_a_default(instructions) -> None:
    assert instructions[0][0] == "ARG"
    name, _, default = instructions[0][1].partition("=")
    assert name == "BUILD_FROM"
    assert values(instructions, "FROM") == ["${BUILD_FROM}"]
    # The default is the multi-arch image of the same base and release as build.yaml's.
    build = yaml.safe_load((ROOT / "build.yaml").read_text())
    for arch, image in build["build_from"].items():
        assert image.replace(f"/{arch}-", "/") == default


def test_volume_port_healthcheck_entrypoint(instructions) -> None:
    serve = pytest.importorskip("wyoming_pocket_tts.commands.serve")
    assert values(instructions, "EXPOSE") == [str(urlsplit(serve.DEFAULT_URI).port)]
    (healthcheck,) = values(instructions, "HEALTHCHECK")
    assert "--start-period=" in healthcheck
    command = healthcheck[healthcheck.index("CMD") :]
    assert '"-m", "wyoming_pocket_tts", "health-check"' in command
    assert values(instructions, "ENTRYPOINT") == [f'["{ENTRYPOINT}"]']
    assert "addon/rootfs /" in values(instructions, "COPY")
    script = ROOT / "addon" / "rootfs" / ENTRYPOINT.lstrip("/")
    assert os.access(script, os.X_OK)


def test_torch_is_cpu_only_and_matches_the_tested_version(instructions) -> None:
    arguments = dict(a.partition("=")[::2] for a in values(instructions, "ARG"))
    assert arguments["TORCH_INDEX_URL"] == "https://download.pytorch.org/whl/cpu"
    torch = pytest.importorskip("torch")
    assert arguments["TORCH_VERSION"] == torch.__version__.split("+")[0]
    runs = " ".join(values(instructions, "RUN"))
    assert '--index-url "${TORCH_INDEX_URL}" "torch==${TORCH_VERSION}"' in runs


def test_no_build_tools_and_no_apt_lists_left(instructions) -> None:
    for run in values(instructions, "RUN"):
        if "apt-get install" in run:
            packages = set(run.split("apt-get install", 1)[1].split("&&", 1)[0].split())
            assert not packages & {"build-essential", "gcc", "g++", "make", "cmake", "python3-dev"}
        if "apt-get update" in run:
            assert "rm -rf /var/lib/apt/lists/*" in run  # in the same layer
        if "pip install" in run:
            assert run.count("pip install") == run.count("pip install --no-cache-dir")


def test_environment_names_real_server_options(instructions, monkeypatch) -> None:
    serve = pytest.importorskip("wyoming_pocket_tts.commands.serve")
    environment = {}
    for env in values(instructions, "ENV"):
        for pair in shlex.split(env):
            name, _, value = pair.partition("=")
            environment[name] = value
    for name, value in environment.items():
        if name.startswith("WYOMING_POCKET_TTS_"):
            monkeypatch.setenv(name, value)
    parser = argparse.ArgumentParser()
    serve.configure(parser)
    args = parser.parse_args([])
    # Everything the server keeps (downloads, the Hugging Face cache, custom voices)
    # lives in the image's one volume.
    (volume,) = map(Path, values(instructions, "VOLUME"))
    assert args.download_dir == volume
    assert args.voices_dir.is_relative_to(volume)
    assert Path(environment["HF_HOME"]).is_relative_to(volume)


def ignored(path: str, patterns: list[str]) -> bool:
    """Docker's rule: the last pattern matching the path or one of its parents decides."""
    parts = path.split("/")
    candidates = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    verdict = False
    for pattern in patterns:
        negated = pattern.startswith("!")
        glob = pattern.lstrip("!")
        regex = fnmatch.translate(glob).replace(".*", "[^/]*").replace("[^/]*[^/]*", ".*")
        if glob.startswith("**/"):
            regex = "(.*/)?" + fnmatch.translate(glob[3:])
        if any(re.fullmatch(regex, candidate) for candidate in candidates):
            verdict = not negated
    return verdict


def test_build_context_keeps_what_is_copied(instructions) -> None:
    patterns = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    copied = []
    for arguments in values(instructions, "COPY"):
        copied += [source for source in arguments.split()[:-1] if not source.startswith("--")]
    assert copied
    for source in copied:
        assert not ignored(source, patterns), source
    assert not ignored("wyoming_pocket_tts/data/catalog.yaml", patterns)
    for kept_out in (
        ".git/HEAD",
        "tests/test_docker.py",
        "benchmarks/x.py",
        "wyoming_pocket_tts/__pycache__/a.pyc",
    ):
        assert ignored(kept_out, patterns), kept_out


@pytest.fixture()
def entrypoint_stubs(tmp_path: Path) -> dict[str, str]:
    if shutil.which("bash") is None:
        pytest.skip("needs bash")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tini = bin_dir / "tini"
    tini.write_text('#!/bin/bash\nprintf "%s\\n" "$@" > "${STUB_LOG}"\n')
    tini.chmod(0o755)
    return {"PATH": f"{bin_dir}:{os.environ['PATH']}", "STUB_LOG": str(tmp_path / "tini.log")}


def run_entrypoint(env: dict[str, str], *arguments: str) -> subprocess.CompletedProcess:
    script = ROOT / "addon" / "rootfs" / ENTRYPOINT.lstrip("/")
    return subprocess.run(
        [str(script), *arguments], check=False, env=env, capture_output=True, text=True, timeout=30
    )


def test_standalone_runs_the_server_with_its_arguments(entrypoint_stubs, tmp_path) -> None:
    voices = tmp_path / "data" / "voices"
    env = {**entrypoint_stubs, "WYOMING_POCKET_TTS_VOICES_DIR": str(voices)}
    process = run_entrypoint(env, "--voice", "alba")
    assert process.returncode == 0, process.stderr
    exec_line = Path(env["STUB_LOG"]).read_text().splitlines()
    assert exec_line == ["--", "python3", "-m", "wyoming_pocket_tts", "--voice", "alba"]
    assert voices.is_dir()


def test_under_the_supervisor_s6_takes_over(entrypoint_stubs) -> None:
    env = {**entrypoint_stubs, "SUPERVISOR_TOKEN": "token"}
    process = run_entrypoint(env, "--voice", "alba")
    # /init (s6-overlay) exists only in the image; trying to run it is the proof.
    assert not Path(env["STUB_LOG"]).exists()
    assert process.returncode != 0 and "/init" in process.stderr
