"""Go programs the tests run for real (Alertmanager, Prometheus, ...), built from the Go module proxy.

    ensure("prometheus", "github.com/prometheus/prometheus/cmd/prometheus", "v0.316.0") -> Path
    alertmanager() -> Path                                  (v0.35.0, built from source: below)
    python -m deploy.local.gobin NAME MODULE VERSION | alertmanager   (prints the binary's path)

The same pattern as deploy/validate.sh's tools: `go install <module>@<version>`, the version pinned
(a tag or pseudo-version, never `latest` or a branch), the binary cached per version at
`<gobin>/<name>-<version>/<name>` and reused when present. Go's module and build caches live in
`<gobin>/go`, so a rebuild downloads nothing it already has. `<gobin>` is per user, not per checkout
(`INCIDENT_MEMORY_GOBIN_DIR`, default `$XDG_CACHE_HOME/incident-memory/gobin`, i.e.
`~/.cache/incident-memory/gobin`), as Go's own caches are: a pinned version builds to the same binary
in every clone, and promtool's cold build (`make test` runs it through deploy/validate.sh) is paid once
per machine, not once per clone. A caller that passes `state` keeps everything under `<state>/gobin`. `GOTOOLCHAIN=local`: a module that wants a newer Go fails
with Go's own message instead of fetching a toolchain. A file lock per name and version lets
concurrent runs (two pytest sessions, two helpers) build once: the second waits, then reuses.

When `go install` cannot build a module as published, `source=FromSource(...)` builds it the way its
own release does: `go mod download` the pinned module, copy it, let `prepare` fix the copy (the
reason is written down in `FromSource.why`), and `go build` it as its own main module (so its
`replace`/`exclude` directives count). Alertmanager v0.35.0 needs it (v0.28.1 did not): its UI is
embedded from `ui/app/dist`, which its release tarballs carry and its Go module does not (`alertmanager()`).

Errors are `UserFacingError`s: `GoMissing` (one line: nothing to build with; a test may skip on it)
and `GoBuildFailed` (go's last lines: no network, a version the proxy does not have, a compile
error; a test must fail on it).
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from services.runtime.errors import UserFacingError

GO_FALLBACKS = (Path("/usr/local/go/bin/go"),)  # the official tarball's place, often not on PATH
PINNED = re.compile(r"^v\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?(?:\+incompatible)?$")  # semver, pseudo-versions
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
HEARTBEAT_S = 15.0

Progress = Callable[[str], None]


class GoMissing(UserFacingError):
    """No `go` to build with."""


class GoBuildFailed(UserFacingError):
    """The build ran and failed (no network, a version the proxy lacks, a compile error)."""


@dataclass(frozen=True)
class FromSource:
    """Build from a copy of the module's source, as its own main module, instead of `go install`."""

    module: str  # the module path (the package given to `ensure` is inside it)
    why: str  # why `go install` does not do: recorded in build.json
    prepare: Callable[[Path], None] | None = None  # fixes the copy before `go build`
    ldflags: str = ""


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def root(state: Path | None = None) -> Path:
    """`<state>/gobin` when a state dir is given, else the per-user cache (module docstring)."""
    if state is not None:
        return state / "gobin"
    explicit = os.environ.get("INCIDENT_MEMORY_GOBIN_DIR")
    if explicit:
        return Path(explicit).resolve()
    cache_home = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache_home) / "incident-memory" / "gobin"


def binary_path(name: str, version: str, state: Path | None = None) -> Path:
    """Where `ensure` puts (or finds) the binary; nothing is checked or built."""
    return root(state) / f"{name}-{version}" / name


def find_go() -> Path | None:
    """`$GO`, else `go` on PATH, else the official tarball's /usr/local/go/bin/go."""
    explicit = os.environ.get("GO")
    candidates = [Path(explicit)] if explicit else []
    on_path = shutil.which("go")
    candidates += [Path(on_path)] if on_path else []
    candidates += list(GO_FALLBACKS)
    return next((c for c in candidates if c.is_file() and os.access(c, os.X_OK)), None)


def ensure(
    name: str,
    module: str,
    version: str,
    *,
    state: Path | None = None,
    progress: Progress | None = _stderr,
    source: FromSource | None = None,
) -> Path:
    """The path of `name` built from `module@version` (a package path, as `go install` takes it):
    the cached one, or built now."""
    if not NAME.match(name):
        raise UserFacingError(f"gobin: {name!r} is not a usable binary name")
    if not PINNED.match(version):
        raise UserFacingError(f"gobin: {module}@{version}: pin a version (vX.Y.Z), not {version!r}")
    if source is not None and not (module == source.module or module.startswith(source.module + "/")):
        raise UserFacingError(f"gobin: package {module} is not in module {source.module}")
    target = binary_path(name, version, state)
    if _usable(target):
        return target
    say = progress or (lambda _line: None)
    go = find_go()
    if go is None:
        raise GoMissing(
            f"go is not installed (not on PATH, nor at {GO_FALLBACKS[0]}; or set GO=/path/to/go): "
            f"it is needed to build {name} {version} from {module}"
        )
    base = root(state)
    base.mkdir(parents=True, exist_ok=True)
    with _locked(base / f"{name}-{version}.lock", say, f"{name} {version}"):
        if _usable(target):  # another process built it while we waited
            return target
        _build(go, name, module, version, target, base, say, source)
    return target


def _usable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


@contextmanager
def _locked(lock: Path, say: Progress, what: str) -> Iterator[None]:
    with lock.open("a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            say(f"gobin: waiting for another process that is building {what} ({lock})")
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _go_env(base: Path) -> dict[str, str]:
    gopath = base / "go"
    return {
        **os.environ,
        "GOTOOLCHAIN": "local",
        "GOFLAGS": "-modcacherw",  # the module cache stays deletable (`make clean`)
        "GOPATH": str(gopath),
        "GOMODCACHE": str(gopath / "mod"),
        "GOCACHE": str(gopath / "build"),
    }


def _build(
    go: Path,
    name: str,
    module: str,
    version: str,
    target: Path,
    base: Path,
    say: Progress,
    source: FromSource | None,
) -> None:
    staging = base / f".{name}-{version}.staging"
    log_path = base / f"{name}-{version}.build.log"
    env = {**_go_env(base), "GOBIN": str(staging)}
    how = f"go install {module}@{version}" if source is None else f"go build in {source.module}@{version}"
    say(f"gobin: building {name} {version} (`{how}`; first use only, can take minutes)")
    started = time.monotonic()
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    try:
        with log_path.open("w") as log:
            if source is None:
                _run([str(go), "install", "-trimpath", f"{module}@{version}"], base, env, log, say, name)
            else:
                _build_from_source(go, name, module, version, staging, base, env, log, say, source)
        seconds = time.monotonic() - started
        built = [p for p in staging.iterdir() if p.is_file()]
        if len(built) != 1:
            raise GoBuildFailed(f"`{how}` left {sorted(p.name for p in built)}, expected one binary")
        info = _build_info(go, built[0], env)
        mod = info.get("mod", "").split("\t")  # mod <path> <version> [<sum>]
        # `go install` stamps the module's version; a main-module build says "(devel)": check its path
        if source is None and mod[2:3] != [version]:
            raise GoBuildFailed(f"{built[0].name} does not report {version} (go version -m: {mod})")
        if source is not None and mod[1:2] != [source.module]:
            raise GoBuildFailed(f"{built[0].name} is not built from {source.module} (go version -m: {mod})")
        meta: dict[str, object] = {
            "module": module,
            "version": version,
            "go": info.get("go", ""),
            "seconds": round(seconds, 1),
        }
        if source is not None:
            meta["from_source"] = {"module": source.module, "why": source.why, "ldflags": source.ldflags}
        target.parent.mkdir(parents=True, exist_ok=True)
        (target.parent / "build.json").write_text(json.dumps(meta, indent=2) + "\n")
        os.replace(built[0], target)  # the binary appears whole, or not at all
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    say(f"gobin: built {name} {version} in {seconds:.0f} s -> {target}")


def _build_from_source(
    go: Path,
    name: str,
    module: str,
    version: str,
    staging: Path,
    base: Path,
    env: dict[str, str],
    log: IO[str],
    say: Progress,
    source: FromSource,
) -> None:
    listing = base / f".{name}-{version}.download.json"
    with listing.open("w") as out:
        _run(
            [str(go), "mod", "download", "-json", f"{source.module}@{version}"],
            base,
            env,
            log,
            say,
            name,
            out,
        )
    try:
        downloaded = Path(json.loads(listing.read_text())["Dir"])
    except (ValueError, KeyError) as exc:
        raise GoBuildFailed(f"`go mod download -json` named no module directory ({exc})") from None
    finally:
        listing.unlink(missing_ok=True)
    src = base / f".{name}-{version}.src"
    shutil.rmtree(src, ignore_errors=True)
    shutil.copytree(downloaded, src)
    try:
        for path in [src, *src.rglob("*")]:  # the module cache's files may be read-only
            path.chmod(path.stat().st_mode | 0o200)
        if source.prepare is not None:
            source.prepare(src)
        package = "." + module[len(source.module) :]  # "./cmd/x", or "." for the module's root
        ldflags = ["-ldflags", source.ldflags] if source.ldflags else []
        _run(
            [str(go), "build", "-trimpath", *ldflags, "-o", str(staging / name), package],
            src,
            env,
            log,
            say,
            name,
        )
    finally:
        shutil.rmtree(src, ignore_errors=True)


def _run(
    argv: Sequence[str],
    cwd: Path,
    env: dict[str, str],
    log: IO[str],
    say: Progress,
    name: str,
    stdout: IO[str] | None = None,
) -> None:
    """One go command, its output into the build log (stdout elsewhere if given), progress every HEARTBEAT_S."""
    log.write(f"$ {' '.join(argv)}\n")
    log.flush()
    started = time.monotonic()
    proc = subprocess.Popen(
        list(argv), stdout=stdout or log, stderr=log if stdout else subprocess.STDOUT, env=env, cwd=cwd
    )
    while True:
        try:
            code = proc.wait(timeout=HEARTBEAT_S)
            break
        except subprocess.TimeoutExpired:
            say(f"gobin: still building {name} ({time.monotonic() - started:.0f} s)")
    if code != 0:
        log.flush()
        tail = Path(log.name).read_text(errors="replace").strip().splitlines()[-15:]
        raise GoBuildFailed(
            f"`go {argv[1]} ...` failed (exit {code} after {time.monotonic() - started:.0f} s; log {log.name}):\n"
            + "\n".join(tail)
        )


def _build_info(go: Path, binary: Path, env: dict[str, str]) -> dict[str, str]:
    """`go version -m`: the Go release and the main module's line ('mod <path> <version> <sum>')."""
    out = subprocess.run(
        [str(go), "version", "-m", str(binary)], capture_output=True, text=True, env=env, check=False
    ).stdout
    info: dict[str, str] = {}
    for line in out.splitlines():
        if line.startswith(str(binary)) or line.startswith(binary.name):
            info["go"] = line.rsplit(": ", 1)[-1].strip()
        fields = line.strip().split("\t")
        if fields and fields[0] == "mod":
            info["mod"] = "\t".join(fields)
    return info


# ---------------------------------------------------------------- counterparts built here

ALERTMANAGER_MODULE = "github.com/prometheus/alertmanager"
ALERTMANAGER_VERSION = "v0.35.0"
UI_PLACEHOLDER = (
    "<!doctype html><title>Alertmanager</title><p>The web UI is not built into this binary: its assets "
    "ship in Alertmanager's release tarballs, not in the Go module it was built from (deploy/local/gobin.py).\n"
)


def _alertmanager_ui_placeholder(src: Path) -> None:
    """ui/web.go has `//go:embed app/dist` (elm/ and mantine/); the module zip has no app/dist."""
    for ui in ("elm", "mantine"):
        page = src / "ui" / "app" / "dist" / ui / "index.html"
        if not page.exists():
            page.parent.mkdir(parents=True, exist_ok=True)
            page.write_text(UI_PLACEHOLDER)


def alertmanager(state: Path | None = None, progress: Progress | None = _stderr) -> Path:
    """Alertmanager, pinned. `go install ...@v0.35.0` fails ("pattern app/dist: no matching files
    found"), so it is built from its module source with a placeholder page for the UI (the API, the
    notifications and /metrics are untouched), its version stamped as its release build does."""
    plain = ALERTMANAGER_VERSION.removeprefix("v")
    return ensure(
        "alertmanager",
        f"{ALERTMANAGER_MODULE}/cmd/alertmanager",
        ALERTMANAGER_VERSION,
        state=state,
        progress=progress,
        source=FromSource(
            module=ALERTMANAGER_MODULE,
            why="the Go module lacks ui/app/dist, which ui/web.go embeds (it ships in release tarballs)",
            prepare=_alertmanager_ui_placeholder,
            ldflags=f"-s -w -X github.com/prometheus/common/version.Version={plain}"
            " -X github.com/prometheus/common/version.Revision=go-module-proxy",
        ),
    )


COUNTERPARTS: dict[str, Callable[[], Path]] = {"alertmanager": alertmanager}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) not in (1, 3) or (len(args) == 1 and args[0] not in COUNTERPARTS):
        print(
            "usage: python -m deploy.local.gobin NAME MODULE VERSION\n"
            f"       python -m deploy.local.gobin {{{','.join(COUNTERPARTS)}}}",
            file=sys.stderr,
        )
        return 2
    try:
        print(COUNTERPARTS[args[0]]() if len(args) == 1 else ensure(*args))
    except UserFacingError as exc:
        print(f"gobin: {exc}", file=sys.stderr)
        return exc.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main())
