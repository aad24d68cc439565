"""A real PostgreSQL server for the tests: initdb into a temporary folder, pg_ctl start on a free
port of 127.0.0.1, one fresh database per test, pg_ctl stop at the end. No mock.

Needs the server's binaries (Debian: `apt-get install postgresql`, which puts them in
/usr/lib/postgresql/VERSION/bin) and the psycopg2 driver (`pip install psycopg2-binary`).
PostgreSQL refuses to run as root: as root, the server runs as the `postgres` user the
package creates. Without them the tests skip, saying what is missing, unless
$AUTOTUNE_TEST_REQUIRE_POSTGRES is set (CI sets it): then they fail.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from pathlib import Path

REQUIRE_ENV = "AUTOTUNE_TEST_REQUIRE_POSTGRES"
_USER = "autotune"


class Unavailable(Exception):
    """No server can be started here; the message says why and what to install."""


def _binaries() -> Path:
    found = shutil.which("pg_ctl")
    if found and shutil.which("initdb"):
        return Path(found).resolve().parent
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"),
                      key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0)
    if not versions:
        raise Unavailable("no PostgreSQL server binaries (pg_ctl, initdb) on PATH or in "
                          "/usr/lib/postgresql/*/bin: apt-get install postgresql")
    return Path(versions[-1]).parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """One server for the test session; `database()` gives each test a database of its own."""

    def __init__(self) -> None:
        try:
            import psycopg2  # noqa: F401 -- SQLAlchemy's default PostgreSQL driver
        except ImportError:
            raise Unavailable("psycopg2 is not installed: pip install psycopg2-binary") from None
        self.bin = _binaries()
        self.prefix: list[str] = []
        self.folder = Path(tempfile.mkdtemp(prefix="autotune-pg-"))
        if os.geteuid() == 0:
            # initdb and postgres refuse root; run them as the package's unprivileged user.
            try:
                user = pwd.getpwnam("postgres")
            except KeyError:
                raise Unavailable("running as root and there is no 'postgres' user to run the "
                                  "server as (apt-get install postgresql makes one)") from None
            os.chown(self.folder, user.pw_uid, user.pw_gid)
            self.prefix = ["runuser", "-u", "postgres", "--"]
        self.data = self.folder / "data"
        self.port = _free_port()
        self.log = self.folder / "server.log"
        # Durability is not under test: no fsync makes each commit cheap.
        options = (f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 "
                   "-c fsync=off -c synchronous_commit=off -c full_page_writes=off "
                   "-c max_connections=200")
        try:
            self._run("initdb", "-D", str(self.data), "-U", _USER, "--auth=trust", "-E", "UTF8",
                      "--no-sync")
            self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-o", options,
                      "-w", "-t", "60", "start")
        except Unavailable:
            self.stop()  # and its folder goes
            raise

    def _run(self, tool: str, *args: str) -> None:
        try:
            done = subprocess.run([*self.prefix, str(self.bin / tool), *args], capture_output=True,
                                  text=True, timeout=120, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise Unavailable(f"{tool} did not run: {exc}") from None
        if done.returncode != 0:
            log = self.log.read_text()[-2000:] if self.log.exists() else ""
            raise Unavailable(f"{tool} failed ({done.returncode}): {done.stderr.strip()} {log}")

    @property
    def url(self) -> str:
        return f"postgresql://{_USER}@127.0.0.1:{self.port}/postgres"

    def database(self) -> str:
        """A new, empty database: its URL."""
        import psycopg2

        name = f"t_{uuid.uuid4().hex[:12]}"
        connection = psycopg2.connect(host="127.0.0.1", port=self.port, user=_USER,
                                      dbname="postgres")
        try:
            connection.autocommit = True  # CREATE DATABASE cannot run in a transaction
            with connection.cursor() as cursor:
                cursor.execute(f"CREATE DATABASE {name}")
        finally:
            connection.close()
        return f"postgresql://{_USER}@127.0.0.1:{self.port}/{name}"

    def stop(self) -> None:
        if (self.data / "postmaster.pid").exists():
            subprocess.run([*self.prefix, str(self.bin / "pg_ctl"), "-D", str(self.data), "-m",
                            "immediate", "-w", "stop"], capture_output=True, timeout=60,
                           check=False)
        shutil.rmtree(self.folder, ignore_errors=True)
