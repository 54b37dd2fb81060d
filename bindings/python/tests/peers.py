"""Real peers for the end-to-end tests: a private ngircd, ``rexd --irc``, ``rexd --stdio`` and a
loopback sshd, each in a temp dir, stopped and reaped when the test ends."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import IO, Iterator, List, Optional

REPO = Path(__file__).resolve().parents[3]


def rexd_path() -> str:
    """The rexd binary: $DESKWIRE_REXD, else the workspace's debug build."""
    path = os.environ.get("DESKWIRE_REXD") or str(REPO / "target" / "debug" / "rexd")
    if not os.access(path, os.X_OK):
        raise RuntimeError(f"no rexd at {path}: build it (cargo build -p rexd) or set DESKWIRE_REXD")
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ClosedPort:
    """A port on 127.0.0.1 where nothing listens while this object lives: bound and never
    listening, so a connect is refused and no server started alongside can take it (a released
    :func:`free_port` can be taken, and then it answers)."""

    def __init__(self) -> None:
        self._socket = socket.socket()
        self._socket.bind(("127.0.0.1", 0))
        self.port = int(self._socket.getsockname()[1])

    def close(self) -> None:
        self._socket.close()


def wait_port(port: int, seconds: float = 10) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.02)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port} after {seconds} s")


def stop(process: "subprocess.Popen[bytes]") -> None:
    """SIGTERM, then SIGKILL after 5 s; always reaped."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(5)
        except subprocess.TimeoutExpired:
            process.kill()
    process.wait()


def make_certs(d: Path) -> None:
    """A CA (``ca.pem``), a server certificate it signed for ``localhost`` only (``server.pem``,
    ``server.key``) and DH parameters (``dh.pem``), made with the openssl command."""

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=d, check=True, capture_output=True)

    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
            "/CN=deskwire test CA", "-keyout", "ca.key", "-out", "ca.pem")
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=localhost",
            "-keyout", "server.key", "-out", "server.csr")
    (d / "san.ext").write_text("subjectAltName=DNS:localhost\n")
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-CAcreateserial", "-days", "2", "-out", "server.pem", "-extfile", "san.ext")
    openssl("genpkey", "-genparam", "-algorithm", "DH", "-pkeyopt", "dh_param:ffdhe2048",
            "-out", "dh.pem")
    for name in ("server.pem", "server.key", "dh.pem", "ca.pem"):
        (d / name).chmod(0o644)  # ngircd started as root reads them as nobody


class Ngircd:
    """A private ngircd on a free loopback port. ``penalties=False`` turns flood penalties off
    (``MaxPenaltyTime = 0``) for tests that move a lot of data. ``tls=True`` adds a TLS port,
    ``tls_port``, whose certificate names ``localhost`` and is signed by ``ca`` (a file).
    ``max_joins`` is how many channels a client may be in (ngircd's default is 10; 0: any)."""

    def __init__(self, penalties: bool = True, tls: bool = False, max_joins: int = 10) -> None:
        ngircd = shutil.which("ngircd") or "/usr/sbin/ngircd"
        self.dir = Path(tempfile.mkdtemp(prefix="deskwire-ngircd-"))
        (self.dir / "conf.d").mkdir()
        self.port = free_port()
        limits = ("" if penalties else "MaxPenaltyTime = 0\n") + f"MaxJoins = {max_joins}\n"
        ssl_section = ""
        self.tls_port = 0
        self.ca = self.dir / "ca.pem"
        if tls:
            make_certs(self.dir)
            self.tls_port = free_port()
            ssl_section = (
                f"[SSL]\nCertFile = {self.dir / 'server.pem'}\nKeyFile = {self.dir / 'server.key'}\n"
                f"DHFile = {self.dir / 'dh.pem'}\nPorts = {self.tls_port}\n"
            )
        (self.dir / "ngircd.conf").write_text(
            "[Global]\nName = irc.deskwire.test\nInfo = deskwire test server\n"
            "AdminInfo1 = deskwire\nAdminInfo2 = tests\nAdminEMail = tests@deskwire.invalid\n"
            f"Listen = 127.0.0.1\nPorts = {self.port}\n"
            "[Limits]\nMaxConnectionsIP = 0\nPingTimeout = 120\nPongTimeout = 60\n"
            f"{limits}"
            f"[Options]\nPAM = no\nIdent = no\nDNS = no\nIncludeDir = {self.dir / 'conf.d'}\n"
            f"{ssl_section}"
        )
        self.log = open(self.dir / "log", "wb")
        self.argv = [ngircd, "-n", "-f", str(self.dir / "ngircd.conf")]
        self.process = subprocess.Popen(
            self.argv, stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT
        )
        wait_port(self.port)
        if tls:
            wait_port(self.tls_port)

    def restart(self) -> None:
        """Stops the server, dropping every client, and starts it again on the same port."""
        stop(self.process)
        self.process = subprocess.Popen(
            self.argv, stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT
        )
        wait_port(self.port)

    def stop(self) -> None:
        stop(self.process)
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


class RexdIrc:
    """``rexd --irc`` on a server, serving RemoteBash as ``nick`` for ``allow_from``."""

    def __init__(self, port: int, *args: str, nick: str = "rexd", channel: str = "#desk",
                 allow_from: str = "desk") -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="deskwire-rexd-"))
        self.log_path = self.dir / "rexd.log"
        self.log: IO[bytes] = open(self.log_path, "wb")
        self.process = subprocess.Popen(
            [rexd_path(), "--irc", f"127.0.0.1:{port}", "--channel", channel, "--nick", nick,
             "--allow-from", allow_from, "--log-level", "info", "--root", str(self.dir), *args,
             # A private loopback server: serving without a secret is a risk accepted here.
             *([] if "--secret-file" in args else ["--unauthenticated"])],
            stdin=subprocess.DEVNULL,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            cwd=self.dir,
        )
        deadline = time.monotonic() + 10
        while "joined" not in self.text().lower():
            if self.process.poll() is not None:
                raise RuntimeError(f"rexd --irc exited: {self.text()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"rexd --irc did not join {channel}: {self.text()}")
            time.sleep(0.02)

    def text(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        stop(self.process)
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


class Sshd:
    """OpenSSH's sshd on a free loopback port with a fresh host key and client key; ``ssh_url``
    and ``targets_file`` (a rex targets file naming it ``box``, with the key and options)."""

    def __init__(self, rexd: str) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="deskwire-sshd-"))
        os.makedirs("/run/sshd", exist_ok=True)
        for name in ("host_key", "client_key"):
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(self.dir / name)],
                           check=True)
        shutil.copy(self.dir / "client_key.pub", self.dir / "authorized_keys")
        self.port = free_port()
        config = self.dir / "sshd_config"
        config.write_text(
            f"Port {self.port}\nListenAddress 127.0.0.1\nHostKey {self.dir / 'host_key'}\n"
            f"PidFile {self.dir / 'sshd.pid'}\nAuthorizedKeysFile {self.dir / 'authorized_keys'}\n"
            "PermitRootLogin prohibit-password\nPubkeyAuthentication yes\n"
            "PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\n"
            "StrictModes no\nUseDNS no\n"
        )
        self.log = open(self.dir / "log", "wb")
        self.process = subprocess.Popen(["/usr/sbin/sshd", "-D", "-e", "-f", str(config)],
                                        stdin=subprocess.DEVNULL, stdout=self.log,
                                        stderr=subprocess.STDOUT)
        wait_port(self.port)
        user = os.environ.get("USER") or "root"
        self.ssh_url = f"ssh://{user}@127.0.0.1:{self.port}"
        options = ["-o", "StrictHostKeyChecking=no", "-o", f"UserKnownHostsFile={self.dir / 'known_hosts'}",
                   "-o", "BatchMode=yes", "-o", "LogLevel=ERROR"]
        self.targets_file = self.dir / "targets.toml"
        quoted = ", ".join(f'"{o}"' for o in options)
        self.targets_file.write_text(
            f'[targets.box]\nurl = "{self.ssh_url}"\nidentity_file = "{self.dir / "client_key"}"\n'
            f"ssh_options = [{quoted}]\nrexd = \"{rexd}\"\n"
        )

    def stop(self) -> None:
        stop(self.process)
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)
