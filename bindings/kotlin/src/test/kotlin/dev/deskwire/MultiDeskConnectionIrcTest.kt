package dev.deskwire

import dev.deskwire.core.*
import kotlinx.coroutines.CompletableDeferred
import kotlinx.coroutines.CoroutineScope
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.SupervisorJob
import kotlinx.coroutines.async
import kotlinx.coroutines.awaitAll
import kotlinx.coroutines.cancel
import kotlinx.coroutines.channels.Channel
import kotlinx.coroutines.delay
import kotlinx.coroutines.flow.onSubscription
import kotlinx.coroutines.launch
import kotlinx.coroutines.TimeoutCancellationException
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withTimeout
import kotlinx.coroutines.withTimeoutOrNull
import org.junit.jupiter.api.AfterAll
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.TestInstance
import java.net.Socket
import java.util.concurrent.LinkedBlockingQueue
import java.util.concurrent.TimeUnit
import kotlin.test.assertEquals
import kotlin.test.assertFailsWith
import kotlin.test.assertIs
import kotlin.test.assertTrue
import kotlin.time.Duration.Companion.seconds

/** A bound on every wait here, so that a test that goes wrong ends; never an assertion. */
private const val WAIT_MS = 60_000L

/**
 * A plain IRC client over a socket, for the other side of the chat: it registers, answers
 * `PING`, and collects every line it reads.
 */
private class RawIrc(port: Int, val nick: String) : AutoCloseable {
    private val socket = Socket("127.0.0.1", port)
    private val out = socket.getOutputStream()
    val lines = LinkedBlockingQueue<String>()
    private val reader = Thread {
        try {
            socket.getInputStream().bufferedReader(Charsets.UTF_8).useLines { all ->
                all.forEach { line ->
                    if (line.startsWith("PING ")) send("PONG " + line.removePrefix("PING "))
                    lines.add(line)
                }
            }
        } catch (_: java.io.IOException) {
            // Closed by the test.
        }
    }.apply { isDaemon = true; start() }

    init {
        send("NICK $nick", "USER $nick 0 * :raw test client")
        expect { it.contains(" 001 ") }
    }

    @Synchronized
    fun send(vararg raw: String) {
        for (line in raw) out.write((line + "\r\n").toByteArray())
        out.flush()
    }

    /** The next line that [fits] (the lines before it are passed over). */
    fun expect(fits: (String) -> Boolean): String {
        val end = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(WAIT_MS)
        while (true) {
            val left = end - System.nanoTime()
            check(left > 0) { "no line that fits within $WAIT_MS ms" }
            val line = lines.poll(left, TimeUnit.NANOSECONDS) ?: continue
            if (fits(line)) return line
        }
    }

    fun join(channel: String) {
        send("JOIN $channel")
        expect { it.contains(" 366 $nick $channel ") }
    }

    override fun close() {
        socket.close()
        reader.join(5_000)
    }
}

/**
 * Many desks on one connection ([MultiDeskConnection]) over real sockets to ngircd, with one
 * `rexd --irc` on one connection serving every channel: each desk gets only its own answers;
 * chat and membership from a plain IRC client arrive in the flow; long text leaves cut at
 * spaces; unknown channels and text starting with `OA1 ` are refused, typed.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class MultiDeskConnectionIrcTest {
    /** Any number of channels per client, and no penalty for the lines a test moves. */
    private val ngircd = Ngircd("[Limits]\nMaxJoins = 0\nMaxPenaltyTime = 0\n")
    private val scope = CoroutineScope(SupervisorJob() + Dispatchers.Default)

    /** The desks' settings: no pacing of our own (the server has no penalty here). */
    private val unpaced = connectionConfig(nick = "npcs", channel = "").let {
        it.copy(oa1 = it.oa1.copy(pacingBurst = 1_000_000, pacingIntervalMs = 0, readyTimeoutMs = WAIT_MS))
    }

    @AfterAll
    fun stop() {
        scope.cancel()
        ngircd.close()
    }

    /** One `rexd --irc` on one connection serving every channel of [channels] for `npcs`. */
    private fun rexd(channels: List<String>): ChildProcess = ChildProcess(
        listOf(
            cargoBinary("rexd").toString(), "--irc", "127.0.0.1:${ngircd.port}", "--allow-from", "npcs",
            "--log-level", "info", "--unauthenticated", "--pacing-interval-ms", "0", "--pacing-burst", "1000000",
            "--timeout-sec", "60",
        ) + channels.flatMap { listOf("--channel", it) },
    ).also { it.await(Regex("joined", RegexOption.IGNORE_CASE)) }

    private suspend fun connect(chat: Boolean = false, membership: Boolean = false) =
        MultiDeskConnection.connect(
            "127.0.0.1", ngircd.port, config = unpaced, chat = chat, membership = membership, scope = scope,
        )

    @Test
    fun `fifty desks on one connection each get only their own answer`() = runBlocking {
        val channels = (0 until 50).map { "#desk-$it" }
        rexd(channels).use { rexd ->
            connect().use { desks ->
                assertEquals(ConnectionState.READY, desks.state.value)
                channels.forEach { desks.addDesk(it, "rexd") }
                assertEquals(channels, desks.channels())
                withTimeout(WAIT_MS) { channels.forEach { desks.awaitReady(it) } }
                assertTrue(channels.all { desks.channelState(it) == ConnectionState.READY })
                // Every desk asks at once; each command's output names its channel.
                val answers = withTimeout(WAIT_MS) {
                    channels.map { c -> async { desks.remoteBash(c, "echo 'answer for $c'", timeout = 60.seconds) } }
                        .awaitAll()
                }
                assertEquals(channels.map { "answer for $it\n" }, answers)
                for (c in channels) {
                    assertEquals(0, desks.inFlight(c))
                    val stats = desks.channelStats(c)
                    assertTrue(stats.framesOut >= 1 && stats.framesIn >= 1, "$c: $stats")
                    assertEquals(listOf("rexd"), desks.members(c))
                }
                // A second round on a few desks, in reverse order, still goes to the right ones.
                val some = channels.reversed().filterIndexed { i, _ -> i % 7 == 0 }
                val again = withTimeout(WAIT_MS) { some.map { c -> async { desks.request(c, "echo '$c again'") } }.awaitAll() }
                assertEquals(some.map { "$it again\n" }, again)
            }
            assertTrue(rexd.process.isAlive)
        }
    }

    @Test
    fun `chat and membership from a plain IRC client arrive in the flow, and long text leaves cut at spaces`() = runBlocking {
        rexd(listOf("#talk")).use {
            RawIrc(ngircd.port, "alice").use { alice ->
                connect(chat = true, membership = true).use { desks ->
                    val seen = Channel<ChatEvent>(Channel.UNLIMITED)
                    val subscribed = CompletableDeferred<Unit>()
                    val collector = scope.launch {
                        desks.chat.onSubscription { subscribed.complete(Unit) }.collect { seen.send(it) }
                    }
                    // The collector is subscribed before anything happens in the channel.
                    subscribed.await()
                    desks.addDesk("#talk", "rexd")
                    desks.awaitReady("#talk")
                    suspend fun next(fits: (ChatEvent) -> Boolean): ChatEvent =
                        withTimeout(WAIT_MS) { while (true) { val e = seen.receive(); if (fits(e)) return@withTimeout e }; error("unreachable") }

                    // Our own join, and the channel's member list with rexd in it.
                    val joined = next { it is ChatEvent.Membership && it.event is MembershipEvent.Joined }
                    assertEquals(MembershipEvent.Joined("#talk", "npcs"), (joined as ChatEvent.Membership).event)
                    val names = next { it is ChatEvent.Membership && it.event is MembershipEvent.Names }
                    assertTrue("rexd" in ((names as ChatEvent.Membership).event as MembershipEvent.Names).nicks)

                    alice.join("#talk")
                    val aliceJoined = next { it is ChatEvent.Membership && it.event is MembershipEvent.Joined }
                    assertEquals(MembershipEvent.Joined("#talk", "alice"), (aliceJoined as ChatEvent.Membership).event)

                    alice.send(
                        "PRIVMSG #talk :hello desks",
                        "PRIVMSG #talk :OA1 REQ zzzzzz 1 0 ls",
                        "NOTICE #talk :a notice",
                        "PRIVMSG #talk :\u0001ACTION waves\u0001",
                    )
                    val messages = (1..3).map { (next { it is ChatEvent.Message } as ChatEvent.Message).message }
                    assertEquals(listOf("hello desks", "a notice", "waves"), messages.map { it.text })
                    assertEquals(listOf(ChatKind.PRIVMSG, ChatKind.NOTICE, ChatKind.ACTION), messages.map { it.kind })
                    assertTrue(messages.all { it.channel == "#talk" && it.sender.startsWith("alice!") }, "$messages")

                    alice.send("PART #talk :later")
                    val parted = next { it is ChatEvent.Membership && it.event is MembershipEvent.Parted }
                    assertEquals(MembershipEvent.Parted("#talk", "alice", "later"), (parted as ChatEvent.Membership).event)
                    alice.join("#talk")

                    // Long text: cut at spaces into lines that fit, none starting with "OA1 ".
                    val words = buildString {
                        var n = 0
                        while (length < 2500) append(if (n == 0) "" else " ").append("word").append(n++)
                        append(" OA1 inside is fine; the end.")
                    }
                    val lines = desks.sendText("#talk", words)
                    assertTrue(lines >= 5, "$lines lines")
                    val parts = (1..lines).map {
                        val line = alice.expect { it.startsWith(":npcs!") && it.contains(" PRIVMSG #talk :") }
                        assertTrue(line.toByteArray().size + 2 <= 512, line)
                        line.substringAfter(" PRIVMSG #talk :")
                    }
                    assertTrue(parts.none { it.startsWith("OA1 ") || it.startsWith(" ") || it.endsWith(" ") }, "$parts")
                    assertEquals(words, parts.joinToString(" "))
                    // A notice, and a request beside the chat: OA1 still answers.
                    assertEquals(1, desks.sendText("#talk", "short notice", notice = true))
                    alice.expect { it.startsWith(":npcs!") && it.endsWith(" NOTICE #talk :short notice") }
                    assertEquals("beside chat\n", desks.remoteBash("#talk", "echo 'beside chat'"))
                    assertEquals(0L, desks.chatDropped())
                    collector.cancel()
                }
            }
        }
    }

    @Test
    fun `unknown channels, duplicate desks, text starting with OA1 and a closed connection are refused, typed`() = runBlocking {
        rexd(listOf("#a")).use { rexd ->
            val desks = connect(chat = true)
            desks.use {
                desks.addDesk("#a", "rexd")
                desks.awaitReady("#a")
                suspend fun misuse(call: suspend () -> Unit) = assertFailsWith<DeskwireException.Misuse> { call() }.kind
                assertEquals(ErrorKind.UNKNOWN_CHANNEL, misuse { desks.request("#nope", "ls") })
                assertEquals(ErrorKind.UNKNOWN_CHANNEL, misuse { desks.remoteBash("#nope", "ls") })
                assertEquals(ErrorKind.UNKNOWN_CHANNEL, misuse { desks.sendText("#nope", "hi") })
                assertEquals(ErrorKind.UNKNOWN_CHANNEL, misuse { desks.channelState("#nope") })
                assertEquals(ErrorKind.UNKNOWN_CHANNEL, misuse { desks.members("#nope") })
                assertEquals(ErrorKind.UNKNOWN_CHANNEL, misuse { desks.inFlight("#nope") })
                assertEquals(ErrorKind.UNKNOWN_CHANNEL, misuse { desks.waitingFor("#nope") })
                assertEquals(ErrorKind.UNKNOWN_CHANNEL, misuse { desks.removeDesk("#nope") })
                assertEquals(ErrorKind.UNKNOWN_CHANNEL, misuse { desks.awaitReady("#nope") })
                val unknown = assertFailsWith<DeskwireException.Misuse> { desks.request("#nope", "ls") }
                assertTrue(unknown.message!!.contains("#nope"), unknown.message)

                suspend fun invalid(call: suspend () -> Unit) = assertFailsWith<DeskwireException.InvalidInput> { call() }.kind
                assertEquals(ErrorKind.RESERVED_PREFIX, invalid { desks.sendText("#a", "OA1 REQ abc 1 0 ls") })
                assertEquals(ErrorKind.RESERVED_PREFIX, invalid { desks.sendText("#a", "OA1 ", notice = true) })
                assertEquals(ErrorKind.EMPTY_TEXT, invalid { desks.sendText("#a", "") })
                assertEquals(ErrorKind.FORBIDDEN_BYTE, invalid { desks.sendText("#a", "a\r\nQUIT") })
                assertEquals(ErrorKind.DUPLICATE_CHANNEL, invalid { desks.addDesk("#a", "rexd") })
                assertEquals(ErrorKind.INVALID_CHANNEL, invalid { desks.addDesk("nohash", "rexd") })
                assertEquals(ErrorKind.ZERO_TIMEOUT, invalid { desks.remoteBash("#a", "ls", timeout = 0.seconds) })
                // "OA1" not followed by a space is chat.
                assertEquals(1, desks.sendText("#a", "OA1X is fine"))

                // A desk removed with a request in flight: the request fails, the channel is gone.
                // In the test's supervisor scope: its failure is the point, not the test's end.
                val sleeping = scope.async { desks.remoteBash("#a", "sleep 30", timeout = 60.seconds) }
                withTimeout(WAIT_MS) { while (desks.inFlight("#a") == 0L) delay(10) }
                rexd.await(Regex("sleep 30"))
                desks.removeDesk("#a")
                val failed = assertFailsWith<Oa1RequestException> { withTimeout(WAIT_MS) { sleeping.await() } }
                assertIs<Oa1Failure.Disconnected>(failed.failure)
                assertEquals(emptyList(), desks.channels())
                assertEquals(ErrorKind.UNKNOWN_CHANNEL, misuse { desks.request("#a", "ls") })
            }
            // Closed: every call that starts work is refused as CLOSED.
            assertEquals(ConnectionState.CLOSED, desks.state.value)
            assertEquals(ErrorKind.CLOSED, assertFailsWith<DeskwireException.Misuse> { desks.request("#a", "ls") }.kind)
            assertEquals(ErrorKind.CLOSED, assertFailsWith<DeskwireException.Misuse> { desks.sendText("#a", "hi") }.kind)
            assertEquals(ErrorKind.CLOSED, assertFailsWith<DeskwireException.Misuse> { desks.addDesk("#b", "rexd") }.kind)
        }
    }

    @Test
    fun `a caller's own timeout around awaitReady ends it as the caller's`() = runBlocking {
        connect().use { desks ->
            desks.addDesk("#nobody-here", "rexd") // no remote comes: awaitReady would wait 60 s
            assertEquals(null, withTimeoutOrNull(1_000) { desks.awaitReady("#nobody-here") })
            assertFailsWith<TimeoutCancellationException> { withTimeout(1_000) { desks.awaitReady("#nobody-here") } }
            // Its own timeout is still its own, typed.
            val e = assertFailsWith<Oa1ConnectException> { desks.awaitReady("#nobody-here", timeoutMs = 500) }
            assertIs<Oa1Failure.NotReady>(e.failure)
        }
        Unit
    }

    @Test
    fun `a bad config is refused before the socket opens`() = runBlocking {
        val nowhere = freePort()
        val e = assertFailsWith<DeskwireException.InvalidInput> {
            MultiDeskConnection.connect("127.0.0.1", nowhere, desks = mapOf("nohash" to "rexd"))
        }
        assertEquals(ErrorKind.INVALID_CHANNEL, e.kind)
        assertEquals(
            ErrorKind.INVALID_NICK,
            assertFailsWith<DeskwireException.InvalidInput> { MultiDeskConnection.connect("127.0.0.1", nowhere, nick = "a b") }.kind,
        )
        assertFailsWith<IrcConnectException> { MultiDeskConnection.connect("127.0.0.1", nowhere) }
        Unit
    }
}
