package dev.deskwire

import dev.deskwire.core.*
import org.junit.jupiter.api.Test
import java.nio.ByteBuffer
import kotlin.test.assertEquals
import kotlin.test.assertFailsWith
import kotlin.test.assertTrue

/**
 * [ConnectionPump] gives what `handleBytes` then `drain` give, engine for engine: two desks
 * (or remotes) with one seed, one fed through the pump and one through the uniffi methods.
 */
class ConnectionPumpTest {
    private val welcome = (
        ":srv 001 desk :Welcome desk!~desk@127.0.0.1\r\n:desk!~desk@127.0.0.1 JOIN #desk\r\n" +
            ":srv 353 desk = #desk :desk deskbot\r\n:srv 366 desk #desk :End of NAMES list\r\n"
        ).toByteArray()

    private fun desk() = Desk(connectionConfig(nick = "desk", channel = "#desk", peer = "deskbot"), 0L, 1L)

    private fun direct(bytes: ByteArray): ByteBuffer = ByteBuffer.allocateDirect(bytes.size).put(bytes).flip()

    @Test
    fun `a pump gives the drain handleBytes then drain give`() {
        val plain = desk()
        val pumped = desk()
        ConnectionPump(pumped).use { pump ->
            plain.handleBytes(0L, welcome)
            val expected = plain.drain(0L)
            val got = pump.handleBytes(0L, direct(welcome))
            assertTrue(expected.bytes.isNotEmpty() && expected.events.isNotEmpty(), "the welcome drains lines and events")
            assertEquals(String(expected.bytes), String(got.bytes))
            assertEquals(expected.events, got.events)
            assertEquals(expected.deadlineMs, got.deadlineMs)
            assertEquals(ConnectionState.READY, pumped.state())

            // A request queued through the engine's own object leaves with the next pump call.
            val id = pumped.request(1L, "uname -a", null)
            assertEquals(id, plain.request(1L, "uname -a", null))
            val line = ":deskbot!~bot@10.0.0.2 PRIVMSG #desk :hello\r\n".toByteArray()
            plain.handleBytes(1L, line)
            val next = plain.drain(1L)
            val got2 = pump.handleBytes(1L, line)
            assertTrue(String(got2.bytes).contains("PRIVMSG #desk"), String(got2.bytes))
            assertEquals(String(next.bytes), String(got2.bytes))
            assertEquals(next.events, got2.events)
        }
        plain.close()
        pumped.close()
    }

    @Test
    fun `a drain larger than the pump's buffer arrives whole`() {
        val plain = desk()
        val pumped = desk()
        // 400 pings: 400 pongs, about 6 KiB, more than the pump's first buffer (4 KiB).
        val pings = (0 until 400).joinToString("") { ":srv PING :token-$it\r\n" }.toByteArray()
        ConnectionPump(pumped).use { pump ->
            plain.handleBytes(0L, welcome)
            plain.drain(0L)
            pump.handleBytes(0L, welcome)
            plain.handleBytes(1L, pings)
            val expected = plain.drain(1L)
            val got = pump.handleBytes(1L, pings)
            assertTrue(expected.bytes.size > 4 * 1024, "${expected.bytes.size} bytes")
            assertEquals(String(expected.bytes), String(got.bytes))
            assertTrue(String(got.bytes).endsWith("PONG token-399\r\n"))
            // And the one after it, into the grown buffer.
            assertEquals(0, pump.handleBytes(2L, ByteArray(0)).bytes.size)
        }
        plain.close()
        pumped.close()
    }

    @Test
    fun `a pump reads from the buffer's position to its limit, and an array copies`() {
        // Read a byte early or late, `:srv PING :abcd` is not a ping, or gets `:x` on its token.
        val before = "\r\n:x".toByteArray()
        val ping = ":srv PING :abcd\r\n".toByteArray()
        val after = "\r\n:x PING :efgh\r\n".toByteArray()
        val buffer = ByteBuffer.allocateDirect(before.size + ping.size + after.size)
        buffer.put(before).put(ping).put(after)
        buffer.position(before.size).limit(before.size + ping.size)
        val desk = desk()
        ConnectionPump(desk).use { pump ->
            pump.handleBytes(0L, welcome)
            val got = pump.handleBytes(1L, buffer)
            assertEquals("PONG abcd\r\n", String(got.bytes))
            assertEquals(before.size, buffer.position(), "the position does not move")
            // Twice: the pump's own output buffer starts over each call.
            assertEquals("PONG abcd\r\n", String(pump.handleBytes(2L, buffer).bytes))
            val padded = before + ping + after
            assertEquals("PONG abcd\r\n", String(pump.handleBytes(3L, padded, before.size, ping.size).bytes))
        }
        desk.close()
    }

    @Test
    fun `a remote pumps too, and a closed pump or a heap buffer is refused`() {
        fun remote() = Remote(connectionConfig(nick = "deskbot", channel = "#desk", peer = "desk"), 0L)
        val plain = remote()
        val remote = remote()
        val pump = ConnectionPump(remote)
        val welcomeBot = (
            ":srv 001 deskbot :Welcome\r\n:deskbot!~bot@h JOIN #desk\r\n" +
                ":srv 353 deskbot = #desk :deskbot desk\r\n:srv 366 deskbot #desk :End\r\n"
            ).toByteArray()
        plain.handleBytes(0L, welcomeBot)
        val expected = plain.drain(0L)
        val drain = pump.handleBytes(0L, welcomeBot)
        assertTrue(expected.bytes.isNotEmpty(), "registration lines")
        assertEquals(String(expected.bytes), String(drain.bytes))
        assertEquals(expected.events, drain.events)
        assertEquals(plain.state(), remote.state())
        plain.close()
        assertFailsWith<IllegalArgumentException> { pump.handleBytes(1L, ByteBuffer.wrap(welcomeBot)) }
        // The pump holds its own reference: the engine's object may close first.
        remote.close()
        assertEquals(0, pump.handleBytes(1L, ByteArray(0)).events.size)
        pump.close()
        assertFailsWith<IllegalStateException> { pump.handleBytes(2L, ByteArray(0)) }
    }
}
