"""The local PostgreSQL: a cluster of Debian's `postgresql` in the state dir, on 127.0.0.1 only.

PostgreSQL refuses to run as root, so as root the cluster belongs to the `postgres` OS user
and every server binary runs through `runuser -u postgres --`. See postgres/README.md.
"""

from __future__ import annotations

import glob
import hashlib
import os
import pwd
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from deploy.local import procs, tls
from deploy.local.ports import port_in_use
from services.runtime import settings
from services.runtime.errors import UserFacingError

OS_USER = "postgres"
CONF_NAME = "incident_memory.conf"
CONF = f"""# Written by deploy/local/postgres_node.py on every `incident-memory up`.
listen_addresses = '127.0.0.1'
port = {settings.LOCAL_PG_PORT}
unix_socket_directories = '{{socket_dir}}'
max_connections = 200
shared_buffers = 256MB
fsync = on
log_min_messages = warning
log_line_prefix = '%m [%p] %q%u@%d '
# TLS, once `up --secure` has written it (it stays on: a client that does not ask for TLS still connects).
include_if_exists = 'incident_memory_tls.conf'
"""
TLS_CONF_NAME = "incident_memory_tls.conf"
TLS_CONF = """# Written by deploy/local/postgres_node.py on `incident-memory up --secure`.
ssl = on
ssl_cert_file = '{cert}'
ssl_key_file = '{key}'
"""
TLS_HOSTS = ("127.0.0.1", "localhost")
NO_MAIN_CLUSTER = Path("/etc/postgresql-common/createcluster.conf")


@dataclass(frozen=True)
class PgPaths:
    root: Path

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def socket_dir(self) -> Path:
        return self.root / "run"

    @property
    def log_file(self) -> Path:
        return self.root / "postgres.log"


def dsn() -> str:
    return (
        f"postgresql://{settings.LOCAL_PG_USER}:{settings.LOCAL_PG_PASSWORD}"
        f"@127.0.0.1:{settings.LOCAL_PG_PORT}/{settings.LOCAL_PG_DB}"
    )


def verify_full_dsn(ca_file: Path) -> str:
    """The local DSN that insists on TLS and checks the server's certificate and name against `ca_file`."""
    return f"{dsn()}?sslmode=verify-full&sslrootcert={quote(str(ca_file), safe='/')}"


def _as_root() -> bool:
    return os.geteuid() == 0


def _run_as(argv: list[str], check: bool = True, **kw: object) -> subprocess.CompletedProcess[str]:
    """Run a server binary as the cluster's owner."""
    if _as_root():
        argv = ["runuser", "-u", OS_USER, "--", *argv]
    result = subprocess.run(argv, capture_output=True, text=True, check=False, cwd="/", **kw)  # type: ignore[call-overload]
    if check and result.returncode != 0:
        raise UserFacingError(f"{Path(argv[argv.index('--') + 1] if '--' in argv else argv[0]).name} failed: "
                              f"{(result.stdout + result.stderr).strip()[-1500:]}")  # fmt: skip
    return result  # type: ignore[no-any-return]


def _traversable_by_owner(path: Path) -> bool:
    if not _as_root():
        return True
    return (
        subprocess.run(["runuser", "-u", OS_USER, "--", "test", "-x", str(path)], check=False).returncode == 0
    )


def paths(state: Path | None = None) -> PgPaths:
    """<state>/postgres when the postgres user can reach it, else a dir under /var/lib keyed by the state dir."""
    state = state or settings.state_dir()
    state.mkdir(parents=True, exist_ok=True)
    if _traversable_by_owner(state):
        return PgPaths(state / "postgres")
    key = hashlib.sha256(str(state).encode()).hexdigest()[:12]
    return PgPaths(Path("/var/lib/incident-memory") / f"pg-{key}")


def bin_dir(install: bool = True) -> Path:
    """The newest /usr/lib/postgresql/*/bin with initdb and pg_ctl; installs Debian's postgresql if none."""
    found = _find_bin_dir()
    if found is None and install:
        _apt_install()
        found = _find_bin_dir()
    if found is None:
        raise UserFacingError(
            "PostgreSQL server binaries not found in /usr/lib/postgresql/*/bin (apt-get install postgresql)"
        )
    return found


def _find_bin_dir() -> Path | None:
    candidates = [Path(d) for d in glob.glob("/usr/lib/postgresql/*/bin")]
    usable = [d for d in candidates if (d / "pg_ctl").is_file() and (d / "initdb").is_file()]
    usable.sort(key=lambda d: int(d.parent.name) if d.parent.name.isdigit() else 0)
    return usable[-1] if usable else None


def _apt_install() -> None:
    from deploy.local import apt

    if os.geteuid() == 0 and not NO_MAIN_CLUSTER.exists():  # no extra cluster on 5432 from the postinst
        NO_MAIN_CLUSTER.parent.mkdir(parents=True, exist_ok=True)
        NO_MAIN_CLUSTER.write_text("create_main_cluster = false\n")
    apt.install("postgresql", why="PostgreSQL is not installed (or set DATABASE_URL to an existing server)")


def running_pid(p: PgPaths) -> int | None:
    return procs.running_pid(p.data / "postmaster.pid", str(p.data))


def _own(path: Path) -> None:
    if _as_root():
        user = pwd.getpwnam(OS_USER)
        os.chown(path, user.pw_uid, user.pw_gid)


def init_cluster(p: PgPaths, bins: Path) -> bool:
    """initdb once; returns True if it created the cluster."""
    if (p.data / "PG_VERSION").is_file():
        return False
    for d in (p.root, p.socket_dir):
        d.mkdir(parents=True, exist_ok=True, mode=0o755)
        _own(d)
    pwfile = p.root / ".pw"
    pwfile.write_text("postgres-local-admin\n")
    _own(pwfile)
    try:
        _run_as([str(bins / "initdb"), "-D", str(p.data), "-U", "postgres", "--auth-local=peer",
                 "--auth-host=scram-sha-256", f"--pwfile={pwfile}", "-E", "UTF8", "--locale=C.UTF-8"])  # fmt: skip
    finally:
        pwfile.unlink(missing_ok=True)
    with (p.data / "postgresql.conf").open("a") as conf:
        conf.write(f"\ninclude_if_exists = '{CONF_NAME}'\n")
    return True


def write_config(p: PgPaths) -> None:
    conf = p.data / CONF_NAME
    conf.write_text(CONF.format(socket_dir=p.socket_dir))
    _own(conf)


def enable_tls(p: PgPaths, bins: Path, ca: tls.Issued) -> tls.Issued:
    """`ssl = on` with a server certificate from `ca`; a running server reloads (no restart, no lost data).

    The certificate and key live in <pg root>/tls, owned by the cluster's OS user (the key 0600, as
    PostgreSQL demands), and are reissued only when tls.issue finds them unfit. Idempotent.
    """
    server = tls.issue(ca, p.root / "tls", "server", hosts=TLS_HOSTS)
    for path in (server.cert.parent, server.cert, server.key, server.chain, server.keystore):
        _own(path)
    conf = p.data / TLS_CONF_NAME
    conf.write_text(TLS_CONF.format(cert=server.cert, key=server.key))
    _own(conf)
    write_config(p)  # a cluster configured before --secure existed gets the include line
    if running_pid(p) is not None:
        _run_as([str(bins / "pg_ctl"), "-D", str(p.data), "reload"])
    return server


def wait_tls(p: PgPaths, ca_file: Path, timeout: float = 15.0) -> None:
    """Until a verify-full connection works (a reload is asynchronous); else one error with the log's tail."""
    from services.runtime.checks import check_postgres

    deadline = time.monotonic() + timeout
    while True:
        try:
            check_postgres(verify_full_dsn(ca_file), timeout=5)
            return
        except UserFacingError as exc:
            if time.monotonic() > deadline:
                raise UserFacingError(
                    f"the local PostgreSQL did not take TLS: {exc}; last lines of {p.log_file}:\n"
                    f"{procs.tail(p.log_file)}"
                ) from None
            time.sleep(0.2)


def start(p: PgPaths, bins: Path, timeout: float = 60.0) -> int:
    """pg_ctl -w start; returns the postmaster pid."""
    if port_in_use(settings.LOCAL_PG_PORT):
        raise UserFacingError(
            f"127.0.0.1:{settings.LOCAL_PG_PORT} is in use by a process the local stack did not start; stop it, or "
            "set DATABASE_URL to use an existing PostgreSQL"
        )
    p.socket_dir.mkdir(parents=True, exist_ok=True)
    _own(p.socket_dir)
    if not p.log_file.exists():
        p.log_file.touch()
    _own(p.log_file)
    result = _run_as([str(bins / "pg_ctl"), "-D", str(p.data), "-l", str(p.log_file), "-w", "-t", str(int(timeout)),
                      "start"], check=False)  # fmt: skip
    pid = running_pid(p)
    if result.returncode != 0 or pid is None:
        raise UserFacingError(
            f"the local PostgreSQL did not start ({(result.stdout + result.stderr).strip()[-500:]}); "
            f"last lines of {p.log_file}:\n{procs.tail(p.log_file)}"
        )
    return pid


def _psql(p: PgPaths, bins: Path, sql: str, db: str = "postgres") -> str:
    argv = [str(bins / "psql"), "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-h", str(p.socket_dir),
            "-p", str(settings.LOCAL_PG_PORT), "-U", "postgres", "-d", db, "-c", sql]  # fmt: skip
    return _run_as(argv).stdout.strip()


def ensure_role_and_db(p: PgPaths, bins: Path) -> None:
    user, password, db = settings.LOCAL_PG_USER, settings.LOCAL_PG_PASSWORD, settings.LOCAL_PG_DB
    if _psql(p, bins, f"SELECT 1 FROM pg_roles WHERE rolname = '{user}'") != "1":
        _psql(p, bins, f"CREATE ROLE {user} LOGIN CREATEROLE PASSWORD '{password}'")
    else:  # a stack made before the least-privilege roles: the owner creates them when it migrates
        _psql(p, bins, f"ALTER ROLE {user} CREATEROLE")
    if _psql(p, bins, f"SELECT 1 FROM pg_database WHERE datname = '{db}'") != "1":
        _psql(p, bins, f"CREATE DATABASE {db} OWNER {user}")


def wait_ready(timeout: float = 30.0) -> None:
    from services.runtime.checks import check_postgres

    deadline = time.monotonic() + timeout
    while True:
        try:
            check_postgres(dsn(), timeout=5)
            return
        except UserFacingError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def restart(timeout: float = 30.0, p: PgPaths | None = None) -> int:
    """`pg_ctl -m fast -w restart` of the running local cluster: every connection is cut, the server is
    back (accepting connections) when it returns. Returns the new postmaster pid.

    For the fault tests, which restart the shared local PostgreSQL under a running pipeline; an
    external DATABASE_URL is nobody's to restart here (deploy/local/external.py skips those tests)."""
    p = p or paths()
    if running_pid(p) is None:
        raise UserFacingError(
            f"the local PostgreSQL ({p.data}) is not running: `incident-memory up` starts it"
        )
    bins = bin_dir(install=False)
    _run_as([str(bins / "pg_ctl"), "-D", str(p.data), "-l", str(p.log_file), "-m", "fast", "-w",
             "-t", str(int(timeout)), "restart"], timeout=2 * timeout + 10)  # fmt: skip
    pid = running_pid(p)
    if pid is None:
        raise UserFacingError(f"the local PostgreSQL did not come back; last lines of {p.log_file}:\n"
                              f"{procs.tail(p.log_file)}")  # fmt: skip
    return pid


def stop(p: PgPaths) -> bool:
    pid = running_pid(p)
    if pid is None:
        return False
    bins = _find_bin_dir()
    if bins is not None:
        _run_as(
            [str(bins / "pg_ctl"), "-D", str(p.data), "-m", "fast", "-w", "-t", "30", "stop"], check=False
        )
    procs.stop(pid, str(p.data), timeout=10.0)  # no-op if pg_ctl already stopped it
    return True
