"""What the IRC connects (IrcDesk, IrcRemote, IrcDesks) say about input of the wrong kind:
``tls=``, ``sasl=``, ``secret=``, ``password=`` and ``reconnect=`` of a type they do not take
are a ``TypeError`` naming the keyword and what to pass, before any connection, not an
``AttributeError`` from deep inside asyncio; a secret or a server password given as UTF-8 bytes
is taken; a host name that does not resolve is said in the resolver's words. Loopback only: a
refused port, a silent listener, ngircd."""

from __future__ import annotations

import asyncio
import socket
import ssl
from typing import Any, Awaitable, Callable, Iterator, List

import pytest

import deskwire
from deskwire import oa1
from deskwire.aio import IrcDesk, IrcDesks, IrcRemote, Reconnect, RexdClient

from peers import ClosedPort, Ngircd

Connect = Callable[..., Awaitable[Any]]


async def _handler(request: oa1.Request) -> str:
    return f"got {request.payload}"


def _connects() -> List[Connect]:
    """The three connects that share ``tls``, ``sasl`` and ``secret``."""

    def remote(host: str, port: int, **kwargs: Any) -> Awaitable[Any]:
        return IrcRemote.connect(host, port, _handler, **kwargs)

    return [IrcDesk.connect, remote, IrcDesks.connect]


@pytest.fixture
def listener() -> Iterator[int]:
    """A loopback port that takes connections and says nothing: a connect that gets there
    would wait (and, before the check, fail with an AttributeError in the TLS setup)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield int(s.getsockname()[1])


@pytest.fixture
def closed() -> Iterator[int]:
    port = ClosedPort()
    yield port.port
    port.close()


@pytest.mark.parametrize("bad", [1, 0, "yes", "", b"tls", {"cafile": "ca.pem"}])
async def test_tls_of_another_type_is_a_type_error(listener: int, bad: Any) -> None:
    for connect in _connects():
        with pytest.raises(TypeError) as caught:
            await asyncio.wait_for(connect("127.0.0.1", listener, tls=bad, ready_timeout=1), 5)
        said = str(caught.value)
        assert said.startswith(
            f"tls must be True, False or an ssl.SSLContext, not {type(bad).__name__}"
        ), said


async def test_tls_true_false_none_and_a_context_still_pass(closed: int) -> None:
    """Each gets as far as the connect (refused here): the check lets them through."""
    for tls in (True, False, None, ssl.create_default_context()):
        for connect in _connects():
            with pytest.raises(deskwire.ConnectFailedError, match=f"127.0.0.1:{closed} failed"):
                await connect("127.0.0.1", closed, tls=tls)


@pytest.mark.parametrize("bad", [("alice", "pw-never-shown"), {"username": "alice"}, "alice"])
async def test_sasl_that_is_not_a_sasl_login_is_a_type_error(closed: int, bad: Any) -> None:
    for connect in _connects():
        with pytest.raises(TypeError) as caught:
            await connect("127.0.0.1", closed, sasl=bad)
        said = str(caught.value)
        assert said.startswith(
            f"sasl must be a deskwire.irc.SaslLogin, not {type(bad).__name__}: pass "
            "sasl=SaslLogin.plain(username, password)"
        ), said
        assert "pw-never-shown" not in said


async def test_a_secret_of_bytes_not_utf8_or_another_type_is_refused_at_once(closed: int) -> None:
    for connect in _connects():
        with pytest.raises(deskwire.LocalError) as refused:
            await connect("127.0.0.1", closed, secret=b"\xffsecret-of-16-bytes")
        assert refused.value.code == "invalid_value"
        said = str(refused.value)
        assert "secret is bytes that are not UTF-8" in said, said
        # Neither the message nor the chained decode error quotes a byte of the secret.
        assert "xff" not in said and refused.value.__suppress_context__
        with pytest.raises(TypeError, match="^secret must be a str .or UTF-8 bytes., not int$"):
            await connect("127.0.0.1", closed, secret=12345)


@pytest.mark.parametrize(
    "bad",
    [b"\xffpw-never-shown", "pw-never-shown\r\nQUIT", b"pw-never-shown\n", "pw\0never-shown", 12345],
)
async def test_a_password_that_cannot_be_sent_is_refused_at_once_without_quoting_it(
    closed: int, bad: Any
) -> None:
    """Bytes that are not UTF-8, a line break or NUL (which would end the ``PASS`` line), or
    another type: refused before connecting, and no message or chained error holds it."""
    for connect in _connects():
        if isinstance(bad, int):
            with pytest.raises(TypeError, match="^password must be a str .or UTF-8 bytes., not int$"):
                await connect("127.0.0.1", closed, password=bad)
            continue
        with pytest.raises(deskwire.LocalError) as refused:
            await connect("127.0.0.1", closed, password=bad)
        assert refused.value.code == "invalid_value"
        said = str(refused.value)
        if bad.startswith(b"\xff" if isinstance(bad, bytes) else "\xff"):
            assert "password is bytes that are not UTF-8" in said, said
        else:
            assert "password holds a line break or NUL, which cannot go in an IRC PASS line" in said, said
        assert "never-shown" not in said and "xff" not in said, said
        # No chained error (a decode error's text would quote a byte of it).
        error = refused.value
        assert error.__cause__ is None and (error.__context__ is None or error.__suppress_context__)


@pytest.mark.parametrize("bad", [1, 0, "yes", "", {"min_delay": 1.0}, 1.5])
async def test_reconnect_of_another_type_is_a_type_error(closed: int, bad: Any) -> None:
    """Before any connection (this port refuses it), not a policy found wanting only when the
    server drops the connection; bool is checked by identity, so 1 is not True."""
    for connect in _connects():
        with pytest.raises(TypeError) as caught:
            await connect("127.0.0.1", closed, reconnect=bad)
        said = str(caught.value)
        assert said.startswith(
            f"reconnect must be True, False or a deskwire.aio.Reconnect, not {type(bad).__name__}: pass "
        ), said
        if isinstance(bad, int):
            assert said.endswith(f"pass reconnect={bool(bad)!r}"), said


async def test_reconnect_true_false_none_and_a_policy_still_pass(closed: int) -> None:
    """Each gets as far as the connect (refused here): the check lets them through."""
    for reconnect in (True, False, None, Reconnect(min_delay=0.05, max_delay=0.5)):
        for connect in _connects():
            with pytest.raises(deskwire.ConnectFailedError, match=f"127.0.0.1:{closed} failed"):
                await connect("127.0.0.1", closed, reconnect=reconnect)


@pytest.fixture
def server() -> Iterator[Ngircd]:
    s = Ngircd(penalties=False)
    yield s
    s.stop()


async def test_a_secret_of_utf8_bytes_is_the_same_secret_as_its_text(server: Ngircd) -> None:
    """Bytes as read from a secret file (what ``rexd --secret-file`` takes) are its text."""
    text = "shared ünïcode secret, 32 bytes+"
    async with await IrcRemote.connect(
        "127.0.0.1", server.port, _handler, nick="remote", desk_nick=None, secret=text
    ):
        async with await IrcDesk.connect(
            "127.0.0.1", server.port, remote_nick="remote", secret=text.encode(), ready_timeout=20
        ) as desk:
            assert await desk.request("ping", timeout=20) == "got ping"
        async with await IrcDesks.connect(
            "127.0.0.1", server.port, nick="desks", ready_timeout=20
        ) as desks:
            with pytest.raises(deskwire.LocalError, match="secret is bytes that are not UTF-8"):
                await desks.add_desk("#desk", "remote", secret=b"\xff" * 16)
            await desks.add_desk("#desk", "remote", secret=text.encode(), ready_timeout=20)
            assert await desks.request("#desk", "pong", timeout=20) == "got pong"


PASSWORD = "pässwort-ünïcode"


@pytest.fixture
def guarded() -> Iterator[Ngircd]:
    """An ngircd that lets in only clients that give ``PASSWORD`` (in ``PASS``)."""
    s = Ngircd(penalties=False)
    (s.dir / "conf.d" / "password.conf").write_text(f"[Global]\nPassword = {PASSWORD}\n", "utf-8")
    s.restart()
    yield s
    s.stop()


async def test_a_password_of_utf8_bytes_is_the_same_password_as_its_text(guarded: Ngircd) -> None:
    """Bytes as read from a password file are its text: the server takes them; a wrong one
    it refuses (the password is what lets us in)."""
    with pytest.raises(deskwire.DisconnectedError, match="Bad password"):
        await IrcRemote.connect(
            "127.0.0.1", guarded.port, _handler, nick="remote", password=b"wrong", ready_timeout=10
        )
    async with await IrcRemote.connect(
        "127.0.0.1", guarded.port, _handler, nick="remote", desk_nick=None,
        password=PASSWORD.encode(), ready_timeout=20,
    ):
        async with await IrcDesk.connect(
            "127.0.0.1", guarded.port, remote_nick="remote", password=PASSWORD.encode(),
            ready_timeout=20,
        ) as desk:
            assert await desk.request("ping", timeout=20) == "got ping"
        async with await IrcDesks.connect(
            "127.0.0.1", guarded.port, nick="desks", channels=["#desk"], remote_nick="remote",
            password=bytearray(PASSWORD.encode()), ready_timeout=20,
        ) as desks:
            assert await desks.request("#desk", "pong", timeout=20) == "got pong"


def _resolver_words(host: str) -> str:
    try:
        socket.getaddrinfo(host, 6667)
    except socket.gaierror as e:
        return str(e.strerror)
    pytest.skip(f"{host} resolves here")


async def test_a_host_that_does_not_resolve_is_said_in_the_resolver_s_words() -> None:
    host = "no.such.host.invalid"  # .invalid never resolves (RFC 2606)
    words = _resolver_words(host)
    with pytest.raises(deskwire.ConnectFailedError) as caught:
        await IrcDesk.connect(host, 6667)
    assert str(caught.value) == f"connect_failed: connect to {host}:6667 failed: {words}"
    assert "Unknown error" not in str(caught.value)


async def test_a_rexd_url_whose_host_does_not_resolve_is_said_in_the_resolver_s_words() -> None:
    pytest.importorskip("websockets")
    host = "no.such.host.invalid"
    words = _resolver_words(host)
    with pytest.raises(deskwire.ConnectFailedError) as caught:
        await RexdClient.connect(f"https://{host}:7070", token="t" * 32, timeout=5)
    said = str(caught.value)
    assert f"connect to {host}:7070 failed: {words} (wss://" in said, said
    assert "Unknown error" not in said
