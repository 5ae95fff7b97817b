"""The re-derivation's Kubernetes Jobs (deploy/k8s/components/rederive) do what docs/rederive.md says.

Schema validity is kubeconform's (deploy/validate.sh renders overlays/rederive-example, the example
overlay plus the component, and checks it -strict). These tests check what no schema can: the Jobs'
args, once Kubernetes has expanded $(REDERIVE_NAME), parse with the real command line; NAME is a
valid re-derivation name; the workers plus the coordinator's own worker are the events topic's
partitions; the pods are the live compactor's (image, security, Kafka client volume); credentials
come from the Secret alone, the owner's DSN to the coordinator only; and the component adds its Jobs
and ConfigMap without touching the live set. Like tests/deploy/test_manifests.py, they read
validate.sh's output (DEPLOY_RENDERED_DIR), else render with a kustomize at hand, else skip.
"""

from __future__ import annotations

import argparse
import base64
import re
import sys
from typing import TYPE_CHECKING

import pytest

from schemas import topics
from services.cli import build_parser
from services.compaction.config import SETTINGS_ENV, load_config
from services.rederive.names import check_name, names_for

# tests/deploy has no __init__.py: pytest imports its modules by their own name, with the directory on
# sys.path (rootdir-less "prepend" import mode), and mypy knows the same module by its package path.
if TYPE_CHECKING:
    from tests.deploy.test_manifests import (
        KAFKA_CLIENT_CONFIG,
        KAFKA_DIR,
        PARTITIONS,
        SECRET_KEYS,
        SECRET_NAME,
        Doc,
        deployments,
        of_kind,
        rendered,
    )
else:
    from test_manifests import (
        KAFKA_CLIENT_CONFIG,
        KAFKA_DIR,
        PARTITIONS,
        SECRET_KEYS,
        SECRET_NAME,
        Doc,
        deployments,
        of_kind,
        rendered,
    )

BUILD = "overlays/rederive-example"
LIVE = "overlays/example"  # what BUILD adds the component to
CONFIGMAP = "incident-memory-rederive"
LIVE_CONFIGMAP = "incident-memory-config"
KAFKA_CLIENT_CONFIGMAP = "incident-memory-kafka-client"
STATE_DIR = "/var/lib/incident-memory"
LOGIN = ("REDERIVE_KAFKA_SASL_USERNAME", "REDERIVE_KAFKA_SASL_PASSWORD")
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
# The hash suffix kustomize's generators add: the reference must be to the generated name, not the bare one.
GENERATED = re.compile(r"^(?P<base>.+)-[a-z0-9]{10}$")


@pytest.fixture(scope="module")
def docs() -> list[Doc]:
    return rendered(BUILD)


# ------------------------------------------------------------------ helpers


def _configmap(docs: list[Doc], name: str) -> Doc:
    (cm,) = [
        d
        for d in of_kind(docs, "ConfigMap")
        if (m := GENERATED.match(d["metadata"]["name"])) and m["base"] == name
    ]
    return cm


def _settings(docs: list[Doc]) -> dict[str, str]:
    return dict(_configmap(docs, CONFIGMAP)["data"])


def _name(docs: list[Doc]) -> str:
    return _settings(docs)["REDERIVE_NAME"]


def _jobs(docs: list[Doc]) -> tuple[Doc, Doc]:
    """(the coordinator, the workers), by their args: the workers' have --worker."""
    jobs = of_kind(docs, "Job")
    assert len(jobs) == 2, [j["metadata"]["name"] for j in jobs]
    workers = [j for j in jobs if "--worker" in _container(j)["args"]]
    coordinator = [j for j in jobs if j not in workers]
    assert len(workers) == len(coordinator) == 1, [j["metadata"]["name"] for j in jobs]
    return coordinator[0], workers[0]


def _pod(job: Doc) -> Doc:
    pod: Doc = job["spec"]["template"]["spec"]
    return pod


def _container(job: Doc) -> Doc:
    (container,) = _pod(job)["containers"]
    return container


def _environment(docs: list[Doc], container: Doc) -> dict[str, str]:
    """The container's literal environment as the kubelet builds it: envFrom in order (a later source
    wins), then env (which wins over envFrom). Values from a Secret are left out."""
    env: dict[str, str] = {}
    by_name = {d["metadata"]["name"]: d for d in of_kind(docs, "ConfigMap")}
    for source in container.get("envFrom", []):
        env.update(by_name[source["configMapRef"]["name"]].get("data", {}))
    for entry in container.get("env", []):
        if "value" in entry:
            env[entry["name"]] = entry["value"]
    return env


def _expand(arg: str, env: dict[str, str]) -> str:
    """Kubernetes' expansion of command and args: $(VAR) from the environment, $$ for a literal $,
    and a reference to a variable that is not set left as written."""
    return re.sub(
        r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)",
        lambda m: "$" if m[0] == "$$" else env.get(m[1], m[0]),
        arg,
    )


def _argv(docs: list[Doc], job: Doc) -> list[str]:
    container = _container(job)
    env = _environment(docs, container)
    return [_expand(arg, env) for arg in container["args"]]


def _parse(argv: list[str], monkeypatch: pytest.MonkeyPatch) -> argparse.Namespace:
    """argv through the real `incident-memory` parser. build_parser() adds a subcommand's own arguments
    only when sys.argv[1] names it (so the CLI imports only the module that runs), hence the argv."""
    monkeypatch.setattr(sys, "argv", ["incident-memory", *argv])
    try:
        return build_parser().parse_args(argv)
    except SystemExit as exc:  # argparse has printed why
        pytest.fail(f"`incident-memory {' '.join(argv)}` does not parse (exit {exc.code})")


def _cpu(quantity: str) -> float:
    return float(quantity[:-1]) / 1000 if quantity.endswith("m") else float(quantity)


def _memory(quantity: str) -> int:
    units = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30}
    return int(quantity[:-2]) * units[quantity[-2:]] if quantity[-2:] in units else int(quantity)


# ------------------------------------------------------------------ the command lines


def test_the_name_is_one_literal_and_a_valid_rederive_name(docs: list[Doc]) -> None:
    name = _name(docs)
    assert check_name(name) == name
    coordinator, workers = _jobs(docs)
    # The Jobs are named after it (kustomize replacements), and Kubernetes must accept those names.
    assert coordinator["metadata"]["name"] == f"rederive-{name}"
    assert workers["metadata"]["name"] == f"rederive-{name}-workers"
    for job in (coordinator, workers):
        assert DNS_LABEL.match(job["metadata"]["name"]), job["metadata"]["name"]
        # ...and their args say it only through the ConfigMap: one literal to edit
        assert "$(REDERIVE_NAME)" in _container(job)["args"]
        assert name not in _container(job)["args"]


def test_the_args_parse_with_the_real_command_line(docs: list[Doc], monkeypatch: pytest.MonkeyPatch) -> None:
    name = _name(docs)
    coordinator, workers = _jobs(docs)
    for job in (coordinator, workers):
        argv = _argv(docs, job)
        assert not [a for a in argv if "$(" in a], argv  # every reference is set in the container
        args = _parse(argv, monkeypatch)
        assert args.command == "rederive"
        assert args._module.__name__ == "services.rederive.main"
        assert args.into == name and names_for(args.into).schema == name
        assert args.workers == 1  # one compactor per pod: the partition count below relies on it
        assert args.events_topic == topics.EVENTS
        assert args.switch is None and args.diff is None and not args.drop_old
    coordinator_args = _parse(_argv(docs, coordinator), monkeypatch)
    assert not coordinator_args.worker
    assert not coordinator_args.follow  # a Job has to end
    assert not coordinator_args.no_diff  # the diff is what its log is read for
    assert _parse(_argv(docs, workers), monkeypatch).worker


def test_the_workers_and_the_coordinators_worker_are_the_events_partitions(
    docs: list[Doc], monkeypatch: pytest.MonkeyPatch
) -> None:
    coordinator, workers = _jobs(docs)
    args = _parse(_argv(docs, coordinator), monkeypatch)
    spec = workers["spec"]
    assert spec["parallelism"] == spec["completions"]
    # A consumer beyond the partition count would own no partition; one fewer leaves one doing two.
    assert spec["parallelism"] + args.workers == PARTITIONS[args.events_topic] == PARTITIONS[topics.EVENTS]
    # The coordinator is one pod, resumed by the same command in a replaced pod.
    assert coordinator["spec"].get("parallelism", 1) == coordinator["spec"].get("completions", 1) == 1
    for job in (coordinator, workers):
        assert _pod(job)["restartPolicy"] == "OnFailure"
        assert job["spec"]["backoffLimit"] >= 1
        assert "activeDeadlineSeconds" not in job["spec"]  # a re-derivation takes as long as it takes
        assert "initContainers" not in _pod(job)  # rederive creates its topics and migrates schema NAME


def test_the_compactor_settings_being_tried_load(docs: list[Doc]) -> None:
    settings = _settings(docs)
    assert set(settings) <= {"REDERIVE_NAME", *SETTINGS_ENV}, set(settings)
    tried = {k: v for k, v in settings.items() if k in SETTINGS_ENV}
    assert tried, "the component names no compactor setting to try"
    config = load_config(tried)  # a wrong setting is one UserFacingError line, as at the compactor's start
    assert config.versions()


# ------------------------------------------------------------------ the pods


def test_both_jobs_read_the_live_config_then_the_rederive_configmap(docs: list[Doc]) -> None:
    live, rederive = _configmap(docs, LIVE_CONFIGMAP), _configmap(docs, CONFIGMAP)
    coordinator, workers = _jobs(docs)
    for job in (coordinator, workers):
        # the generated (hashed) names: an edited literal is a new ConfigMap, and a new Job
        assert _container(job)["envFrom"] == [
            {"configMapRef": {"name": live["metadata"]["name"]}},
            {"configMapRef": {"name": rederive["metadata"]["name"]}},
        ]
    # a later envFrom source wins: the settings tried override the live ones
    env = _environment(docs, _container(coordinator))
    for key, value in rederive["data"].items():
        assert env[key] == value
    assert _environment(docs, _container(workers)) == env


def test_the_jobs_run_in_the_live_compactors_pod(docs: list[Doc]) -> None:
    compactor = deployments(docs)["compactor"]
    live_pod = compactor["spec"]["template"]["spec"]
    (live,) = live_pod["containers"]
    kafka_client = _configmap(docs, KAFKA_CLIENT_CONFIGMAP)["metadata"]["name"]
    for job in _jobs(docs):
        pod, container = _pod(job), _container(job)
        name = job["metadata"]["name"]
        assert container["image"] == live["image"], name  # the same code as the live compactor
        assert pod["securityContext"] == live_pod["securityContext"], name
        for key in ("serviceAccountName", "automountServiceAccountToken", "terminationGracePeriodSeconds"):
            assert pod[key] == live_pod[key], (name, key)
        assert container["securityContext"] == live["securityContext"], name
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
        assert container["securityContext"]["capabilities"]["drop"] == ["ALL"]
        assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] != 0
        assert job["metadata"].get("namespace") == compactor["metadata"].get("namespace"), name
        # the same volumes: tmp and data emptyDirs, and the Kafka client (client.properties + the CA)
        volumes = {v["name"]: v for v in pod["volumes"]}
        live_volumes = {v["name"]: v for v in live_pod["volumes"]}
        assert set(volumes) == {"tmp", "data", "kafka-client"}, name
        assert volumes["kafka-client"] == live_volumes["kafka-client"], name
        sources = volumes["kafka-client"]["projected"]["sources"]
        assert {"name": kafka_client, "optional": True} in [s.get("configMap") for s in sources], name
        for v in ("tmp", "data"):
            assert "sizeLimit" in volumes[v]["emptyDir"], (name, v)
        assert sorted(container["volumeMounts"], key=str) == sorted(live["volumeMounts"], key=str), name
        mounts = {m["name"]: m for m in container["volumeMounts"]}
        assert mounts["kafka-client"] == {"name": "kafka-client", "mountPath": KAFKA_DIR, "readOnly": True}
        env = {e["name"]: e for e in container["env"]}
        assert env["KAFKA_CLIENT_CONFIG"] == {"name": "KAFKA_CLIENT_CONFIG", "value": KAFKA_CLIENT_CONFIG}
        # the state dir (logs, faust's data) is the writable emptyDir, as the compactor's --workers-dir
        assert env["INCIDENT_MEMORY_STATE_DIR"]["value"] == STATE_DIR == mounts["data"]["mountPath"], name
        for bound in ("requests", "limits"):
            assert {"cpu", "memory"} <= container["resources"][bound].keys(), (name, bound)
        requests, limits = container["resources"]["requests"], container["resources"]["limits"]
        assert _cpu(requests["cpu"]) <= _cpu(limits["cpu"]), name
        assert _memory(requests["memory"]) <= _memory(limits["memory"]), name
        # at least what the one compactor in it is given live
        assert _memory(limits["memory"]) >= _memory(live["resources"]["limits"]["memory"]), name


# ------------------------------------------------------------------ secrets


def test_secrets_come_only_from_the_secret_and_the_owners_dsn_only_to_the_coordinator(
    docs: list[Doc],
) -> None:
    coordinator, workers = _jobs(docs)
    want = {
        # The owner's DSN, as `migrate`: the run creates schema NAME and applies the migrations in it.
        coordinator["metadata"]["name"]: {"DATABASE_URL", "OPENAI_API_KEY", *LOGIN},
        # A worker only compacts: Kafka, and the selector's key; never Postgres.
        workers["metadata"]["name"]: {"OPENAI_API_KEY", *LOGIN},
    }
    for job in (coordinator, workers):
        name, container = job["metadata"]["name"], _container(job)
        keys = set()
        for env in container["env"]:
            if SECRET_NAME.search(env["name"]):
                assert "value" not in env, (name, env["name"])
            if "valueFrom" in env:
                assert set(env["valueFrom"]) == {"secretKeyRef"}, (name, env["name"])
                ref = env["valueFrom"]["secretKeyRef"]
                assert ref["name"] == "incident-memory", (name, env["name"])
                # the container's variable, under its own key or the re-derivation's principal's
                assert ref["key"] in (env["name"], f"REDERIVE_{env['name']}"), (name, ref)
                assert ref.get("optional", False) is (ref["key"] in LOGIN), (name, ref)
                keys.add(ref["key"])
        assert keys == want[name], name
        assert [set(src) for src in container["envFrom"]] == [{"configMapRef"}] * 2, name
    assert {"DATABASE_URL", "OPENAI_API_KEY"} <= SECRET_KEYS  # the live deployment's keys
    settings = _settings(docs)
    assert not [k for k in settings if SECRET_NAME.search(k)]
    assert not [v for v in settings.values() if re.search(r"://[^/@\s]+:[^/@\s]+@", v)]


def test_the_example_secret_gains_only_the_rederive_login_as_placeholders(docs: list[Doc]) -> None:
    (secret,) = of_kind(docs, "Secret")
    (live,) = of_kind(rendered(LIVE), "Secret")
    assert secret["metadata"] == live["metadata"]
    assert set(secret["data"]) == set(live["data"]) | set(LOGIN)
    for key in LOGIN:
        assert "PLACEHOLDER" in base64.b64decode(secret["data"][key]).decode()
    assert {k: v for k, v in secret["data"].items() if k not in LOGIN} == live["data"]


def test_the_component_leaves_the_live_set_as_it_was(docs: list[Doc]) -> None:
    def key(d: Doc) -> tuple[str, str]:
        return d["kind"], d["metadata"]["name"]

    added = [d for d in docs if d["kind"] == "Job" or d in (_configmap(docs, CONFIGMAP),)]
    assert sorted(key(d) for d in added) == sorted(
        [("ConfigMap", _configmap(docs, CONFIGMAP)["metadata"]["name"]), *(key(j) for j in _jobs(docs))]
    )
    live = {key(d): d for d in rendered(LIVE) if d["kind"] != "Secret"}
    here = {key(d): d for d in docs if d not in added and d["kind"] != "Secret"}
    assert here == live  # no Deployment, ConfigMap or ScaledObject changed by adding a re-derivation
