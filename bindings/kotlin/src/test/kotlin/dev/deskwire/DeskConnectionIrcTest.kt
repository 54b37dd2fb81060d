package dev.deskwire

import dev.deskwire.core.*
import kotlinx.coroutines.CoroutineScope
import kotlinx.coroutines.CoroutineStart
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.SupervisorJob
import kotlinx.coroutines.async
import kotlinx.coroutines.cancel
import kotlinx.coroutines.flow.first
import kotlinx.coroutines.TimeoutCancellationException
import kotlinx.coroutines.flow.toList
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withTimeout
import kotlinx.coroutines.withTimeoutOrNull
import org.junit.jupiter.api.AfterAll
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.TestInstance
import java.util.concurrent.atomic.AtomicLong
import kotlin.test.assertEquals
import kotlin.test.assertFailsWith
import kotlin.test.assertIs
import kotlin.test.assertNotEquals
import kotlin.test.assertTrue
import kotlin.time.Duration.Companion.seconds

/**
 * What a desk meets when things go wrong, over real sockets to ngircd with `rexd --irc` (or a
 * [RemoteConnection]) as the remote: connect waits for the remote and says why it cannot;
 * refusals and the remote's departure reach the caller typed; a closed desk refuses calls as
 * `Misuse` with kind `CLOSED`; the request timeout starts when the request can leave.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class DeskConnectionIrcTest {
    /** `#locked` is invite only: ngircd refuses every `JOIN` with `473`. */
    private val ngircd = Ngircd("[Channel]\nName = #locked\nModes = i\n")
    private val scope = CoroutineScope(SupervisorJob() + Dispatchers.Default)

    @AfterAll
    fun stop() {
        scope.cancel()
        ngircd.close()
    }

    /** `rexd --irc` with its defaults (`rexd` in `#desk`), serving the desk `desk`. */
    private fun rexd(): ChildProcess = ChildProcess(
        listOf(
            cargoBinary("rexd").toString(), "--irc", "127.0.0.1:${ngircd.port}",
            "--allow-from", "desk", "--log-level", "info", "--unauthenticated",
        ),
    ).also { it.await(Regex("joined", RegexOption.IGNORE_CASE)) }

    private suspend fun connect(config: ConnectionConfig = DeskConnection.defaultConfig(), clock: MonotonicClock = MonotonicClock.System) =
        DeskConnection.connect("127.0.0.1", ngircd.port, config, scope, clock = clock)

    @Test
    fun `a desk without a remote, or with a bad nick or channel, is refused before it connects`() = runBlocking {
        // Nothing listens on this port: a config checked after connecting would fail there.
        val nowhere = freePort()
        suspend fun refused(config: ConnectionConfig) = assertFailsWith<DeskwireException.InvalidInput> {
            DeskConnection.connect("127.0.0.1", nowhere, config, scope)
        }.kind
        assertEquals(ErrorKind.NO_REMOTE, refused(connectionConfig(nick = "desk", channel = "#desk")))
        assertEquals(ErrorKind.INVALID_CHANNEL, refused(connectionConfig(nick = "desk", channel = "desk", peer = "rexd")))
        assertEquals(ErrorKind.INVALID_NICK, refused(connectionConfig(nick = "a b", channel = "#desk", peer = "rexd")))
        // The right config gets as far as the socket, whose failure names the host and the port.
        val e = assertFailsWith<IrcConnectException> { DeskConnection.connect("127.0.0.1", nowhere, scope = scope) }
        assertTrue(e.message!!.startsWith("connect to 127.0.0.1:$nowhere failed: Connection refused"), e.message)
        // The JDK's exception is in the chain (coroutines may put a copy of ours before it).
        assertTrue(generateSequence<Throwable>(e) { it.cause }.any { it is java.net.ConnectException })
        Unit
    }

    @Test
    fun `connect says what it waited for and who was there when the remote never comes`() = runBlocking {
        val chatter = RemoteConnection.serve(
            "127.0.0.1", ngircd.port, connectionConfig(nick = "chatter", channel = "#lonely"), scope,
        ) { "never asked" }
        try {
            val config = connectionConfig(nick = "desk", channel = "#lonely", peer = "rexd")
                .let { it.copy(oa1 = it.oa1.copy(readyTimeoutMs = 5_000)) }
            val e = assertFailsWith<Oa1ConnectException> { withTimeout(20_000) { connect(config) } }
            val waited = "not ready after 5 s: waiting for remote `rexd` in #lonely; members: chatter"
            assertEquals(Oa1Failure.NotReady(waited), e.failure)
            assertEquals(listOf("chatter"), e.members)
            assertEquals("could not connect: not_ready: $waited", e.message)
        } finally {
            chatter.close()
        }
    }

    @Test
    fun `a caller's own timeout around connect ends it as the caller's, not as connect's`() = runBlocking {
        // No remote ever comes to #waiting: connect would wait its readyTimeoutMs (30 s).
        val config = connectionConfig(nick = "desk", channel = "#waiting", peer = "rexd")
        assertEquals(null, withTimeoutOrNull(1_000) { connect(config) })
        assertFailsWith<TimeoutCancellationException> { withTimeout(1_000) { connect(config) } }
        Unit
    }

    @Test
    fun `collecting events ends when the connection is closed`() = runBlocking {
        val echo = RemoteConnection.serve(
            "127.0.0.1", ngircd.port, connectionConfig(nick = "rexd", channel = "#ends"), scope,
        ) { call -> call.payload }
        val remoteSeen = scope.async { echo.events.toList() }
        val desk = withTimeout(20_000) { connect(connectionConfig(nick = "desk", channel = "#ends", peer = "rexd")) }
        val deskSeen = scope.async { desk.events.toList() }
        assertEquals("hi", withTimeout(20_000) { desk.request("hi") })
        desk.close()
        echo.close()
        // Both collections return after close, with what came before it.
        assertTrue(withTimeout(10_000) { deskSeen.await() }.any { it is ConnectionEvent.Oa1 })
        assertTrue(withTimeout(10_000) { remoteSeen.await() }.any { it is ConnectionEvent.Oa1 })
        // A collector that comes after the end returns at once.
        assertEquals(emptyList(), withTimeout(5_000) { desk.events.toList() })
        assertEquals(emptyList(), withTimeout(5_000) { echo.events.toList() })
    }

    @Test
    fun `a join the server refuses fails connect with the server's words`() = runBlocking {
        val config = connectionConfig(nick = "desk", channel = "#locked", peer = "rexd")
        val e = assertFailsWith<Oa1ConnectException> { withTimeout(20_000) { connect(config) } }
        val failure = assertIs<Oa1Failure.JoinFailed>(e.failure)
        assertTrue(failure.message.startsWith("the server refused to let us into #locked: 473 "), failure.message)
        assertEquals("join_failed", oa1FailureCode(failure))
    }

    @Test
    fun `request ids come from SecureRandom unless a test fixes the seed`() = runBlocking {
        // A fixed seed fixes the ids: two desks with one seed pick the same ones.
        val fixed = connectionConfig(nick = "desk", channel = "#ids", peer = "rexd")
        assertEquals(Desk(fixed, 0L, 42L).request(0L, "x", null), Desk(fixed, 0L, 42L).request(0L, "x", null))
        // Two desks connected with the default seeds ask one remote, which answers with the id
        // it was asked under: different ids, and each desk gets its own.
        val echo = RemoteConnection.serve(
            "127.0.0.1", ngircd.port, connectionConfig(nick = "rexd", channel = "#ids"), scope,
        ) { call -> "${call.sender} ${call.id}" }
        try {
            withTimeout(20_000) { connect(connectionConfig(nick = "desk1", channel = "#ids", peer = "rexd")) }.use { one ->
                withTimeout(20_000) { connect(connectionConfig(nick = "desk2", channel = "#ids", peer = "rexd")) }.use { two ->
                    val (sender1, id1) = withTimeout(20_000) { one.request("id?") }.split(' ')
                    val (sender2, id2) = withTimeout(20_000) { two.request("id?") }.split(' ')
                    assertEquals("desk1" to "desk2", sender1 to sender2)
                    assertNotEquals(id1, id2)
                }
            }
        } finally {
            echo.close()
        }
    }

    @Test
    fun `after close calls are CLOSED misuse and requests in flight fail disconnected`() = runBlocking {
        rexd().use { rexd ->
            val desk = withTimeout(20_000) { connect() }
            val inFlight = scope.async { runCatching { desk.remoteBash("sleep 30") } }
            rexd.await(Regex(" asks \\S+: sleep 30"))
            desk.close()
            val failed = assertIs<Oa1RequestException>(withTimeout(20_000) { inFlight.await() }.exceptionOrNull())
            assertEquals(Oa1Failure.Disconnected("we quit"), failed.failure)
            val misuse = assertFailsWith<DeskwireException.Misuse> { desk.remoteBash("uname -a") }
            assertEquals(ErrorKind.CLOSED, misuse.kind)
            assertEquals("the IRC connection has ended", misuse.detail)
            assertEquals(ErrorKind.CLOSED, assertFailsWith<DeskwireException.Misuse> { desk.request("x") }.kind)
            withTimeout(20_000) { desk.state.first { it == ConnectionState.CLOSED } }
            assertTrue(desk.stats().oa1.framesOut > 0, "the engine still answers questions")
            desk.close() // twice: nothing more
        }
    }

    @Test
    fun `a remote that leaves mid-request fails it peer_left`() = runBlocking {
        val desk = rexd().use { rexd ->
            val desk = withTimeout(20_000) { connect() }
            val call = scope.async { runCatching { desk.remoteBash("sleep 30") } }
            rexd.await(Regex(" asks \\S+: sleep 30"))
            desk to call
        } // rexd stops here
        val (connection, call) = desk
        connection.use {
            val failed = assertIs<Oa1RequestException>(withTimeout(20_000) { call.await() }.exceptionOrNull())
            val left = assertIs<Oa1Failure.PeerLeft>(failed.failure)
            assertTrue(left.message.startsWith("remote `rexd` left #desk ("), left.message)
            assertTrue(left.message.endsWith(") and was not back within 2 s"), left.message)
            assertTrue(failed.toolResultJson.contains("\"error\":\"peer_left\""), failed.toolResultJson)
        }
    }

    @Test
    fun `the request timeout starts when the request can leave`() = runBlocking {
        // A monotonic clock that can jump ahead: the desk's engine sees the time pass while its
        // request waits for the remote.
        val skipped = AtomicLong()
        val clock = MonotonicClock { MonotonicClock.System.nowMs() + skipped.get() }
        val desk = rexd().use { withTimeout(20_000) { connect(clock = clock) } }
        desk.use {
            withTimeout(20_000) { desk.state.first { it == ConnectionState.WAITING_FOR_PEER } }
            val waiting = desk.waitingFor()
            assertTrue(waiting != null && waiting.startsWith("remote `rexd` in #desk; members:"), waiting)
            // Undispatched: the request is in the engine before the clock jumps.
            val call = scope.async(start = CoroutineStart.UNDISPATCHED) { desk.remoteBash("echo held back", timeout = 1.seconds) }
            skipped.addAndGet(10_000) // past the request's 1 s, within the 30 s readyTimeoutMs
            rexd().use {
                // The request leaves when rexd is back, and has its whole second from then on.
                assertEquals("held back\n", withTimeout(20_000) { call.await() })
            }
        }
    }

    @Test
    fun `a second desk with the same nick and regaining turned off goes on as desk_`() = runBlocking {
        rexd().use {
            withTimeout(20_000) { connect() }.use { first ->
                val keepFallback = DeskConnection.defaultConfig().let { it.copy(session = it.session.copy(nickRegainMs = 0)) }
                withTimeout(20_000) { connect(keepFallback) }.use { second ->
                    assertEquals("desk", first.nick)
                    assertEquals("desk_", second.nick)
                    assertEquals(ConnectionState.READY, second.state.value)
                    assertEquals(0L, second.stats().irc.regainAttempts)
                }
            }
        }
    }
}
