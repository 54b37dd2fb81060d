package dev.deskwire

import dev.deskwire.core.*
import kotlinx.coroutines.CompletableDeferred
import kotlinx.coroutines.CoroutineScope
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.SupervisorJob
import kotlinx.coroutines.async
import kotlinx.coroutines.awaitCancellation
import kotlinx.coroutines.cancel
import kotlinx.coroutines.cancelAndJoin
import kotlinx.coroutines.channels.Channel
import kotlinx.coroutines.delay
import kotlinx.coroutines.launch
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withTimeout
import org.junit.jupiter.api.AfterAll
import org.junit.jupiter.api.BeforeAll
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.TestInstance
import java.util.concurrent.ConcurrentHashMap
import kotlin.test.assertEquals
import kotlin.test.assertIs
import kotlin.test.assertTrue

/**
 * The remote's coroutine driver over a real socket to ngircd, asked by a [DeskConnection]:
 * answers, streamed output, `ERR`s, and the desk's `CANCEL` (by a cancelled coroutine and by a
 * timeout) cancelling the handler's coroutine.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class RemoteConnectionIrcTest {
    private lateinit var ngircd: Ngircd
    private val scope = CoroutineScope(SupervisorJob() + Dispatchers.Default)
    private lateinit var remote: RemoteConnection
    private lateinit var desk: DeskConnection

    /** Handlers waiting for cancellation, by request id, and how each one ended. */
    private val waiting = Channel<Oa1Call>(Channel.UNLIMITED)
    private val ended = ConcurrentHashMap<String, CompletableDeferred<Throwable>>()

    private val handler = Oa1Handler { call ->
        val words = call.payload.split(' ', limit = 2)
        when (words[0]) {
            "echo" -> "${call.sender} said ${words[1]}"
            "stream" -> {
                repeat(words[1].toInt()) { i ->
                    call.send("line $i\n")
                    delay(5)
                }
                "x".repeat(600) // past one frame: chunked by the engine
            }
            "refuse" -> throw Oa1FailureException("not_allowed", "no thanks")
            "bad-code" -> throw Oa1FailureException("Not A Code", "odd")
            "boom" -> throw IllegalStateException("kaput")
            "wait" -> {
                val end = ended.getOrPut(call.id) { CompletableDeferred() }
                try {
                    waiting.send(call)
                    awaitCancellation()
                } catch (e: Throwable) {
                    end.complete(e)
                    throw e
                }
            }
            else -> throw Oa1FailureException("unknown_command", call.payload)
        }
    }

    private fun config(nick: String, peer: String, channel: String) =
        connectionConfig(nick = nick, channel = channel, peer = peer)

    @BeforeAll
    fun start() {
        ngircd = Ngircd()
        runBlocking {
            withTimeout(30_000) {
                remote = RemoteConnection.serve("127.0.0.1", ngircd.port, config("kbot", "desk", "#work"), scope, handler = handler)
                assertEquals(ConnectionState.READY, remote.state.value, "serve returns once the remote is in the channel")
                desk = DeskConnection.connect("127.0.0.1", ngircd.port, config("desk", "kbot", "#work"), scope)
            }
        }
    }

    @AfterAll
    fun stop() {
        desk.close()
        remote.close()
        scope.cancel()
        ngircd.close()
    }

    @Test
    fun `the handler's answer and its streamed output reach the desk`() = runBlocking {
        assertEquals("desk said hello", withTimeout(30_000) { desk.request("echo hello") })
        val streamed = withTimeout(30_000) { desk.request("stream 5") }
        assertEquals((0 until 5).joinToString("") { "line $it\n" } + "x".repeat(600), streamed)
        assertEquals(ConnectionState.READY, remote.state.value)
    }

    @Test
    fun `a handler's exception answers ERR with its code`() = runBlocking {
        fun failure(e: Throwable?) = assertIs<Oa1RequestException>(e).failure
        val refused = runCatching { withTimeout(30_000) { desk.request("refuse") } }.exceptionOrNull()
        assertEquals(Oa1Failure.Remote("not_allowed", "no thanks"), failure(refused))
        val crashed = runCatching { withTimeout(30_000) { desk.request("boom") } }.exceptionOrNull()
        assertEquals(Oa1Failure.Remote("error", "kaput"), failure(crashed))
        val odd = runCatching { withTimeout(30_000) { desk.request("bad-code") } }.exceptionOrNull()
        assertEquals(Oa1Failure.Remote("error", "Not A Code: odd"), failure(odd))
    }

    @Test
    fun `the desk's CANCEL cancels the handler's coroutine`() = runBlocking {
        val before = remote.stats().oa1.cancels
        val call = scope.launch { desk.request("wait") }
        val served = withTimeout(20_000) { waiting.receive() }
        assertTrue(remote.active >= 1, "the handler is being served")
        call.cancelAndJoin() // the desk sends CANCEL
        val why = assertIs<Oa1CancelledException>(withTimeout(20_000) { ended.getValue(served.id).await() })
        assertEquals(served.id, why.id)
        assertEquals("cancelled by the caller", why.reason)
        assertEquals(before + 1L, remote.stats().oa1.cancels)
        withTimeout(20_000) { while (remote.active != 0) delay(10) }
        // The connection goes on serving.
        assertEquals("desk said again", withTimeout(30_000) { desk.request("echo again") })
    }

    @Test
    fun `a desk timeout cancels the handler too`() = runBlocking {
        val call = scope.async { runCatching { desk.request("wait", timeoutMs = 5_000) } }
        val served = withTimeout(20_000) { waiting.receive() }
        val failure = assertIs<Oa1RequestException>(withTimeout(20_000) { call.await() }.exceptionOrNull())
        assertIs<Oa1Failure.Timeout>(failure.failure)
        val why = assertIs<Oa1CancelledException>(withTimeout(20_000) { ended.getValue(served.id).await() })
        assertEquals(served.id, why.id)
    }

    @Test
    fun `closing the remote cancels its handlers and sends QUIT`() = runBlocking {
        val other = RemoteConnection.serve("127.0.0.1", ngircd.port, config("kbot2", "desk2", "#close"), scope, handler = handler)
        val asker = withTimeout(30_000) { DeskConnection.connect("127.0.0.1", ngircd.port, config("desk2", "kbot2", "#close"), scope) }
        try {
            val events = EventQueue(scope, asker.events)
            val call = scope.async { runCatching { asker.request("wait") } }
            val served = withTimeout(20_000) { waiting.receive() }
            other.close()
            assertIs<kotlinx.coroutines.CancellationException>(withTimeout(20_000) { ended.getValue(served.id).await() })
            // The QUIT went out: the desk sees its peer leave.
            events.expect<ConnectionEvent.Link> { it.event == LinkEvent.PeerLeft("kbot2") }
            call.cancel()
            events.stop()
        } finally {
            asker.close()
            other.close()
        }
    }
}
