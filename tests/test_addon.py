"""The Home Assistant add-on: manifest, build file, translations, s6 scripts.

The manifest schema below is written from the official add-on configuration
documentation (developers.home-assistant.io, "App configuration"): its required
and optional keys, their types, the architectures, map types and option types.
The s6 scripts run for real under bash with a stand-in for bashio (same jq
queries as bashio's `config` functions) and stand-ins for the programs they
start, whose command lines are recorded and parsed with the server's own parser.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
S6 = ROOT / "addon" / "rootfs" / "etc" / "s6-overlay" / "s6-rc.d"
RUN_SCRIPT = S6 / "pocket-tts" / "run"
DISCOVERY_SCRIPT = S6 / "discovery" / "run"


def load_yaml(name: str) -> Any:
    return yaml.safe_load((ROOT / name).read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def manifest() -> dict[str, Any]:
    return load_yaml("config.yaml")


# ---------------------------------------------------------------------------
# The manifest schema, from the documentation

ARCHITECTURES = {"aarch64", "amd64"}
MAP_TYPES = {
    "homeassistant_config",
    "addon_config",
    "ssl",
    "addons",
    "backup",
    "share",
    "media",
    "all_addon_configs",
    "data",
}
PORT_KEY = re.compile(r"^\d+(/tcp|/udp)?$")
SLUG = re.compile(r"^[-_.A-Za-z0-9]+$")
VERSION = re.compile(r"^\d+\.\d+\.\d+([.-]?[0-9A-Za-z.]+)?$")
OPTION_TYPE = re.compile(
    r"^(?:bool|email|url|port|device(?:\(subsystem=[a-z]+\))?"
    r"|str(?:\((?P<s_min>\d+)?,(?P<s_max>\d+)?\))?"
    r"|password(?:\(\d*,\d*\))?"
    r"|int(?:\((?P<i_min>-?\d+)?,(?P<i_max>-?\d+)?\))?"
    r"|float(?:\((?P<f_min>-?\d*\.?\d+)?,(?P<f_max>-?\d*\.?\d+)?\))?"
    r"|match\((?P<match>.*)\)|list\((?P<list>.+)\))\??$"
)


def _is_bool(value: Any) -> bool:
    return isinstance(value, bool)


def _is_str(value: Any) -> bool:
    return isinstance(value, str)


def _is_str_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# Every key the documentation lists, with a check of its documented type.
KEYS = {
    "name": _is_str,
    "version": _is_str,
    "slug": lambda v: _is_str(v) and bool(SLUG.match(v)),
    "description": _is_str,
    "arch": lambda v: _is_str_list(v) and bool(v) and set(v) <= ARCHITECTURES,
    "machine": _is_str_list,
    "url": lambda v: _is_str(v) and v.startswith(("http://", "https://")),
    "startup": lambda v: v in {"initialize", "system", "services", "application", "once"},
    "webui": _is_str,
    "boot": lambda v: v in {"auto", "manual", "manual_only"},
    "ports": lambda v: (
        isinstance(v, dict)
        and all(
            PORT_KEY.match(str(k)) and (p is None or (_is_int(p) and 0 < p < 65536))
            for k, p in v.items()
        )
    ),
    "ports_description": lambda v: isinstance(v, dict) and all(PORT_KEY.match(str(k)) for k in v),
    "host_network": _is_bool,
    "host_ipc": _is_bool,
    "host_dbus": _is_bool,
    "host_pid": _is_bool,
    "host_uts": _is_bool,
    "devices": _is_str_list,
    "homeassistant": _is_str,
    "hassio_role": lambda v: v in {"default", "homeassistant", "backup", "manager", "admin"},
    "hassio_api": _is_bool,
    "homeassistant_api": _is_bool,
    "docker_api": _is_bool,
    "privileged": _is_str_list,
    "full_access": _is_bool,
    "apparmor": lambda v: isinstance(v, (bool, str)),
    "map": lambda v: isinstance(v, list) and all(_valid_map_entry(entry) for entry in v),
    "environment": lambda v: isinstance(v, dict) and all(_is_str(x) for x in v.values()),
    "audio": _is_bool,
    "video": _is_bool,
    "gpio": _is_bool,
    "usb": _is_bool,
    "uart": _is_bool,
    "udev": _is_bool,
    "devicetree": _is_bool,
    "kernel_modules": _is_bool,
    "stdin": _is_bool,
    "legacy": _is_bool,
    "options": lambda v: isinstance(v, dict),
    "schema": lambda v: v is False or isinstance(v, dict),
    "image": _is_str,
    "timeout": _is_int,
    "tmpfs": _is_bool,
    "discovery": _is_str_list,
    "services": _is_str_list,
    "auth_api": _is_bool,
    "ingress": _is_bool,
    "ingress_port": _is_int,
    "ingress_entry": _is_str,
    "ingress_stream": _is_bool,
    "panel_icon": _is_str,
    "panel_title": _is_str,
    "panel_admin": _is_bool,
    "backup": lambda v: v in {"hot", "cold"},
    "backup_pre": _is_str,
    "backup_post": _is_str,
    "backup_exclude": _is_str_list,
    "stage": lambda v: v in {"stable", "experimental", "deprecated"},
    "init": _is_bool,
    "watchdog": _is_str,
    "realtime": _is_bool,
    "journald": _is_bool,
    "breaking_versions": _is_str_list,
    "ulimits": lambda v: isinstance(v, dict),
}
REQUIRED = ("name", "version", "slug", "description", "arch")


def _valid_map_entry(entry: Any) -> bool:
    if isinstance(entry, str):
        kind, _, mode = entry.partition(":")
        return kind in MAP_TYPES and mode in ("", "rw", "ro")
    if isinstance(entry, dict):
        return (
            entry.get("type") in MAP_TYPES
            and set(entry) <= {"type", "read_only", "path"}
            and isinstance(entry.get("read_only", True), bool)
        )
    return False


def _conforms(value: Any, element: str) -> bool:
    """Whether an option value satisfies one schema element such as `int(1,64)`."""
    match = OPTION_TYPE.match(element)
    assert match, f"not an option type: {element}"
    letters = re.match(r"[a-z]+", element)
    assert letters is not None
    kind = letters.group()
    if kind == "bool":
        return isinstance(value, bool)
    if kind == "list":
        return value in match["list"].split("|")
    if kind == "int":
        low, high = match["i_min"], match["i_max"]
        return (
            _is_int(value)
            and (low is None or value >= int(low))
            and (high is None or value <= int(high))
        )
    if kind == "float":
        low, high = match["f_min"], match["f_max"]
        numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
        return (
            numeric
            and (low is None or value >= float(low))
            and (high is None or value <= float(high))
        )
    if kind == "str":
        low, high = match["s_min"], match["s_max"]
        return (
            _is_str(value)
            and (low is None or len(value) >= int(low))
            and (high is None or len(value) <= int(high))
        )
    if kind == "match":
        return _is_str(value) and re.fullmatch(match["match"], value) is not None
    return _is_str(value)


def validate_manifest(config: dict[str, Any]) -> list[str]:
    """Everything wrong with an add-on manifest, as readable lines."""
    problems = [f"missing required key {key!r}" for key in REQUIRED if key not in config]
    for key, value in config.items():
        check = KEYS.get(key)
        if check is None:
            problems.append(f"unknown key {key!r}")
        elif not check(value):
            problems.append(f"bad value for {key!r}: {value!r}")
    schema = config.get("schema") or {}
    for key, value in (config.get("options") or {}).items():
        if key not in schema:
            problems.append(f"option {key!r} has no schema")
            continue
        element = schema[key]
        if isinstance(element, list):
            if not (isinstance(value, list) and all(_conforms(item, element[0]) for item in value)):
                problems.append(f"option {key!r} default {value!r} does not match {element}")
        elif not _conforms(value, element):
            problems.append(f"option {key!r} default {value!r} does not match {element}")
    for key, element in schema.items():
        for single in element if isinstance(element, list) else [element]:
            if not (isinstance(single, str) and OPTION_TYPE.match(single)):
                problems.append(f"schema {key!r}: not an option type: {single!r}")
    return problems


def test_manifest_validates(manifest: dict[str, Any]) -> None:
    assert validate_manifest(manifest) == []


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"arch": ["armv7"]}, "bad value for 'arch'"),
        ({"slug": "pocket tts"}, "bad value for 'slug'"),
        ({"ports": {"10200": "x"}}, "bad value for 'ports'"),
        ({"colour": "blue"}, "unknown key 'colour'"),
        ({"options": {"temperature": 5.0}}, "does not match float"),
        ({"options": {"model": "klingon"}}, "does not match list"),
        ({"options": {"unlisted": 1}}, "has no schema"),
    ],
)
def test_the_schema_catches_mistakes(manifest: dict[str, Any], change: dict, expected: str) -> None:
    broken = {**manifest, **change}
    if "options" in change:
        broken["options"] = {**manifest["options"], **change["options"]}
    assert any(expected in problem for problem in validate_manifest(broken))
    broken.pop("name")
    assert "missing required key 'name'" in validate_manifest(broken)


def test_manifest_facts(manifest: dict[str, Any]) -> None:
    with open(ROOT / "pyproject.toml", "rb") as handle:
        assert manifest["version"] == tomllib.load(handle)["project"]["version"]
    assert manifest["init"] is False  # s6-overlay v3 must be PID 1
    assert manifest["discovery"] == ["wyoming"]
    assert any(
        (entry if isinstance(entry, str) else entry["type"]).split(":")[0] == "share"
        for entry in manifest["map"]
    )


def test_the_studio_is_the_ingress_page(manifest: dict[str, Any]) -> None:
    assert manifest["ingress"] is True
    assert manifest["ingress_stream"] is True  # uploads pass through as they arrive
    assert manifest["panel_icon"].startswith("mdi:") and manifest["panel_title"]
    # Only through ingress: the studio's port is not published on the host.
    assert f"{manifest['ingress_port']}/tcp" not in manifest["ports"]


def test_model_choices_are_the_catalog(manifest: dict[str, Any]) -> None:
    catalog = yaml.safe_load((ROOT / "wyoming_pocket_tts" / "data" / "catalog.yaml").read_text())
    model_list = re.fullmatch(r"list\((.+)\)", manifest["schema"]["model"].strip())
    assert model_list is not None
    assert model_list.group(1).split("|") == list(catalog["models"])
    assert manifest["options"]["model"] == catalog["default_model"]
    assert manifest["options"]["voice"] in catalog["voices"]


def test_build_file() -> None:
    build = load_yaml("build.yaml")
    assert set(build) <= {"build_from", "args", "labels", "squash"}
    image = re.compile(r"^([a-zA-Z\-.:\d{}]+/)*?([\-\w{}]+)/([\-\w{}]+)(:[.\-\w{}]+)?$")
    assert set(build["build_from"]) == set(load_yaml("config.yaml")["arch"])
    for arch, base in build["build_from"].items():
        assert image.match(base), base
        assert base.startswith(f"ghcr.io/home-assistant/{arch}-base-debian:")


def test_repository_file() -> None:
    repository = load_yaml("repository.yaml")
    assert set(repository) <= {"name", "url", "maintainer"}
    assert repository["name"] and repository["url"].startswith("https://")


def test_translations_cover_the_schema(manifest: dict[str, Any]) -> None:
    translations = load_yaml("translations/en.yaml")
    assert set(translations) <= {"configuration", "network"}
    assert set(translations["configuration"]) == set(manifest["schema"])
    for key, text in translations["configuration"].items():
        assert text.get("name") and text.get("description"), key
    assert set(translations["network"]) == set(manifest["ports"])


def test_the_add_on_documentation_has_a_section_for_each_option(manifest: dict[str, Any]) -> None:
    """DOCS.md is what the add-on's Documentation tab shows beside its options."""
    docs = (ROOT / "DOCS.md").read_text()
    documented = re.findall(r"^### Option: `([a-z_]+)`$", docs, re.MULTILINE)
    assert sorted(documented) == sorted(manifest["schema"])


def test_exactly_one_addon_is_found_the_supervisor_way() -> None:
    """The Supervisor globs **/config.* and skips dot folders and rootfs."""
    found = [
        path.relative_to(ROOT)
        for path in ROOT.glob("**/config.*")
        if path.suffix in (".yaml", ".yml", ".json")
        and not any(
            part.startswith(".") or part == "rootfs" for part in path.relative_to(ROOT).parts
        )
    ]
    assert found == [Path("config.yaml")]


def test_no_other_file_is_named_like_a_manifest() -> None:
    """Stricter than the Supervisor: not even in the folders it skips (but .git)."""
    names = {"config.yaml", "config.yml", "config.json"}
    found = []
    for folder, subfolders, files in os.walk(ROOT):
        subfolders[:] = [name for name in subfolders if name != ".git"]  # prune the walk
        found += [Path(folder, name).relative_to(ROOT) for name in files if name in names]
    assert found == [Path("config.yaml")]


def test_s6_services_are_wired() -> None:
    assert (S6 / "pocket-tts" / "type").read_text().strip() == "longrun"
    assert (S6 / "discovery" / "type").read_text().strip() == "oneshot"
    assert (S6 / "discovery" / "up").read_text().strip() == "/etc/s6-overlay/s6-rc.d/discovery/run"
    assert (S6 / "discovery" / "dependencies.d" / "pocket-tts").exists()
    assert (S6 / "pocket-tts" / "dependencies.d" / "base").exists()
    assert {p.name for p in (S6 / "user" / "contents.d").iterdir()} == {"pocket-tts", "discovery"}
    for script in (RUN_SCRIPT, S6 / "pocket-tts" / "finish", DISCOVERY_SCRIPT):
        assert os.access(script, os.X_OK), f"{script} is not executable"
        assert script.read_text().startswith("#!/command/with-contenv bashio\n")


# ---------------------------------------------------------------------------
# Running the s6 scripts

# bashio's `config` answers with the same jq query as the real library; the log,
# JSON and discovery helpers record what they are given.
BASHIO_STUB = r"""#!/bin/bash
set -o errexit -o errtrace -o nounset -o pipefail
bashio::config() {
    local result
    result=$(jq --raw-output -c -M --arg key "$1" '
        if (.[$key] == null) then null
        elif (.[$key] | type == "string") then .[$key] // empty
        elif (.[$key] | type == "boolean") then .[$key] // false
        elif (.[$key] | type == "array") then (if .[$key] == [] then empty else .[$key][] end)
        else .[$key] end' "${STUB_OPTIONS}")
    if [[ "${result}" == "null" ]]; then echo "${2:-null}"; else printf "%s" "${result}"; fi
}
bashio::config.true() { [[ "$(bashio::config "$1")" == "true" ]]; }
bashio::config.has_value() {
    local v
    v="$(bashio::config "$1" "")"
    [[ -n "${v}" && "${v}" != "null" ]]
}
bashio::log.info() { echo "INFO: $*" >&2; }
bashio::log.warning() { echo "WARNING: $*" >&2; }
bashio::log.error() { echo "ERROR: $*" >&2; }
bashio::var.json() {
    local arguments=() filter='{}' index=0
    while (($#)); do
        arguments+=(--arg "k${index}" "$1" --arg "v${index}" "$2")
        filter+=" + {(\$k${index}): \$v${index}}"
        shift 2
        index=$((index + 1))
    done
    jq -c -n "${arguments[@]}" "${filter}"
}
bashio::discovery() {
    printf '%s %s\n' "$1" "$2" >> "${STUB_DISCOVERY_LOG}"
    [[ "${STUB_DISCOVERY_FAILS:-0}" != 1 ]] && echo "uuid"
}
script="$1"
shift
source "${script}" "$@"
"""

# Stands in for `python3`: records each call's arguments in a file of its own
# (NUL-separated, so spaces survive); as the health check, it fails
# STUB_UNHEALTHY_TIMES times before succeeding.
PYTHON_STUB = r"""#!/bin/bash
calls=$(find "${STUB_CALLS}" -type f | wc -l)
printf '%s\0' "$@" > "${STUB_CALLS}/$(printf '%03d' "${calls}")"
if [[ "${3:-}" == "health-check" ]]; then
    (( calls >= ${STUB_UNHEALTHY_TIMES:-0} ))
fi
"""


@pytest.fixture()
def stubs(tmp_path: Path) -> dict[str, Any]:
    if shutil.which("bash") is None or shutil.which("jq") is None:
        pytest.skip("needs bash and jq (bashio runs on them)")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    programs = {
        "bashio": BASHIO_STUB,
        "python3": PYTHON_STUB,
        "sleep": "#!/bin/bash\n",  # the discovery loop's wait: not worth waiting for here
        "hostname": "#!/bin/bash\necho addon-host\n",
        "getent": '#!/bin/bash\n[[ -n "${STUB_GETENT_DIR:-}" && -f "${STUB_GETENT_DIR}/$1" ]] '
        '&& cat "${STUB_GETENT_DIR}/$1" || exit 2\n',
    }
    for name, text in programs.items():
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    env = {
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "STUB_OPTIONS": str(tmp_path / "options.json"),
        "STUB_CALLS": str(tmp_path / "calls"),
        "STUB_DISCOVERY_LOG": str(tmp_path / "discovery.log"),
        "POCKET_TTS_SHARE_DIR": str(tmp_path / "share" / "pocket-tts"),
        "WYOMING_POCKET_TTS_VOICES_DIR": "/data/voices",
    }
    return {"env": env, "tmp": tmp_path}


def run_script(stubs: dict[str, Any], script: Path, options: dict | None = None, **extra_env: str):
    if options is not None:
        Path(stubs["env"]["STUB_OPTIONS"]).write_text(json.dumps(options))
    env = {**stubs["env"], **extra_env}
    calls_dir = Path(env["STUB_CALLS"])
    shutil.rmtree(calls_dir, ignore_errors=True)
    calls_dir.mkdir()
    process = subprocess.run(
        [str(Path(env["PATH"].split(":")[0]) / "bashio"), str(script)],
        check=False,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    calls = [path.read_bytes().decode().split("\0")[:-1] for path in sorted(calls_dir.iterdir())]
    return process, calls


def server_command(stubs: dict[str, Any], options: dict) -> list[str]:
    process, calls = run_script(stubs, RUN_SCRIPT, options)
    assert process.returncode == 0, process.stderr
    assert len(calls) == 1, calls
    assert calls[0][:2] == ["-m", "wyoming_pocket_tts"]
    return calls[0][2:]


def variant(value: Any, element: Any) -> Any:
    """A valid option value different from `value`, from its schema element."""
    if isinstance(element, list):
        if element[0].startswith("list("):
            return element[0][5:-1].split("|")[-2:]
        return ["marius", "my voice"]
    letters = re.match(r"[a-z]+", element)
    assert letters is not None
    kind = letters.group()
    if kind == "bool":
        return not value
    if kind == "list":
        return next(choice for choice in element[5:-1].split("|") if choice != value)
    if kind == "int":
        return value + 1
    if kind == "float":
        return round(value + 0.25, 2)
    return "cosette"


@pytest.fixture(scope="module")
def server_parser():
    import argparse

    serve = pytest.importorskip("wyoming_pocket_tts.commands.serve")
    parser = argparse.ArgumentParser(exit_on_error=False)
    serve.configure(parser)
    return parser


def test_defaults_start_the_server(stubs, manifest, server_parser) -> None:
    argv = server_command(stubs, manifest["options"])
    args = server_parser.parse_args(argv)
    options = manifest["options"]
    (port,) = manifest["ports"]
    assert args.uri == f"tcp://0.0.0.0:{port.removesuffix('/tcp')}"
    assert args.model == [options["model"], *options["more_models"]]
    assert args.max_loaded_models == options["max_loaded_models"]
    assert args.voice == options["voice"]
    assert args.preload_voice == []
    assert args.temperature == options["temperature"]
    assert args.max_loaded_voices == options["max_loaded_voices"]
    assert args.no_streaming is not options["streaming"]
    assert args.local_files_only is options["local_files_only"]
    assert args.debug is options["debug_logging"]
    assert args.download_dir == Path("/data")
    assert args.voices_dir == Path(stubs["env"]["POCKET_TTS_SHARE_DIR"]) / "voices"
    assert args.voices_dir.is_dir()  # created for users to drop voices into
    # The studio listens on the ingress port, for the Supervisor's ingress proxy only.
    assert args.http_uri == ("0.0.0.0", manifest["ingress_port"])
    assert [str(network) for network in args.http_allow] == ["172.30.32.2/32"]


@pytest.mark.parametrize("key", list(load_yaml("config.yaml")["options"]))
def test_every_option_reaches_the_command_line(stubs, manifest, server_parser, key) -> None:
    options = manifest["options"]
    changed = {**options, key: variant(options[key], manifest["schema"][key])}
    before = vars(server_parser.parse_args(server_command(stubs, options)))
    after = vars(server_parser.parse_args(server_command(stubs, changed)))
    differences = {name for name in before if before[name] != after[name]}
    assert len(differences) == 1, f"{key} changed {differences or 'nothing'}"
    (name,) = differences
    value = after[name]
    expected = changed[key]
    if isinstance(value, bool):  # flags: --no-streaming and --no-normalize turn theirs off
        assert value is (not expected if name in ("no_streaming", "no_normalize") else expected)
    elif name == "model":  # the main model first, then the other languages'
        assert value == [changed["model"], *changed["more_models"]]
    else:
        assert value == expected


def test_a_hugging_face_token_reaches_the_server_in_its_environment(stubs, manifest) -> None:
    """The gated weights that voice cloning needs download with the token; it goes in
    the environment (where huggingface_hub reads it), never on the command line."""
    seen = stubs["tmp"] / "token"
    python = Path(stubs["env"]["PATH"].split(":")[0]) / "python3"
    python.write_text(f'#!/bin/bash\nprintf "%s|%s" "${{HF_TOKEN-unset}}" "$*" > {seen}\n')
    for options, token in ((manifest["options"], "unset"),
                           ({**manifest["options"], "hf_token": "hf_secret"}, "hf_secret")):
        process, _ = run_script(stubs, RUN_SCRIPT, options)
        assert process.returncode == 0, process.stderr
        environment, arguments = seen.read_text().split("|")
        assert environment == token
        assert "hf_secret" not in arguments


def test_models_folder_is_used_when_present(stubs, manifest, server_parser) -> None:
    models = Path(stubs["env"]["POCKET_TTS_SHARE_DIR"]) / "models"
    models.mkdir(parents=True)
    args = server_parser.parse_args(server_command(stubs, manifest["options"]))
    assert args.data_dir == [models]


def test_unwritable_share_disables_custom_voices(stubs, manifest) -> None:
    blocker = stubs["tmp"] / "not-a-folder"
    blocker.write_text("")
    process, calls = run_script(
        stubs, RUN_SCRIPT, manifest["options"], POCKET_TTS_SHARE_DIR=str(blocker / "pocket-tts")
    )
    assert process.returncode == 0
    assert "--voices-dir" not in calls[0]
    assert "custom voices are disabled" in process.stderr


def _getent(stubs, ahosts: str, ahostsv4: str) -> dict[str, str]:
    folder = stubs["tmp"] / "getent"
    folder.mkdir(exist_ok=True)
    (folder / "ahosts").write_text(ahosts)
    (folder / "ahostsv4").write_text(ahostsv4)
    return {"STUB_GETENT_DIR": str(folder)}


def _announced(stubs) -> list[tuple[str, dict]]:
    lines = Path(stubs["env"]["STUB_DISCOVERY_LOG"]).read_text().splitlines()
    return [(line.split(" ", 1)[0], json.loads(line.split(" ", 1)[1])) for line in lines]


def test_discovery_waits_for_the_server_then_announces_the_hostname(stubs) -> None:
    env = _getent(stubs, "172.30.33.5 STREAM addon-host\n", "172.30.33.5 STREAM addon-host\n")
    process, calls = run_script(stubs, DISCOVERY_SCRIPT, {}, STUB_UNHEALTHY_TIMES="2", **env)
    assert process.returncode == 0, process.stderr
    assert len(calls) == 3  # two failed health checks, then the one that answered
    assert all(call[:3] == ["-m", "wyoming_pocket_tts", "health-check"] for call in calls)
    assert "tcp://127.0.0.1:10200" in calls[0]
    assert _announced(stubs) == [("wyoming", {"uri": "tcp://addon-host:10200"})]


def test_discovery_prefers_ipv4_over_an_ipv6_first_hostname(stubs) -> None:
    env = _getent(
        stubs, "fd00::5 STREAM addon-host\n172.30.33.5 STREAM\n", "172.30.33.5 STREAM addon-host\n"
    )
    process, _ = run_script(stubs, DISCOVERY_SCRIPT, {}, **env)
    assert process.returncode == 0, process.stderr
    assert _announced(stubs) == [("wyoming", {"uri": "tcp://172.30.33.5:10200"})]


def test_discovery_failure_is_reported_not_fatal(stubs) -> None:
    process, _ = run_script(stubs, DISCOVERY_SCRIPT, {}, STUB_DISCOVERY_FAILS="1")
    assert process.returncode == 0
    assert "Could not announce tcp://addon-host:10200" in process.stderr
    assert "Wyoming Protocol" in process.stderr  # says how to add it by hand
