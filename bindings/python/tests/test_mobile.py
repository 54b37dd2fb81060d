"""The mobile engines, phone and desktop, on a virtual clock with the frames moved in memory:
pairing, token reconnect, state sync, chat, permission round trip, a wrong code."""

from __future__ import annotations

from typing import Any, List, Tuple

import pytest

import deskwire
from deskwire import Timeout, Transmit, mobile

CONN = 7


class Link:
    def __init__(self) -> None:
        self.desktop = mobile.Server(entropy=bytes(range(32)))
        self.phone = mobile.Client()
        self.open = False
        self.phone_events: List[Any] = []
        self.desktop_events: List[Any] = []

    def pump(self, now: int) -> None:
        for _ in range(50):
            moved = False
            while not isinstance(out := self.phone.poll_output(now), Timeout):
                moved = True
                if isinstance(out, mobile.Connect):
                    admission = self.desktop.open(now, CONN, out.bearer)
                    assert admission in ("authenticated", "awaiting_pairing"), admission
                    self.open = True
                    self.phone.connected(now)
                elif isinstance(out, Transmit):
                    self.desktop.handle_text(now, CONN, out.data.decode())
                elif isinstance(out, mobile.Close):
                    self.desktop.closed(now, CONN)
                    self.phone.disconnected(now, "closed")
                else:
                    self.phone_events.append(out)
            while not isinstance(out := self.desktop.poll_output(now), Timeout):
                moved = True
                if isinstance(out, mobile.Send):
                    assert out.conn == CONN
                    self.phone.handle_text(now, out.text)
                elif isinstance(out, mobile.CloseConnection):
                    self.phone.disconnected(now, "closed")
                else:
                    self.desktop_events.append(out)
            if not moved:
                return


def test_pairing_chat_and_permissions() -> None:
    link = Link()
    code = link.desktop.start_pairing(0)
    link.phone.pair(0, code)
    link.pump(0)
    paired = [e for e in link.phone_events if isinstance(e, mobile.Paired)]
    assert paired and paired[0].conn is None and link.phone.token == paired[0].token
    assert any(isinstance(e, mobile.Paired) and e.conn == CONN for e in link.desktop_events)
    assert any(isinstance(e, mobile.StateChanged) and e.initial for e in link.phone_events)

    link.desktop.set_state(1, {"status": "Running", "data": {"task_id": "t1", "iteration": 2}})
    link.desktop.send_message(1, {"role": "assistant", "content": "héllo", "timestamp": "2026-11-23T20:00:00Z"})
    permission = link.desktop.request_permission(
        1, {"tool_name": "RemoteBash", "command": "rm -rf build", "description": "clean", "tier": "high"})
    link.pump(1)
    assert mobile.Message("assistant", "héllo", "2026-11-23T20:00:00Z") in link.phone_events
    requested = [e for e in link.phone_events if isinstance(e, mobile.PermissionRequested)]
    assert requested[0].id == permission and requested[0].command == "rm -rf build"
    link.phone.respond_permission(2, permission, True)
    link.phone.send_message(2, "thanks")
    link.phone.send_command(2, {"action": "pause"})
    link.pump(2)
    assert mobile.PermissionAnswered(permission, CONN, True, False) in link.desktop_events
    assert mobile.UserMessage(CONN, "thanks") in link.desktop_events
    assert any(isinstance(e, mobile.Command) and e.command["action"] == "pause" for e in link.desktop_events)
    with pytest.raises(deskwire.LocalError):
        link.phone.respond_permission(3, "no-such-permission", True)


def test_wrong_code_and_token_reconnect() -> None:
    link = Link()
    link.desktop.start_pairing(0)
    link.phone.pair(0, "000000" if link.desktop.pairing_code(0) != "000000" else "111111")
    link.pump(0)
    assert any(isinstance(e, mobile.AuthFailed) for e in link.phone_events)
    assert any(isinstance(e, mobile.PairingFailed) for e in link.desktop_events)

    link.desktop.add_token("stored-token")
    phone = mobile.Client(token="stored-token")
    link.phone, link.phone_events = phone, []
    link.desktop.closed(1, CONN)
    phone.start(1)
    link.pump(1)
    assert any(isinstance(e, mobile.Connected) for e in link.phone_events)
    assert phone.connection_state == {"online": {"synced": True}}


def test_attempts_left_full_token_table_and_a_revoked_session() -> None:
    link = Link()
    link.desktop.close()
    link.desktop = mobile.Server(entropy=bytes(range(32)), max_tokens=1, pairing_backoff_ms=1000)
    code = link.desktop.start_pairing(0)
    link.phone.pair(0, "000000" if code != "000000" else "111111")
    link.pump(0)
    failed = [e for e in link.phone_events if isinstance(e, mobile.AuthFailed)]
    assert [(e.attempts_left, e.retry_after_ms) for e in failed] == [(4, 1000)]

    # One token held, the cap: no pairing and no other token; nothing is evicted.
    link.desktop.add_token("stored-token")
    with pytest.raises(deskwire.LocalError, match="revoke one first"):
        link.desktop.start_pairing(1)
    with pytest.raises(deskwire.LocalError):
        link.desktop.add_token("another")

    # Revoking the token closes the session that used it.
    link.phone, link.phone_events, link.desktop_events = mobile.Client(token="stored-token"), [], []
    link.desktop.closed(1, CONN)
    link.phone.start(1)
    link.pump(1)
    assert link.desktop.connections == 1
    assert link.desktop.revoke_token("stored-token")
    closes = []
    while not isinstance(out := link.desktop.poll_output(2), Timeout):
        closes.append(out)
    assert mobile.CloseConnection(conn=CONN, reason="revoked") in closes
    assert link.desktop.connections == 0
