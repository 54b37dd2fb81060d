package dev.deskwire

import dev.deskwire.core.*
import org.junit.jupiter.api.Test
import kotlin.test.assertEquals
import kotlin.test.assertNull

/**
 * The shape of the OA1, IRC and connection API as a Kotlin user meets it: values that print,
 * one argument order, `Long` where a number crosses, the defaults `rexd --irc` has.
 */
class SurfaceTest {
    @Test
    fun `variants without fields print their names`() {
        // uniffi writes `object`, which prints as `Oa1Failure$Timeout@551bdc27`; the bindgen
        // makes them `data object`s.
        assertEquals("Timeout", Oa1Failure.Timeout.toString())
        assertEquals("Incomplete", Oa1Failure.Incomplete.toString())
        assertEquals("ConnectionLost", IrcDisconnectReason.ConnectionLost.toString())
        assertEquals("Failed(id=a1, failure=Timeout)", Oa1Event.Failed("a1", Oa1Failure.Timeout).toString())
        // Variants with fields stay data classes.
        assertEquals("NotReady(message=m)", Oa1Failure.NotReady("m").toString())
        assertEquals(
            "request a1 failed: timeout: no complete response before the request timeout",
            Oa1RequestException("a1", Oa1Failure.Timeout).message,
        )
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
}
