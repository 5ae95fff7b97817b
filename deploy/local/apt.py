"""Install Debian packages the local stack needs, when they are missing (a fresh CI machine)."""

from __future__ import annotations

import os
import shutil
import subprocess

from services.runtime.errors import UserFacingError

_updated = False


def install(*packages: str, why: str) -> None:
    """`apt-get update` (once per process) and a non-interactive `apt-get install -y`; root only."""
    global _updated
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        raise UserFacingError(
            f"{why}: install {' '.join(packages)} (automatic install needs root and apt-get)"
        )
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    steps = [] if _updated else [["apt-get", "update", "-q"]]
    steps.append(
        ["apt-get", "install", "-y", "-q", "--no-install-recommends",
         "-o", "Dpkg::Options::=--force-confold", *packages]
    )  # fmt: skip
    for argv in steps:
        result = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
        if result.returncode != 0:
            raise UserFacingError(f"`{' '.join(argv)}` failed: {result.stderr.strip()[-1500:]}")
        _updated = _updated or argv[1] == "update"
