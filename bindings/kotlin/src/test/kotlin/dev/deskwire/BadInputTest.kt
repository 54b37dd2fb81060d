package dev.deskwire

import dev.deskwire.core.*
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
        val desk = Desk(connectionConfig(nick = "desk", channel = "#desk", peer = "deskbot"), 0L, 1L)
        desk.handleBytes(
            0L,
            (
                ":srv 001 desk :Welcome desk!~desk@127.0.0.1\r\n:desk!~desk@127.0.0.1 JOIN #desk\r\n" +
                    ":srv 353 desk = #desk :desk deskbot\r\n:srv 366 desk #desk :End of NAMES list\r\n"
                ).toByteArray(),
        )
        var now = 0L
        val id = desk.request(now, "uname -a", null)
        repeat(3_000) {
            now += 1L
            desk.handleBytes(now, noise())
            while (desk.pollOutput(now) !is ConnectionOutput.Timeout) { /* drain */ }
        }
        desk.handleBytes(now, "\r\n".toByteArray()) // end the unterminated run
        val stats = desk.stats()
        assertTrue(stats.oa1.bytesBuffered < 256L * 1024L, "buffers stay bounded: $stats")
        assertTrue(stats.irc.ignoredTooLong + stats.irc.ignoredInvalid + stats.oa1.ignored > 0L)
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
        assertEquals(ErrorKind.ENTROPY_LENGTH, assertThrows<DeskwireException.InvalidInput> {
            MobileServer(mobileServerConfigDefault(), ByteArray(5))
        }.kind)
        assertThrows<DeskwireException.InvalidInput> { Gateway(gatewayConfig("t"), 0uL, ByteArray(0)) }
        assertThrows<DeskwireException.Misuse> { Gateway(gatewayConfig("t").copy(tokens = emptyList()), 0uL, ByteArray(32)) }
        assertEquals(ErrorKind.JSON, assertThrows<DeskwireException.InvalidInput> { Toolbox("{not json", 0uL) }.kind)
        assertThrows<DeskwireException.InvalidInput> { oa1ConfigFromJson("""{"channel":"#d","nick":"n","bogus":1}""") }
        assertThrows<DeskwireException.InvalidInput> { parseServerMessage("\u0000\uffff") }
        assertThrows<DeskwireException.InvalidInput> { parseClientMessage("""{"type":"auth","payload":[1,2]}""") }
        assertThrows<DeskwireException.InvalidInput> { ircParseLine(ByteArray(0)) }
        assertEquals(ErrorKind.BUDGET_TOO_SMALL, assertThrows<DeskwireException.InvalidInput> { oa1Chunk("text", 0L) }.kind)
        assertEquals(ErrorKind.BUDGET_TOO_SMALL, assertThrows<DeskwireException.InvalidInput> { oa1Chunk("text", -1L) }.kind)
        assertThrows<DeskwireException.InvalidInput> { readSchemaValue("nope", "X", "{}") }
        // A desk must name its remote; nicks and channels the server would refuse or rename are
        // refused when the engine is built.
        val desk = connectionConfig(nick = "desk", channel = "#desk")
        val noRemote = assertThrows<DeskwireException.InvalidInput> { Desk(desk, 0L, 1L) }
        assertEquals(ErrorKind.NO_REMOTE, noRemote.kind)
        assertTrue("`rexd --irc` joins as `rexd`" in noRemote.detail, noRemote.detail)
        val withRemote = connectionConfig(nick = "desk", channel = "#desk", peer = "rexd")
        Desk(withRemote, 0L, 1L).close()
        for (nick in listOf("a b", "", "9lives", "x".repeat(31))) {
            val bad = withRemote.copy(session = withRemote.session.copy(nick = nick))
            assertEquals(ErrorKind.INVALID_NICK, assertThrows<DeskwireException.InvalidInput> { Desk(bad, 0L, 1L) }.kind, nick)
        }
        assertEquals(ErrorKind.INVALID_CHANNEL, assertThrows<DeskwireException.InvalidInput> {
            Remote(connectionConfig(nick = "rexd", channel = "desk"), 0L)
        }.kind)
        assertEquals(ErrorKind.ALLOWED_SENDER, assertThrows<DeskwireException.InvalidInput> {
            Desk(connectionConfig(nick = "desk", channel = "#desk", peer = "re xd"), 0L, 1L)
        }.kind)
        // Times, sizes and counts are Longs; a negative one is refused, by name.
        val negative = assertThrows<DeskwireException.InvalidInput> {
            Desk(withRemote.copy(oa1 = withRemote.oa1.copy(requestTimeoutMs = -1L)), 0L, 1L)
        }
        assertEquals(ErrorKind.NEGATIVE, negative.kind)
        assertEquals("oa1.requestTimeoutMs is -1; it cannot be negative", negative.detail)
        assertEquals(ErrorKind.NEGATIVE, assertThrows<DeskwireException.InvalidInput> {
            Remote(withRemote.copy(session = withRemote.session.copy(maxNickAttempts = -3)), 0L)
        }.kind)
        assertEquals(ErrorKind.NEGATIVE, assertThrows<DeskwireException.InvalidInput> {
            Desk(withRemote.copy(peerGraceMs = Long.MIN_VALUE), 0L, 1L)
        }.kind)
        assertEquals(ErrorKind.NEGATIVE, assertThrows<DeskwireException.InvalidInput> {
            Desk(withRemote, 0L, 1L).request(0L, "x", -5L)
        }.kind)
        for (seq in listOf(0L, -1L, 4_294_967_296L)) {
            assertEquals(ErrorKind.INVALID, assertThrows<DeskwireException.InvalidInput> {
                oa1FormatFrame(Oa1Frame(Oa1FrameType.REQ, "a1", seq, false, "x"))
            }.kind, "seq $seq")
        }
        assertEquals("OA1 REQ a1 4294967295 0 x", oa1FormatFrame(Oa1Frame(Oa1FrameType.REQ, "a1", 4_294_967_295L, false, "x")))
        // A frame the parser would not read back, or a raw CR/LF that would inject an IRC line.
        for (id in listOf("a b", "", "a".repeat(65), "a.b")) {
            assertEquals(ErrorKind.INVALID_ID, assertThrows<DeskwireException.InvalidInput> {
                oa1FormatFrame(Oa1Frame(Oa1FrameType.REQ, id, 1L, false, "x"))
            }.kind, "id $id")
        }
        for (payload in listOf("x\r\nQUIT", "x\nQUIT", "\u0000")) {
            val e = assertThrows<DeskwireException.InvalidInput> {
                oa1FormatFrame(Oa1Frame(Oa1FrameType.REQ, "ab", 1L, false, payload))
            }
            assertEquals(ErrorKind.FORBIDDEN_BYTE, e.kind)
            assertTrue(e.detail.contains("raw"), e.detail)
        }
        assertEquals("OA1 REQ ab 1 0 x\\r\\nQUIT", oa1FormatFrame(Oa1Frame(Oa1FrameType.REQ, "ab", 1L, false, "x\\r\\nQUIT")))
        // Params that are neither an object nor an array (the sidecar: not an object).
        val params = JsonRpcPeer(JsonRpcDialect.JsonRpc2, jsonRpcConfigDefault(), 1uL)
        for (bad in listOf("\"str\"", "5", "null")) {
            assertEquals(ErrorKind.INVALID_PARAMS, assertThrows<DeskwireException.Misuse> {
                params.call(0uL, "m", bad, 0uL)
            }.kind, bad)
        }
        params.call(0uL, "m", "[1]", 0uL)
        val peer = JsonRpcPeer(JsonRpcDialect.Sidecar, jsonRpcConfigFor(JsonRpcDialect.Sidecar), 1uL)
        assertThrows<DeskwireException.InvalidInput> { peer.call(0uL, "m", "{broken", 0uL) }
        assertEquals(ErrorKind.UNKNOWN_ID, assertThrows<DeskwireException.Misuse> {
            peer.respond(0uL, JsonRpcId.Number(99), "{}")
        }.kind)
        val client = Oa1Client(oa1Config(nick = "desk", channel = "#desk"), 1L)
        assertEquals(ErrorKind.ZERO_TIMEOUT, assertThrows<DeskwireException.InvalidInput> {
            client.remoteBash(0L, """{"command":"ls","timeout_sec":0}""")
        }.kind)
        // A closed object refuses calls with a JVM exception instead of touching freed memory.
        client.close()
        assertThrows<IllegalStateException> { client.inFlight() }
    }

    @Test
    fun `a negative time is refused by every engine that takes a Long nowMs`() {
        val config = connectionConfig(nick = "desk", channel = "#desk", peer = "rexd")
        val desk = Desk(config, 0L, 1L)
        val remote = Remote(connectionConfig(nick = "rexd", channel = "#desk"), 0L)
        val session = IrcSession(config.session, 0L)
        val multi = MultiDesk(connectionConfig(nick = "desks", channel = ""), 0L, 1L)
        val client = Oa1Client(oa1Config(nick = "desk", channel = "#desk"), 1L)
        val line = ":srv PING :x\r\n".toByteArray()
        val calls = listOf<Pair<String, () -> Any?>>(
            "Desk()" to { Desk(config, -1L, 1L) },
            "Remote()" to { Remote(config, -1L) },
            "IrcSession()" to { IrcSession(config.session, -1L) },
            "MultiDesk()" to { MultiDesk(config, -1L, 1L) },
            "desk.handleBytes" to { desk.handleBytes(-5L, line) },
            "desk.pollOutput" to { desk.pollOutput(-5L) },
            "desk.handleTimeout" to { desk.handleTimeout(-5L) },
            "desk.drain" to { desk.drain(-5L) },
            "desk.request" to { desk.request(-5L, "x", null) },
            "remote.handleEof" to { remote.handleEof(-5L) },
            "session.pollOutput" to { session.pollOutput(-5L) },
            "multi.drain" to { multi.drain(-5L) },
            "client.handleLine" to { client.handleLine(-5L, line) },
            "pump.handleBytes" to { ConnectionPump(desk).use { it.handleBytes(-5L, line) } },
            "Long.MIN_VALUE" to { desk.pollOutput(Long.MIN_VALUE) },
        )
        for ((what, call) in calls) {
            val e = assertThrows<DeskwireException.InvalidInput>(what) { call() }
            assertEquals(ErrorKind.NEGATIVE, e.kind, what)
            val now = if (what == "Long.MIN_VALUE") Long.MIN_VALUE else if (what.endsWith("()")) -1L else -5L
            assertEquals("nowMs is $now; the clock starts at 0", e.detail, what)
        }
        // Refused, not taken as 0: the engines go on at the times they had.
        assertTrue(desk.pollOutput(0L) is ConnectionOutput.Transmit)
        listOf(desk, remote, session, multi, client).forEach { it.close() }
    }

    @Test
    fun `a quit desk refuses new requests as CLOSED misuse, its requests in flight fail disconnected`() {
        val desk = Desk(connectionConfig(nick = "desk", channel = "#desk", peer = "deskbot"), 0L, 1L)
        val id = desk.request(0L, "uname -a", null)
        desk.quit(1L, "done")
        val events = generateSequence { desk.pollOutput(1L) }.takeWhile { it !is ConnectionOutput.Timeout }
            .filterIsInstance<ConnectionOutput.Event>().map { it.event }.toList()
        val failed = events.filterIsInstance<ConnectionEvent.Oa1>().map { it.event }.filterIsInstance<Oa1Event.Failed>().single()
        assertEquals(id, failed.id)
        assertEquals(Oa1Failure.Disconnected("we quit"), failed.failure)
        assertEquals("the IRC connection ended before the response: we quit", oa1FailureMessage(failed.failure))
        assertEquals(ConnectionState.CLOSED, desk.state())
        for (call in listOf<() -> Unit>(
            { desk.request(2L, "uname -a", null) },
            { desk.remoteBash(2L, """{"command":"ls"}""") },
        )) {
            val closed = assertThrows<DeskwireException.Misuse> { call() }
            assertEquals(ErrorKind.CLOSED, closed.kind)
            assertEquals("the IRC connection has ended", closed.detail)
        }
    }
}
