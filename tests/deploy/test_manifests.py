"""The production manifests keep the promises deploy/README.md makes, checked without a cluster.

Schema validity is kubeconform's job (deploy/validate.sh). These tests check what no schema can:
one Deployment per service, readiness on /healthz at the documented ports, the KEDA bound
against schemas.topics, and that no credential is ever written into a manifest.
They read the base's files directly, and the rendered overlays when kustomize is at hand
(deploy/validate.sh passes its own output through DEPLOY_RENDERED_DIR).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from deploy.local.pipeline import DEPLOYED, TOPOLOGY
from schemas import topics
from services.cli import SUBCOMMANDS

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "deploy" / "k8s"
COMPOSE_FILE = ROOT / "deploy" / "docker-compose.yml"
BUILDS = ("base", "overlays/production", "overlays/example")

SERVICES = DEPLOYED  # the topology, declared once in deploy/local/pipeline.py
# The port each service serves /healthz (and /metrics) on: the contract in deploy/README.md.
HEALTH_PORTS = {name: TOPOLOGY[name].deploy_port for name in SERVICES}
# Postgres: the owner's DSN is for `migrate` alone; each service that reads or writes the projection
# connects with its own DSN, a login in a least-privilege group role of migration 004.
OWN_DSN = {
    "projector": "PROJECTOR_DATABASE_URL",  # in incident_memory_projector
    "agent": "AGENT_DATABASE_URL",  # in incident_memory_reader (and the telemetry MCP server it spawns)
    "slack": "SLACK_DATABASE_URL",  # in incident_memory_reader
    "ingest": "INGEST_DATABASE_URL",  # in incident_memory_reader (the thread directory)
}
# Kafka: one principal per service, and one for `migrate` (it creates the topics). All optional.
KAFKA_PRINCIPALS = ("MIGRATE", *(s.upper() for s in SERVICES))
KAFKA_LOGIN_KEYS = {f"{p}_KAFKA_SASL_{what}" for p in KAFKA_PRINCIPALS for what in ("USERNAME", "PASSWORD")}
KAFKA_DIR = "/etc/incident-memory/kafka"
KAFKA_CLIENT_CONFIG = f"{KAFKA_DIR}/client.properties"
SECRET_KEYS = {
    "DATABASE_URL",
    *OWN_DSN.values(),
    "SLACK_SIGNING_SECRET",
    "ALERTMANAGER_TOKEN",
    "OPENAI_API_KEY",
    "SLACK_BOT_TOKEN",
    *KAFKA_LOGIN_KEYS,
}
SECRET_NAME = re.compile(r"SECRET|TOKEN|PASSWORD|API_KEY|DATABASE_URL|DSN")
PARTITIONS = {spec.name: spec.partitions for spec in topics.TOPICS}

Doc = dict[str, Any]


# ------------------------------------------------------------------ loading


def load_base() -> list[Doc]:
    """The base's resources as files, plus its generated ConfigMap (a minimal kustomize)."""
    kustomization = yaml.safe_load((K8S / "base" / "kustomization.yaml").read_text())
    docs: list[Doc] = []
    for resource in kustomization["resources"]:
        docs += [d for d in yaml.safe_load_all((K8S / "base" / resource).read_text()) if d]
    for gen in kustomization.get("configMapGenerator", []):
        data = dict(line.split("=", 1) for line in gen.get("literals", []))
        for entry in gen.get("files", []):
            key, _, path = entry.rpartition("=")
            data[key or Path(path).name] = (K8S / "base" / path).read_text()
        docs.append(
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": gen["name"]}, "data": data}
        )
    return docs


def _kustomize() -> list[str] | None:
    cached = sorted((ROOT / ".cache" / "deploy" / "tools").glob("kustomize-*/kustomize"))
    if cached:
        return [str(cached[-1]), "build"]
    if shutil.which("kustomize"):
        return ["kustomize", "build"]
    if shutil.which("kubectl"):
        return ["kubectl", "kustomize"]
    return None


def rendered(build: str) -> list[Doc]:
    """`kustomize build` of one directory: validate.sh's output if given, else rendered here."""
    given = os.environ.get("DEPLOY_RENDERED_DIR")
    if given:
        text = (Path(given) / f"{build.replace('/', '-')}.yaml").read_text()
    else:
        cmd = _kustomize()
        if cmd is None:
            pytest.skip("no kustomize here (deploy/validate.sh installs one)")
        text = subprocess.run(
            [*cmd, str(K8S / build)], check=True, capture_output=True, text=True, timeout=60
        ).stdout
    return [d for d in yaml.safe_load_all(text) if d]


@pytest.fixture(params=["files:base", *BUILDS])
def docs(request: pytest.FixtureRequest) -> list[Doc]:
    return load_base() if request.param == "files:base" else rendered(request.param)


def of_kind(docs: list[Doc], kind: str) -> list[Doc]:
    return [d for d in docs if d.get("kind") == kind]


def deployments(docs: list[Doc]) -> dict[str, Doc]:
    return {d["metadata"]["name"]: d for d in of_kind(docs, "Deployment")}


def containers(deployment: Doc, init: bool = True) -> Iterator[Doc]:
    spec = deployment["spec"]["template"]["spec"]
    yield from spec["containers"]
    if init:
        yield from spec.get("initContainers", [])


def config_data(docs: list[Doc]) -> dict[str, str]:
    (cm,) = [
        d for d in of_kind(docs, "ConfigMap") if d["metadata"]["name"].startswith("incident-memory-config")
    ]
    return dict(cm["data"])


def scaled_object(docs: list[Doc]) -> Doc:
    (so,) = of_kind(docs, "ScaledObject")
    return so


# ------------------------------------------------------------------ Deployments


def test_one_deployment_per_service_running_its_subcommand(docs: list[Doc]) -> None:
    names = [d["metadata"]["name"] for d in of_kind(docs, "Deployment")]
    assert sorted(names) == sorted(SERVICES)
    for name, dep in deployments(docs).items():
        (main,) = dep["spec"]["template"]["spec"]["containers"]
        assert main["args"][0] == TOPOLOGY[name].subcommand and main["args"][0] in SUBCOMMANDS
        assert main["image"].split("/")[-1].startswith("incident-memory")


def test_readiness_and_liveness_probe_healthz_on_the_documented_port(docs: list[Doc]) -> None:
    for name, dep in deployments(docs).items():
        (main,) = dep["spec"]["template"]["spec"]["containers"]
        ports = {p["name"]: p["containerPort"] for p in main["ports"]}
        for probe in ("readinessProbe", "livenessProbe"):
            get = main[probe]["httpGet"]
            assert get["path"] == "/healthz", (name, probe)
            port = ports[get["port"]] if isinstance(get["port"], str) else get["port"]
            assert port == HEALTH_PORTS[name], (name, probe, port)
        # The service is told to listen there (flags of services/*/main.py, compactor/app.py).
        flag = TOPOLOGY[name].port_flag
        assert main["args"][main["args"].index(flag) + 1] == str(HEALTH_PORTS[name]), name
        if name == "ingest":  # its default host is loopback, unreachable from the kubelet
            assert main["args"][main["args"].index("--host") + 1] == "0.0.0.0"
        annotations = dep["spec"]["template"]["metadata"]["annotations"]
        assert annotations["prometheus.io/port"] == str(HEALTH_PORTS[name])


def test_ingest_service_routes_to_the_ingest_pods(docs: list[Doc]) -> None:
    (svc,) = of_kind(docs, "Service")
    ingest = deployments(docs)["ingest"]
    labels = ingest["spec"]["template"]["metadata"]["labels"]
    assert svc["metadata"]["name"] == "ingest"
    assert svc["spec"]["selector"].items() <= labels.items()
    (port,) = svc["spec"]["ports"]
    assert port["targetPort"] in ("http", HEALTH_PORTS["ingest"])


def test_every_pod_migrates_first(docs: list[Doc]) -> None:
    for name, dep in deployments(docs).items():
        inits = dep["spec"]["template"]["spec"].get("initContainers", [])
        assert [c["args"][0] for c in inits] == ["migrate"], name
        assert "migrate" in SUBCOMMANDS


def test_pods_run_as_non_root_with_a_read_only_root_and_bounded_resources(docs: list[Doc]) -> None:
    for name, dep in deployments(docs).items():
        pod = dep["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["runAsUser"] != 0
        assert pod["automountServiceAccountToken"] is False
        for c in containers(dep):
            sc = c["securityContext"]
            assert sc["allowPrivilegeEscalation"] is False, (name, c["name"])
            assert sc["readOnlyRootFilesystem"] is True, (name, c["name"])
            assert sc["capabilities"]["drop"] == ["ALL"], (name, c["name"])
            for bound in ("requests", "limits"):
                assert {"cpu", "memory"} <= c["resources"][bound].keys(), (name, c["name"], bound)


def test_replicas_never_exceed_the_partitions_they_consume(docs: list[Doc]) -> None:
    consumed = {"projector": topics.COMPACTED, "agent": topics.WAKE}
    deps = deployments(docs)
    for name, topic in consumed.items():
        assert deps[name]["spec"].get("replicas", 1) <= PARTITIONS[topic], name
    # KEDA owns the compactor's replica count; a fixed one would fight its HPA on every apply.
    assert "replicas" not in deps["compactor"]["spec"]
    # The voice: one poster, never two at once (a rollout stops the old pod before the new starts).
    assert deps["slack"]["spec"]["replicas"] == 1 and deps["slack"]["spec"]["strategy"]["type"] == "Recreate"


# ------------------------------------------------------------------ KEDA


def test_keda_scales_the_compactor_on_its_lag_up_to_the_partition_count(docs: list[Doc]) -> None:
    so = scaled_object(docs)
    assert so["apiVersion"] == "keda.sh/v1alpha1"
    spec = so["spec"]
    assert spec["scaleTargetRef"]["name"] == "compactor"
    assert spec["scaleTargetRef"].get("kind", "Deployment") == "Deployment"
    (trigger,) = spec["triggers"]
    assert trigger["type"] == "kafka"
    meta = trigger["metadata"]
    assert meta["topic"] == topics.EVENTS
    assert meta["consumerGroup"]
    assert int(meta["lagThreshold"]) > 0
    # The bound that matters: a consumer beyond the partition count would own no partition.
    assert 1 <= spec["minReplicaCount"] <= spec["maxReplicaCount"] <= PARTITIONS[meta["topic"]]
    assert meta.get("allowIdleConsumers", "false") == "false"


def test_keda_reads_the_same_kafka_cluster_as_the_services(docs: list[Doc]) -> None:
    meta = scaled_object(docs)["spec"]["triggers"][0]["metadata"]
    if "bootstrapServersFromEnv" in meta:
        assert meta["bootstrapServersFromEnv"] == "KAFKA_BOOTSTRAP_SERVERS"
    else:
        assert meta["bootstrapServers"] == config_data(docs)["KAFKA_BOOTSTRAP_SERVERS"]


def test_the_production_overlay_points_everything_at_its_own_kafka() -> None:
    base, prod = rendered("base"), rendered("overlays/production")
    servers = config_data(prod)["KAFKA_BOOTSTRAP_SERVERS"]
    assert servers != config_data(base)["KAFKA_BOOTSTRAP_SERVERS"]
    assert scaled_object(prod)["spec"]["triggers"][0]["metadata"]["bootstrapServers"] == servers


# ------------------------------------------------------------------ secrets


def test_secrets_are_never_inlined(docs: list[Doc]) -> None:
    for name, dep in deployments(docs).items():
        (main,) = dep["spec"]["template"]["spec"]["containers"]
        for c in containers(dep):
            owner = name.upper() if c is main else c["name"].upper()  # SERVICE_..., or MIGRATE_...
            for env in c.get("env", []):
                if env["name"] in SECRET_KEYS or SECRET_NAME.search(env["name"]):
                    assert "value" not in env, (name, c["name"], env["name"])
                    assert env["valueFrom"]["secretKeyRef"]["name"] == "incident-memory"
                if "secretKeyRef" in env.get("valueFrom", {}):  # its own key, or the shared one
                    assert env["valueFrom"]["secretKeyRef"]["key"] in (env["name"], f"{owner}_{env['name']}")
            for src in c.get("envFrom", []):
                assert "configMapRef" in src, (name, c["name"], src)
    data = config_data(docs)
    assert not [k for k in data if k in SECRET_KEYS or SECRET_NAME.search(k)]
    assert not [v for v in data.values() if re.search(r"://[^/@\s]+:[^/@\s]+@", v)], "credentials in a URL"


def test_only_the_placeholder_overlay_renders_a_secret() -> None:
    assert not of_kind(load_base(), "Secret")
    assert not of_kind(rendered("overlays/production"), "Secret")
    (secret,) = of_kind(rendered("overlays/example"), "Secret")
    assert set(secret["data"]) == SECRET_KEYS
    assert secret["metadata"]["annotations"]["incident-memory/placeholder"].startswith("true")
    placeholder = (K8S / "components" / "example-secret" / "placeholder-secret.env").read_text()
    values = [line.split("=", 1)[1] for line in placeholder.splitlines() if "=" in line]
    assert values and all("PLACEHOLDER" in v for v in values)
    users = {k: v.split("://", 1)[1].split(":", 1)[0] for k, v in (ln.split("=", 1) for ln in placeholder.splitlines())
             if k.endswith("DATABASE_URL")}  # fmt: skip
    assert len(set(users.values())) == len(users) == 1 + len(OWN_DSN), (
        users
    )  # no service logs in as the owner


def test_each_service_gets_only_the_secrets_it_uses() -> None:
    login = {"KAFKA_SASL_USERNAME", "KAFKA_SASL_PASSWORD"}
    want = {
        "ingest": {"SLACK_SIGNING_SECRET", "ALERTMANAGER_TOKEN", "DATABASE_URL", *login},
        "compactor": {"OPENAI_API_KEY", *login},
        "projector": {"DATABASE_URL", *login},
        "agent": {"DATABASE_URL", "OPENAI_API_KEY", *login},
        "slack": {"DATABASE_URL", "SLACK_BOT_TOKEN", *login},
    }
    for name, dep in deployments(load_base()).items():
        (main,) = dep["spec"]["template"]["spec"]["containers"]
        got = {e["name"] for e in main.get("env", []) if "valueFrom" in e}
        assert got == want[name], name


def _env(container: Doc) -> dict[str, Doc]:
    return {e["name"]: e for e in container.get("env", [])}


def _secret_key(container: Doc, name: str) -> str | None:
    ref = _env(container).get(name, {}).get("valueFrom", {}).get("secretKeyRef")
    return None if ref is None else str(ref["key"])


def test_each_service_connects_to_postgres_as_its_own_role_and_only_migrate_as_the_owner(
    docs: list[Doc],
) -> None:
    for name, dep in deployments(docs).items():
        (main,) = dep["spec"]["template"]["spec"]["containers"]
        # the owner's DSN (DDL, grants) is the migrate init container's alone
        assert _secret_key(main, "DATABASE_URL") == OWN_DSN.get(name), name
        for init in dep["spec"]["template"]["spec"]["initContainers"]:
            assert _secret_key(init, "DATABASE_URL") == "DATABASE_URL", (name, init["name"])
        for key in OWN_DSN.values():  # and no service is handed another's
            if key != OWN_DSN.get(name):
                assert key not in {_secret_key(main, e) for e in _env(main)}, (name, key)


def _kafka_client_configmap(docs: list[Doc]) -> Doc:
    (cm,) = [
        d
        for d in of_kind(docs, "ConfigMap")
        if d["metadata"]["name"].startswith("incident-memory-kafka-client")
    ]
    return cm


def test_every_kafka_client_reads_the_mounted_client_properties_as_its_own_principal(docs: list[Doc]) -> None:
    configmap = _kafka_client_configmap(docs)["metadata"]["name"]
    for name, dep in deployments(docs).items():
        pod = dep["spec"]["template"]["spec"]
        (volume,) = [v for v in pod["volumes"] if v["name"] == "kafka-client"]
        sources = volume["projected"]["sources"]
        assert {"name": configmap, "optional": True} in [s.get("configMap") for s in sources], name
        assert {"name": "incident-memory-kafka-tls", "optional": True} in [
            s.get("secret") for s in sources
        ], name
        assert volume["projected"]["defaultMode"] & 0o007 == 0, name  # keys in the Secret: not world-readable
        (main,) = pod["containers"]
        for c in containers(dep):  # the service, and `migrate`, which creates the topics
            principal = name.upper() if c is main else c["name"].upper()
            mounts = [m for m in c["volumeMounts"] if m["name"] == "kafka-client"]
            assert mounts == [{"name": "kafka-client", "mountPath": KAFKA_DIR, "readOnly": True}], (
                name,
                c["name"],
            )
            env = _env(c)
            assert env["KAFKA_CLIENT_CONFIG"] == {"name": "KAFKA_CLIENT_CONFIG", "value": KAFKA_CLIENT_CONFIG}
            for what in ("USERNAME", "PASSWORD"):
                ref = env[f"KAFKA_SASL_{what}"]["valueFrom"]["secretKeyRef"]
                assert ref == {
                    "name": "incident-memory",
                    "key": f"{principal}_KAFKA_SASL_{what}",
                    "optional": True,
                }


def _client_properties(docs: list[Doc], tmp_path: Path) -> Any:
    """The mounted client.properties, parsed as the services parse it (the CA file stood in for)."""
    from services.runtime.kafka_client import parse_security, read_properties

    path = tmp_path / "client.properties"
    path.write_text(_kafka_client_configmap(docs)["data"]["client.properties"])
    props = read_properties(path)
    if "ssl.truststore.location" in props:
        assert props["ssl.truststore.location"].startswith(f"{KAFKA_DIR}/")  # inside the mount
        (tmp_path / "ca.pem").write_text("")
        props["ssl.truststore.location"] = str(tmp_path / "ca.pem")
    return parse_security(props, username="u", password="p") if props.get("security.protocol") == "SASL_SSL" \
        else parse_security(props)  # fmt: skip


def test_the_base_connects_in_plaintext_and_production_with_sasl_ssl(tmp_path: Path) -> None:
    assert _client_properties(load_base(), tmp_path).protocol == "PLAINTEXT"
    for build in BUILDS:
        docs = rendered(build)
        security = _client_properties(docs, tmp_path)
        if build == "base":
            assert security.protocol == "PLAINTEXT"
            assert "authenticationRef" not in scaled_object(docs)["spec"]["triggers"][0]
            continue
        assert (security.protocol, security.mechanism) == ("SASL_SSL", "SCRAM-SHA-512")
        assert security.check_hostname is True
        assert security.ca_file == str(tmp_path / "ca.pem")
        # KEDA reads the lag over the same SASL_SSL, as the compactor
        trigger = scaled_object(docs)["spec"]["triggers"][0]
        keda_sasl = {"SCRAM-SHA-512": "scram_sha512", "SCRAM-SHA-256": "scram_sha256", "PLAIN": "plaintext"}
        assert trigger["metadata"]["sasl"] == keda_sasl[security.mechanism]
        assert trigger["metadata"]["tls"] == "enable"
        (auth,) = [a for a in of_kind(docs, "TriggerAuthentication")
                   if a["metadata"]["name"] == trigger["authenticationRef"]["name"]]  # fmt: skip
        refs = {r["parameter"]: (r["name"], r["key"]) for r in auth["spec"]["secretTargetRef"]}
        assert refs == {
            "username": ("incident-memory", "COMPACTOR_KAFKA_SASL_USERNAME"),
            "password": ("incident-memory", "COMPACTOR_KAFKA_SASL_PASSWORD"),
            "ca": ("incident-memory-kafka-tls", "ca.pem"),
        }


# ------------------------------------------------------------------ Compose and Dockerfile


def _compose() -> Doc:
    doc: Doc = yaml.safe_load(COMPOSE_FILE.read_text())
    return doc


def test_compose_runs_the_four_services_after_migrate() -> None:
    services = _compose()["services"]
    assert {*SERVICES, "migrate", "kafka", "postgres"} == set(services)
    assert services["kafka"]["image"].startswith("apache/kafka:")
    for name in SERVICES:
        assert services[name]["command"][0] == TOPOLOGY[name].subcommand
        flag = TOPOLOGY[name].port_flag
        command = services[name]["command"]
        assert command[command.index(flag) + 1] == str(HEALTH_PORTS[name]), name
        assert services[name]["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
        assert f":{HEALTH_PORTS[name]}/healthz" in " ".join(services[name]["healthcheck"]["test"])
    assert services["migrate"]["command"][0] == "migrate"
    assert services["kafka"]["environment"]["KAFKA_AUTO_CREATE_TOPICS_ENABLE"] == "false"


def test_compose_requires_secrets_instead_of_holding_them() -> None:
    for name, service in _compose()["services"].items():
        for key, value in (service.get("environment") or {}).items():
            if key == "KAFKA_SASL_PASSWORD":  # optional (a PLAINTEXT broker), but never written here
                assert (
                    value == f"${{{'MIGRATE' if name == 'migrate' else name.upper()}_KAFKA_SASL_PASSWORD:-}}"
                )
            elif key in SECRET_KEYS or SECRET_NAME.search(key):
                assert isinstance(value, str) and value.startswith("${"), (name, key)
                assert ":?" in value, (name, key)


def test_compose_services_use_their_own_postgres_login_and_kafka_settings() -> None:
    services = _compose()["services"]
    for name in (*SERVICES, "migrate"):
        env = services[name]["environment"]
        principal = "MIGRATE" if name == "migrate" else name.upper()
        assert env["KAFKA_CLIENT_CONFIG"] == KAFKA_CLIENT_CONFIG, name
        assert env["KAFKA_SASL_USERNAME"] == f"${{{principal}_KAFKA_SASL_USERNAME:-}}", name
        assert any(v.endswith(f":{KAFKA_DIR}:ro") for v in services[name]["volumes"]), name
        dsn = env.get("DATABASE_URL")
        if name == "migrate":
            assert dsn.startswith("${DATABASE_URL:-postgresql://incident_memory:"), dsn
        elif name in OWN_DSN:
            role = "im_projector" if name == "projector" else "im_reader"
            assert dsn.startswith(f"${{{OWN_DSN[name]}:-postgresql://{role}:"), (name, dsn)
        else:
            assert dsn is None, name  # the compactor never touches Postgres
    init = (COMPOSE_FILE.parent / "compose" / "postgres-init" / "10-least-privilege-logins.sh").read_text()
    assert "im_projector LOGIN PASSWORD :'projector_pw' IN ROLE incident_memory_projector" in init
    assert "im_reader LOGIN PASSWORD :'reader_pw' IN ROLE incident_memory_reader" in init


def test_compose_config_output_when_validated() -> None:
    given = os.environ.get("DEPLOY_RENDERED_DIR")
    if not given:
        pytest.skip("docker compose config runs in deploy/validate.sh")
    config = json.loads((Path(given) / "compose.json").read_text())
    env = config["services"]["ingest"]["environment"]
    assert env["SLACK_SIGNING_SECRET"].startswith("PLACEHOLDER")
    assert config["services"]["compactor"]["command"][0] == "compactor"
    users = {
        name: service["environment"].get("DATABASE_URL", "").split("://")[-1].split(":")[0]
        for name, service in config["services"].items()
        if name in (*SERVICES, "migrate")
    }
    assert users == {"migrate": "incident_memory", "projector": "im_projector", "agent": "im_reader",
                     "slack": "im_reader", "ingest": "im_reader", "compactor": ""}  # fmt: skip
    for name in (*SERVICES, "migrate"):
        service = config["services"][name]
        assert service["environment"]["KAFKA_SASL_PASSWORD"] == ""  # unset in example.env: PLAINTEXT
        (mount,) = [v for v in service["volumes"] if v["target"] == KAFKA_DIR]
        assert mount["read_only"] is True and Path(mount["source"], "client.properties").is_file()


def test_dockerfile_is_multi_stage_slim_non_root_with_the_cli_as_entrypoint() -> None:
    lines = [ln.strip() for ln in (ROOT / "Dockerfile").read_text().splitlines()]
    instructions = [ln for ln in lines if ln and not ln.startswith("#")]
    froms = [ln.split()[1] for ln in instructions if ln.startswith("FROM ")]
    assert len(froms) >= 2 and all(f.startswith("python:3.11-slim") for f in froms)
    users = [ln.split()[1] for ln in instructions if ln.startswith("USER ")]
    assert users and users[-1].split(":")[0] not in ("0", "root")
    assert json.loads(instructions[[i.split()[0] for i in instructions].index("ENTRYPOINT")][11:]) == [
        "incident-memory-service"
    ]
    assert any("pip install ." in ln for ln in instructions)
    ignored = [
        ln.strip() for ln in (ROOT / ".dockerignore").read_text().splitlines() if not ln.startswith("#")
    ]
    assert {".git", ".venv", ".cache"} <= set(ignored)
    assert "README.md" not in ignored  # pyproject.toml's readme; pip install . needs it


def test_the_image_wheel_carries_production_code_only(tmp_path: Path) -> None:
    """What the Dockerfile copies (pyproject, README, schemas, services), built as `pip install .` would:
    the wheel has the contract and the services, and none of the dev tools (issue 19)."""
    lines = [ln.strip() for ln in (ROOT / "Dockerfile").read_text().splitlines()]
    copied = [ln.split()[1] for ln in lines if ln.startswith("COPY ") and "--from" not in ln]
    assert set(copied) == {"pyproject.toml", "schemas", "services"}, copied
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    for name in ("schemas", "services"):
        shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path / "w"), str(src)],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    (wheel,) = (tmp_path / "w").glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith((".dist-info", ".data"))}
    assert tops == {"schemas", "services"}, tops
    assert not [
        n for n in names if n.startswith(("deploy/local/seed/", "services/demo", "deploy/", "benchmarks/"))
    ]
    assert "services/cli.py" in names and "schemas/migrations/001_initial.sql" in names
    # the image runs the production CLI; the dev CLI's script would point into the absent deploy/
    (entry_points,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
    scripts = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "incident-memory-service = services.cli:main" in scripts
    assert any("rm /opt/venv/bin/incident-memory " in ln + " " for ln in lines)
