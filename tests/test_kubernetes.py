"""deploy/kubernetes.yaml: a Deployment whose probes run the health check, and a Service."""

from __future__ import annotations

import argparse
import tomllib
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def documents() -> dict[str, dict[str, Any]]:
    loaded = list(yaml.safe_load_all((ROOT / "deploy" / "kubernetes.yaml").read_text()))
    kinds = [document["kind"] for document in loaded if document]
    assert sorted(kinds) == ["Deployment", "Service"]
    return {document["kind"]: document for document in loaded if document}


@pytest.fixture(scope="module")
def container(documents) -> dict[str, Any]:
    (only,) = documents["Deployment"]["spec"]["template"]["spec"]["containers"]
    return only


def test_every_document_names_its_api(documents) -> None:
    assert documents["Deployment"]["apiVersion"] == "apps/v1"
    assert documents["Service"]["apiVersion"] == "v1"
    for document in documents.values():
        assert document["metadata"]["name"]


@pytest.mark.parametrize("probe", ["startupProbe", "readinessProbe", "livenessProbe"])
def test_probes_run_the_health_check(container, probe: str) -> None:
    command = container[probe]["exec"]["command"]
    assert command[:4] == ["python3", "-m", "wyoming_pocket_tts", "health-check"]
    timeout = float(command[command.index("--timeout") + 1])
    assert timeout < container[probe]["timeoutSeconds"]  # the check gives up before the kubelet


def test_startup_probe_allows_the_first_download(container) -> None:
    startup = container["startupProbe"]
    assert startup["periodSeconds"] * startup["failureThreshold"] >= 15 * 60


def test_service_reaches_the_pods(documents, container) -> None:
    deployment, service = documents["Deployment"], documents["Service"]
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    assert service["spec"]["selector"].items() <= pod_labels.items()
    (port,) = service["spec"]["ports"]
    assert port["targetPort"] in {p["name"] for p in container["ports"]}


def test_data_volume_and_image_version(documents, container) -> None:
    mounts = {mount["name"]: mount["mountPath"] for mount in container["volumeMounts"]}
    volumes = {
        volume["name"] for volume in documents["Deployment"]["spec"]["template"]["spec"]["volumes"]
    }
    assert mounts["data"] == "/data"
    assert set(mounts) <= volumes
    with open(ROOT / "pyproject.toml", "rb") as handle:
        version = tomllib.load(handle)["project"]["version"]
    assert container["image"].rsplit(":", 1)[1] == version


def test_arguments_and_environment_are_server_options(container, monkeypatch) -> None:
    serve = pytest.importorskip("wyoming_pocket_tts.commands.serve")
    for variable in container.get("env", []):
        monkeypatch.setenv(variable["name"], variable["value"])
    parser = argparse.ArgumentParser(exit_on_error=False)
    serve.configure(parser)
    args = parser.parse_args(container["args"])
    # The server listens on the container's port and reads voices from a mounted volume.
    assert urlsplit(args.uri).port in {p["containerPort"] for p in container["ports"]}
    assert str(args.voices_dir) in {mount["mountPath"] for mount in container["volumeMounts"]}
