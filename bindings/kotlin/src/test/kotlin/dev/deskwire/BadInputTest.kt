package dev.deskwire

import org.junit.jupiter.api.Test
import org.junit.jupiter.api.assertThrows
import kotlin.random.Random
import kotlin.test.assertEquals
import kotlin.test.assertIs
import kotlin.test.assertTrue

/**
 * Garbage, floods and misuse through every engine: the JVM survives, errors arrive as
 * [DeskwireException]s, the engines keep working, and their buffers stay bounded.
 */
class BadInputTest {
    private val random = Random(1234)

    private fun garbage(size: Int): ByteArray = ByteArray(size).also { random.nextBytes(it) }

    /** Random lines: bytes of every value, invalid UTF-8, NUL, lone CR, over-long runs. */
    private fun noise(): ByteArray = when (random.nextInt(6)) {
        0 -> garbage(random.nextInt(1, 600))
        1 -> byteArrayOf(0xff.toByte(), 0xfe.toByte(), 0xc3.toByte(), '\r'.code.toByte(), '\n'.code.toByte())
        2 -> ":x!y@z PRIVMSG #desk :OA1 RES ${"a".repeat(random.nextInt(70))} ${random.nextInt()} 9 \u0000\r\n".toByteArray()
        3 -> ByteArray(20_000) { 'A'.code.toByte() } // over any line limit, no newline
        4 -> ":srv 353 desk = #desk :@deskbot ${"n ".repeat(300)}\r\n".toByteArray()
        else -> "\r\n\r\n:\r\n \r\nPING\r\n".toByteArray()
    }

    @Test
    fun `the OA1 desk takes garbage bytes, stays bounded and still answers`() {
        val config = connectionConfig("desk", "#desk").let { it.copy(oa1 = it.oa1.copy(allowedSender = "deskbot")) }
        val desk = Desk(config, 0uL, 1uL)
        desk.handleBytes(
            0uL,
            (
                ":srv 001 desk :Welcome desk!~desk@127.0.0.1\r\n:desk!~desk@127.0.0.1 JOIN #desk\r\n" +
                    ":srv 353 desk = #desk :desk deskbot\r\n:srv 366 desk #desk :End of NAMES list\r\n"
                ).toByteArray(),
        )
        var now = 0uL
        val id = desk.request(now, "uname -a", null)
        repeat(3_000) {
            now += 1uL
            desk.handleBytes(now, noise())
            while (desk.pollOutput(now) !is ConnectionOutput.Timeout) { /* drain */ }
        }
        desk.handleBytes(now, "\r\n".toByteArray()) // end the unterminated run
        val stats = desk.stats()
        assertTrue(stats.oa1.bytesBuffered < 256uL * 1024uL, "buffers stay bounded: $stats")
        assertTrue(stats.irc.ignoredTooLong + stats.irc.ignoredInvalid + stats.oa1.ignored > 0uL)
        // The real answer still gets through.
        desk.handleBytes(now, ":deskbot!~b@h PRIVMSG #desk :OA1 RES $id 1 0 Linux\r\n".toByteArray())
        val events = generateSequence { desk.pollOutput(now) }.takeWhile { it !is ConnectionOutput.Timeout }
            .filterIsInstance<ConnectionOutput.Event>().map { it.event }.toList()
        assertTrue(events.contains(ConnectionEvent.Oa1(Oa1Event.Response(id, "Linux", false))), "$events")
    }

    @Test
    fun `the JSON-RPC peer, the mobile engines and the gateway take garbage`() {
        val peer = JsonRpcPeer(JsonRpcDialect.JsonRpc2, jsonRpcConfigDefault(), 1uL)
        val phone = MobileClient(mobileClientConfigDefault(), "token")
        val desktop = MobileServer(mobileServerConfigDefault(), ByteArray(32) { 9 })
        val gateway = Gateway(gatewayConfig("s3cr3t"), 0uL, ByteArray(32) { 7 })
        phone.start(0uL)
        phone.connected(0uL)
        desktop.open(0uL, 1uL, null)
        for (i in 0 until 2_000) {
            val bytes = noise()
            val text = String(bytes, Charsets.UTF_8) // lossy, as a WebSocket text frame would be
            peer.handleBytes(i.toULong(), bytes)
            phone.handleText(i.toULong(), text)
            desktop.handleText(i.toULong(), 1uL, text)
            runCatching { gateway.handleMessage(i.toULong(), 1uL, bytes) }
                .onFailure { assertIs<DeskwireException.Misuse>(it) }
            while (peer.pollOutput(i.toULong()) !is JsonRpcOutput.Timeout) {}
            while (phone.pollOutput(i.toULong()) !is MobileClientOutput.Timeout) {}
            while (desktop.pollOutput(i.toULong()) !is MobileServerOutput.Timeout) {}
            while (gateway.pollOutput(i.toULong(), 0uL) !is GatewayOutput.Timeout) {}
        }
        assertTrue(peer.stats().bytesBuffered < 2uL * 1024uL * 1024uL, "${peer.stats()}")
        assertTrue(phone.stats().malformed > 0uL)
        assertTrue(desktop.stats().malformed > 0uL)
        // Still working: a valid frame is read after all that.
        peer.handleBytes(3_000uL, "\n{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n".toByteArray())
        val events = generateSequence { peer.pollOutput(3_000uL) }.takeWhile { it !is JsonRpcOutput.Timeout }
            .filterIsInstance<JsonRpcOutput.Event>().map { it.event }.toList()
        assertTrue(events.any { it is JsonRpcEvent.Request && it.method == "ping" }, "$events")
    }

    @Test
    fun `invalid arguments are typed exceptions, never a crash`() {
        assertEquals("EntropyLength", assertThrows<DeskwireException.InvalidInput> {
            MobileServer(mobileServerConfigDefault(), ByteArray(5))
        }.kind)
        assertThrows<DeskwireException.InvalidInput> { Gateway(gatewayConfig("t"), 0uL, ByteArray(0)) }
        assertThrows<DeskwireException.Misuse> { Gateway(gatewayConfig("t").copy(tokens = emptyList()), 0uL, ByteArray(32)) }
        assertEquals("Json", assertThrows<DeskwireException.InvalidInput> { Toolbox("{not json", 0uL) }.kind)
        assertThrows<DeskwireException.InvalidInput> { oa1ConfigFromJson("""{"channel":"#d","nick":"n","bogus":1}""") }
        assertThrows<DeskwireException.InvalidInput> { parseServerMessage("\u0000\uffff") }
        assertThrows<DeskwireException.InvalidInput> { parseClientMessage("""{"type":"auth","payload":[1,2]}""") }
        assertThrows<DeskwireException.InvalidInput> { ircParseLine(ByteArray(0)) }
        assertThrows<DeskwireException.InvalidInput> { oa1Chunk("text", 0uL) }
        assertThrows<DeskwireException.InvalidInput> { readSchemaValue("nope", "X", "{}") }
        // A desk must name its remote; nicks and channels the server would refuse or rename are
        // refused when the engine is built.
        val desk = connectionConfig("desk", "#desk")
        val noRemote = assertThrows<DeskwireException.InvalidInput> { Desk(desk, 0uL, 1uL) }
        assertEquals("NoRemote", noRemote.kind)
        assertTrue("`rexd --irc` joins as `rexd`" in noRemote.detail, noRemote.detail)
        val withRemote = desk.copy(oa1 = desk.oa1.copy(allowedSender = "rexd"))
        for (nick in listOf("a b", "", "9lives", "x".repeat(31))) {
            val bad = withRemote.copy(session = withRemote.session.copy(nick = nick))
            assertEquals("InvalidNick", assertThrows<DeskwireException.InvalidInput> { Desk(bad, 0uL, 1uL) }.kind, nick)
        }
        assertEquals("InvalidChannel", assertThrows<DeskwireException.InvalidInput> {
            Remote(connectionConfig("rexd", "desk"), 0uL)
        }.kind)
        assertEquals("AllowedSender", assertThrows<DeskwireException.InvalidInput> {
            Desk(desk.copy(oa1 = desk.oa1.copy(allowedSender = "re xd")), 0uL, 1uL)
        }.kind)
        val peer = JsonRpcPeer(JsonRpcDialect.Sidecar, jsonRpcConfigDefault(), 1uL)
        assertThrows<DeskwireException.InvalidInput> { peer.call(0uL, "m", "{broken", 0uL) }
        assertEquals("UnknownId", assertThrows<DeskwireException.Misuse> {
            peer.respond(0uL, JsonRpcId.Number(99), "{}")
        }.kind)
        val client = Oa1Client(oa1Config("#desk", "desk"), 1uL)
        assertThrows<DeskwireException.InvalidInput> { client.remoteBash(0uL, """{"command":"ls","timeout_sec":0}""") }
        // A closed object refuses calls with a JVM exception instead of touching freed memory.
        client.close()
        assertThrows<IllegalStateException> { client.inFlight() }
    }
}
