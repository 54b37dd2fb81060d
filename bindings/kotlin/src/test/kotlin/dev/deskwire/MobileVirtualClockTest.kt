package dev.deskwire

import dev.deskwire.core.*
import org.junit.jupiter.api.Test
import kotlin.test.assertEquals
import kotlin.test.assertIs
import kotlin.test.assertNull
import kotlin.test.assertTrue

/**
 * The mobile companion's whole lifecycle with both engines in one JVM, no sockets, on a virtual
 * clock: what one side transmits is handed to the other; "the socket" is a connection number.
 */
class MobileVirtualClockTest {
    private var now = 0uL
    private var server: MobileServer? = MobileServer(mobileServerConfigDefault(), ByteArray(32) { 42 })
    private var nextConn = 1uL

    /** One phone and its current connection, if any. */
    private inner class Phone(token: String? = null) {
        val engine = MobileClient(mobileClientConfigDefault(), token)
        var conn: ULong? = null
        val events = mutableListOf<MobileClientEvent>()
        val connects = mutableListOf<Pair<ULong, String?>>()

        /** Drains the phone; returns its deadline. */
        fun pump(): ULong {
            while (true) {
                val out = engine.pollOutput(now)
                if (out !is MobileClientOutput.Timeout) moved++
                when (out) {
                    is MobileClientOutput.Connect -> {
                        connects += now to out.bearer
                        val s = server
                        if (s == null) {
                            engine.disconnected(now, MobileDisconnectReason.Failed("connection refused"))
                            continue
                        }
                        val c = nextConn++
                        when (s.open(now, c, out.bearer)) {
                            is Admission.Refused -> engine.disconnected(now, MobileDisconnectReason.Unauthorized)
                            else -> { conn = c; engine.connected(now) }
                        }
                    }
                    is MobileClientOutput.Transmit -> conn?.let { server?.handleText(now, it, out.text) }
                    MobileClientOutput.Close -> { conn?.let { server?.closed(now, it) }; conn = null }
                    is MobileClientOutput.Event -> events += out.event
                    is MobileClientOutput.Timeout -> return out.deadlineMs
                }
            }
        }
    }

    private val phones = mutableListOf<Phone>()
    /** Outputs handled so far (anything but a deadline): settled when a round adds none. */
    private var moved = 0
    private val serverEvents = mutableListOf<MobileServerEvent>()
    private var permission: String? = null

    /** The desktop's app: the scripted agent of examples/mobile_desktop, in Kotlin. */
    private fun agent(s: MobileServer, event: MobileServerEvent) {
        when (event) {
            is MobileServerEvent.Command -> if (event.command.action == CommandAction.START) {
                s.setState(now, AgentState.Running(RunningData("t1", 0uL)))
                s.sendTaskUpdate(now, TaskUpdate("t1", 0uL, "running"))
                permission = s.requestPermission(now, NewPermission("shell", "ls -la", "List the files", "medium"))
            }
            is MobileServerEvent.PermissionAnswered -> if (event.id == permission && event.approved) {
                s.setState(now, AgentState.Running(RunningData("t1", 1uL)))
                s.setState(now, AgentState.Stopped(StoppedData("t1", StopReason.COMPLETED)))
            }
            else -> {}
        }
    }

    /** Drains the server, delivering frames to the phone on that connection. */
    private fun pumpServer(): ULong {
        val s = server ?: return ULong.MAX_VALUE
        while (true) {
            val out = s.pollOutput(now)
            if (out !is MobileServerOutput.Timeout) moved++
            when (out) {
                is MobileServerOutput.Transmit -> phones.firstOrNull { it.conn == out.conn }?.engine?.handleText(now, out.text)
                is MobileServerOutput.Close -> phones.firstOrNull { it.conn == out.conn }?.let {
                    it.conn = null
                    it.engine.disconnected(now, MobileDisconnectReason.Closed)
                }
                is MobileServerOutput.Event -> { serverEvents += out.event; agent(s, out.event) }
                is MobileServerOutput.Timeout -> return out.deadlineMs
            }
        }
    }

    /** Drains everything until quiet; returns the earliest deadline. */
    private fun settle(): ULong {
        var deadline: ULong
        do {
            val before = moved
            deadline = minOf(pumpServer(), phones.minOfOrNull { it.pump() } ?: ULong.MAX_VALUE)
        } while (moved != before)
        return deadline
    }

    private fun advanceTo(t: ULong) {
        while (true) {
            val deadline = settle()
            if (deadline > t) break
            now = deadline
        }
        now = t
        settle()
    }

    @Test
    fun `pairing, a task with a permission, a restart with backoff, a wrong code and a revoked token`() {
        val phone = Phone().also { phones += it }
        val code = server!!.startPairing(now)
        phone.engine.pair(now, code)
        settle()
        val token = assertIs<MobileClientEvent.Paired>(phone.events[0]).token
        assertEquals(MobileClientEvent.Connected, phone.events[1])
        assertEquals(MobileClientEvent.StateChanged(AgentState.Idle, true), phone.events[2])

        phone.engine.sendCommand(now, Command(CommandAction.START, "look around", null))
        settle()
        val asked = phone.events.filterIsInstance<MobileClientEvent.PermissionRequested>().single().request
        assertEquals(listOf(asked.id), phone.engine.pendingPermissions())
        phone.engine.respondPermission(now, asked.id, true, false)
        settle()
        assertEquals(AgentState.Stopped(StoppedData("t1", StopReason.COMPLETED)), phone.engine.agentState())

        // The desktop goes away for a minute: the phone retries on 1, 2, 4, 8, 16, 30, 30 s.
        phone.events.clear()
        val restartAt = now
        server = null
        phone.conn = null
        phone.engine.disconnected(now, MobileDisconnectReason.Closed)
        advanceTo(restartAt + 60_000uL)
        val delays = phone.events.filterIsInstance<MobileClientEvent.Disconnected>().map { it.retryInMs }
        assertEquals(listOf(1000uL, 2000uL, 4000uL, 8000uL, 16000uL, 30000uL), delays)
        assertEquals(
            listOf(1000uL, 3000uL, 7000uL, 15000uL, 31000uL).map { restartAt + it },
            phone.connects.drop(1).map { it.first },
            "each attempt starts exactly at its backoff deadline",
        )
        // Back up with the token it issued (kept by the desktop's app): bearer, no pairing.
        server = MobileServer(mobileServerConfigDefault(), ByteArray(32) { 43 }).also { it.addToken(token) }
        advanceTo(restartAt + 90_000uL)
        assertEquals(token, phone.connects.last().second, "reconnects present the bearer token")
        assertTrue(phone.events.none { it is MobileClientEvent.Paired })
        assertEquals(MobileClientEvent.StateChanged(AgentState.Idle, true), phone.events.last())
        assertEquals(
            MobileServerEvent.ClientConnected(phone.conn!!, AuthMethod.TOKEN),
            serverEvents.last { it is MobileServerEvent.ClientConnected },
        )

        // A wrong code: refused, the socket closed, no retry.
        val stranger = Phone().also { phones += it }
        val shown = server!!.startPairing(now)
        stranger.engine.pair(now, if (shown == "000000") "000001" else "000000")
        settle()
        val told = assertIs<MobileClientEvent.AuthFailed>(stranger.events.last())
        assertEquals(MobileClientEvent.AuthFailed(told.error, 4u, 1000uL), told)
        assertTrue(told.error!!.startsWith("invalid pairing code"), told.error)
        assertEquals(MobileConnectionState.Idle, stranger.engine.connectionState())

        // A revoked token: its session is closed at once, the next upgrade is refused, and the
        // phone forgets the token.
        val revokedConn = phone.conn!!
        assertTrue(server!!.revokeToken(token))
        settle()
        assertEquals(
            MobileServerEvent.ClientDisconnected(revokedConn, CloseReason.REVOKED),
            serverEvents.last { it is MobileServerEvent.ClientDisconnected },
        )
        assertEquals(MobileDisconnectReason.Closed, assertIs<MobileClientEvent.Disconnected>(phone.events.last()).reason)
        phone.engine.stop(now)
        settle()
        phone.engine.start(now)
        settle()
        assertEquals(MobileClientEvent.TokenRejected, phone.events.last())
        assertNull(phone.engine.token())
        assertEquals(1uL, server!!.stats().badTokens)
    }
}
