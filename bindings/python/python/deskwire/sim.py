"""In-memory IRC for tests and demos, no server needed.

:class:`Network` is a server over raw bytes for :class:`deskwire.oa1.Desk` and
:class:`deskwire.oa1.Remote`; :class:`Relay` is one channel over lines for
:class:`deskwire.oa1.Client` and :class:`deskwire.oa1.Server`.
"""

from __future__ import annotations

from ._deskwire.sim import Network, Relay

__all__ = ["Network", "Relay"]
