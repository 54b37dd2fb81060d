package dev.deskwire

import dev.deskwire.core.*
import org.junit.jupiter.api.Test
import kotlin.test.assertEquals
import kotlin.test.assertNull
import kotlin.test.assertTrue

/**
 * The shape of the OA1, IRC and connection API as a Kotlin user meets it: values that print,
 * one argument order, `Long` where a number crosses, the defaults `rexd --irc` has.
 */
class SurfaceTest {
    @Test
    fun `variants without fields print their names`() {
        // uniffi writes `object`, which prints as `Oa1Failure$Incomplete@551bdc27`; the bindgen
        // makes them `data object`s.
        assertEquals("Incomplete", Oa1Failure.Incomplete.toString())
        assertEquals("ConnectionLost", IrcDisconnectReason.ConnectionLost.toString())
        assertEquals("Failed(id=a1, failure=Incomplete)", Oa1Event.Failed("a1", Oa1Failure.Incomplete).toString())
        // Variants with fields stay data classes.
        assertEquals("NotReady(message=m)", Oa1Failure.NotReady("m").toString())
        assertEquals(
            "request a1 failed: timeout: no complete response before the request timeout",
            Oa1RequestException("a1", Oa1Failure.Timeout("no complete response before the request timeout")).message,
        )
    }

    @Test
    fun `a sidecar peer's defaults are the sidecar's per-method timeouts`() {
        val sidecar = jsonRpcConfigFor(JsonRpcDialect.Sidecar)
        assertEquals(jsonRpcSidecarTimeouts(), sidecar.timeouts)
        assertTrue(sidecar.timeouts.rules.isNotEmpty())
        assertEquals(jsonRpcConfigDefault(), jsonRpcConfigFor(JsonRpcDialect.JsonRpc2))
        assertEquals(30_000uL, jsonRpcConfigFor(JsonRpcDialect.Gateway("t", 0uL)).timeouts.defaultTimeoutMs)
    }

    @Test
    fun `configs take the nick first, then the channel`() {
        val oa1 = oa1Config(nick = "desk", channel = "#desk")
        assertEquals("desk" to "#desk", oa1.nick to oa1.channel)
        assertEquals(oa1Config("desk", "#desk"), oa1)
        val connection = connectionConfig("desk", "#desk")
        assertEquals("desk" to "#desk", connection.session.nick to connection.oa1.channel)
        assertEquals(listOf("#desk"), connection.session.channels)
        assertNull(connection.oa1.allowedSender)
        assertEquals("rexd", connectionConfig(nick = "desk", channel = "#desk", peer = "rexd").oa1.allowedSender)
    }

    @Test
    fun `the default desk works with rexd --irc's defaults`() {
        val config = DeskConnection.defaultConfig()
        assertEquals("desk", config.session.nick) // what `rexd --allow-from desk` serves
        assertEquals("#desk", config.oa1.channel) // rexd's --channel default
        assertEquals("rexd", config.oa1.allowedSender) // rexd's --nick default
        // Times are Longs; the request timeout starts when the request may leave.
        val times: List<Long> = listOf(config.oa1.requestTimeoutMs, config.oa1.readyTimeoutMs, config.peerGraceMs)
        assertEquals(listOf(30_000L, 30_000L, 2_000L), times)
    }

    @Test
    fun `why a session ended reads as the core says it`() {
        assertEquals("the connection was lost", ircDisconnectReasonMessage(IrcDisconnectReason.ConnectionLost))
        assertEquals(
            "the server closed the link: Closing Link",
            ircDisconnectReasonMessage(IrcDisconnectReason.ServerClosed("Closing Link")),
        )
        assertEquals("we quit", ircDisconnectReasonMessage(IrcDisconnectReason.Quit))
    }

    @Test
    fun `error kinds are an enum with the core's variants`() {
        val e = runCatching { Desk(connectionConfig("desk", "#desk"), 0L, 1L) }.exceptionOrNull()
        val kind = (e as DeskwireException.InvalidInput).kind
        assertEquals(ErrorKind.NO_REMOTE, kind)
        // The exception's message names the kind and says what to do.
        assertEquals(
            "kind=NO_REMOTE, detail=a desk needs its remote's nick in oa1.allowed_sender (`rexd --irc` joins as " +
                "`rexd`), or \"*\" to take answers from anyone in the channel",
            e.message,
        )
    }

    private val welcome = (
        ":srv 001 desk :Welcome desk!~desk@127.0.0.1\r\n:desk!~desk@127.0.0.1 JOIN #desk\r\n" +
            ":srv 353 desk = #desk :desk deskbot\r\n:srv 366 desk #desk :End of NAMES list\r\n"
        ).toByteArray()

    private fun desk() = Desk(connectionConfig(nick = "desk", channel = "#desk", peer = "deskbot"), 0L, 1L)

    @Test
    fun `drain gives in one call what pollOutput gives until its Timeout`() {
        // Two desks with one seed, fed the same: one drained call by call, one at once.
        val polled = desk()
        val drained = desk()
        for (engine in listOf(polled, drained)) {
            engine.handleBytes(0L, welcome)
            engine.request(0L, "uname -a", null)
        }
        val lines = mutableListOf<ByteArray>()
        val events = mutableListOf<ConnectionEvent>()
        val deadline: Long
        while (true) {
            when (val out = polled.pollOutput(0L)) {
                is ConnectionOutput.Transmit -> lines += out.bytes
                is ConnectionOutput.Event -> events += out.event
                is ConnectionOutput.Timeout -> { deadline = out.deadlineMs; break }
            }
        }
        val all = drained.drain(0L)
        assertTrue(lines.size >= 3, "registration, the request and more: ${lines.size} lines")
        assertEquals(lines.joinToString("") { String(it) }, String(all.bytes))
        assertEquals(events, all.events)
        assertTrue(ConnectionEvent.Link(LinkEvent.StateChanged(ConnectionState.READY)) in all.events)
        assertEquals(deadline, all.deadlineMs)
        // Drained, it has only its deadline left.
        val again = drained.drain(0L)
        assertEquals(0, again.bytes.size)
        assertEquals(emptyList(), again.events)
        polled.close()
        drained.close()
    }

    @Test
    fun `handleBytes reads a direct buffer from its position to its limit`() {
        val desk = desk()
        // Bytes before the position and after the limit must not reach the engine: read from the
        // buffer's base address, the server's welcome would arrive as `junk:srv 001 ...`.
        val garbage = "junk".toByteArray()
        val buffer = java.nio.ByteBuffer.allocateDirect(garbage.size * 2 + welcome.size)
        buffer.put(garbage).put(welcome).put(garbage)
        buffer.position(garbage.size).limit(garbage.size + welcome.size)
        desk.handleBytes(0L, buffer)
        desk.drain(0L)
        assertEquals(ConnectionState.READY, desk.state())
        desk.close()
    }
}
