"""IrcDesk logging in with SASL over TLS, against InspIRCd 3 linked to Atheme services
(``services-irc`` from tests/integration starts them, with the account ``bob``), with
``rexd --irc`` answering on the same server: the connect line a user writes, and what a wrong
password and an untrusted certificate raise."""

from __future__ import annotations

import json
import os
import ssl
import subprocess
from pathlib import Path
from typing import Any, Dict, Iterator

import pytest

import deskwire
from deskwire import irc
from deskwire.aio import IrcDesk

from peers import RexdIrc

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def services() -> Iterator[Dict[str, Any]]:
    binary = os.environ.get("DESKWIRE_SERVICES_IRC") or str(REPO / "target/debug/services-irc")
    process = subprocess.Popen([binary], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None and process.stdin is not None
    line = process.stdout.readline()
    if not line:
        process.wait(10)
        pytest.fail(f"{binary} did not start InspIRCd and Atheme (exit {process.returncode})")
    yield json.loads(line)
    process.stdin.close()
    process.wait(30)


@pytest.fixture(scope="module")
def rexd(services: Dict[str, Any]) -> Iterator[RexdIrc]:
    r = RexdIrc(services["port"])
    yield r
    r.stop()


def trusting(services: Dict[str, Any]) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=services["ca"])


async def test_plain_login_over_tls_then_remote_bash(services: Dict[str, Any], rexd: RexdIrc) -> None:
    login = irc.SaslLogin.plain(services["account"], services["password"])
    async with await IrcDesk.connect("localhost", services["tls_port"], tls=trusting(services),
                                     sasl=login) as desk:
        assert irc.LoggedIn(account="bob") in desk.events
        assert await desk.remote_bash("echo logged in", timeout=30) == "logged in\n"


async def test_a_wrong_password_raises_login_failed_with_the_servers_words(
    services: Dict[str, Any]
) -> None:
    with pytest.raises(deskwire.LoginFailedError) as caught:
        await IrcDesk.connect("localhost", services["tls_port"], tls=trusting(services),
                              sasl=irc.SaslLogin.plain("bob", "wrong"), ready_timeout=15)
    assert caught.value.message == "SASL login failed: 904 SASL authentication failed"


async def test_external_logs_in_with_the_registered_certificate(
    services: Dict[str, Any], rexd: RexdIrc
) -> None:
    context = trusting(services)
    context.load_cert_chain(services["client_cert"], services["client_key"])
    async with await IrcDesk.connect("localhost", services["tls_port"], tls=context,
                                     sasl=irc.SaslLogin.external()) as desk:
        assert irc.LoggedIn(account="bob") in desk.events
        assert await desk.remote_bash("echo external", timeout=30) == "external\n"


async def test_an_untrusted_certificate_raises_tls_error(services: Dict[str, Any]) -> None:
    with pytest.raises(deskwire.TlsError) as caught:
        await IrcDesk.connect("localhost", services["tls_port"], tls=True,
                              sasl=irc.SaslLogin.plain("bob", "hunter22"))
    assert "certificate verify failed" in caught.value.message
    assert "give the server's CA" in caught.value.message
