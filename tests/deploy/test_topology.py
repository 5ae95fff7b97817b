"""The deploy files run the services as the topology (deploy/local/pipeline.py) declares, and the check can fail.

deploy/validate.sh runs `python -m deploy.local.pipeline --check-deploy`; these tests plant a wrong
subcommand, a wrong health port and a service the topology does not know, and each must be reported.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from deploy.local.pipeline import DEPLOYED, TOPOLOGY, Pipeline, deploy_problems
from services.cli import SUBCOMMANDS

ROOT = Path(__file__).resolve().parents[2]


def _copy_deploy(tmp_path: Path) -> Path:
    (tmp_path / "deploy").mkdir()
    shutil.copy(ROOT / "deploy" / "docker-compose.yml", tmp_path / "deploy" / "docker-compose.yml")
    shutil.copytree(ROOT / "deploy" / "k8s" / "base", tmp_path / "deploy" / "k8s" / "base")
    return tmp_path


def test_every_service_of_the_topology_is_a_cli_subcommand() -> None:
    assert {s.subcommand for s in TOPOLOGY.values()} <= set(SUBCOMMANDS)
    assert set(DEPLOYED) == {"ingest", "compactor", "projector", "agent", "slack"}


def test_the_deploy_files_agree_with_the_topology() -> None:
    assert deploy_problems() == []
    done = subprocess.run(
        [sys.executable, "-m", "deploy.local.pipeline", "--check-deploy"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr


def test_a_wrong_subcommand_port_or_extra_service_is_reported(tmp_path: Path) -> None:
    root = _copy_deploy(tmp_path)
    compose_file = root / "deploy" / "docker-compose.yml"
    compose = yaml.safe_load(compose_file.read_text())
    compose["services"]["projector"]["command"][0] = "replay"
    compose["services"]["stray"] = {"image": "x", "command": ["stray"]}
    compose_file.write_text(yaml.safe_dump(compose))
    slack = root / "deploy" / "k8s" / "base" / "slack.yaml"
    slack.write_text(slack.read_text().replace('"--metrics-port", "9104"', '"--metrics-port", "9105"'))
    problems = deploy_problems(root)
    assert any("projector runs ['replay']" in p and p.startswith("docker-compose.yml") for p in problems), (
        problems
    )
    assert any("stray is not in the topology" in p for p in problems), problems
    assert any(p.startswith("k8s/base: slack is not told `--metrics-port 9104`") for p in problems), problems


def test_a_runs_command_lines_come_from_its_names(tmp_path: Path) -> None:
    pipe = Pipeline(
        "127.0.0.1:1", "", "s1", {"events": "e", "compacted": "c", "wake": "w", "dlq": "d"}, tmp_path
    )
    args = pipe.compactor_args("c0")
    assert args[args.index("--app-id") + 1] == "s1.compactor"
    assert args[args.index("--selections-topic") + 1] == "s1.selections"
    assert pipe.projector_args()[-1] == "s1.projector" and pipe.group == "s1.projector"
    assert "--schema" not in pipe.ingest_args(schema=False)
