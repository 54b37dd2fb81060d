package dev.deskwire

import dev.deskwire.core.*
import kotlinx.coroutines.CompletableDeferred
import kotlinx.coroutines.CoroutineScope
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.SupervisorJob
import kotlinx.coroutines.cancel
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withTimeout
import org.junit.jupiter.api.Test
import java.io.ByteArrayOutputStream
import java.net.InetAddress
import java.net.ServerSocket
import java.net.Socket
import kotlin.concurrent.thread
import kotlin.test.assertEquals

/** The socket loop hands the engine every byte read, whatever its deadlines do meanwhile. */
class IrcSocketLoopTest {
    /** An engine that keeps what it is fed and always has a deadline 1 ms away. */
    private class Recorder(private val clock: MonotonicClock) : ConnectionEngine {
        val fed = ByteArrayOutputStream()
        var timeouts = 0
        @Volatile private var state = ConnectionState.READY

        private fun idle() = ConnectionDrain(ByteArray(0), emptyList(), clock.nowMs() + 1)
        override fun feed(nowMs: Long, bytes: ByteArray): ConnectionDrain = idle().also { fed.write(bytes) }
        override fun handleEof(nowMs: Long) { state = ConnectionState.CLOSED }
        override fun handleTimeout(nowMs: Long) { timeouts++ }
        override fun drain(nowMs: Long) = idle()
        override fun quit(nowMs: Long, reason: String) { state = ConnectionState.CLOSED }
        override fun state() = state
        override fun release() {}
    }

    @Test
    fun `bytes that arrive as a deadline passes are fed, not lost`() = runBlocking {
        // Lines written in small pieces, a little apart, so many reads land on a deadline. A
        // receive inside withTimeoutOrNull dropped such a read (a desk then never saw its JOIN).
        val sent = ByteArrayOutputStream()
        ServerSocket(0, 1, InetAddress.getLoopbackAddress()).use { server ->
            val writer = thread {
                server.accept().use { peer ->
                    peer.tcpNoDelay = true
                    val out = peer.getOutputStream()
                    for (i in 0 until 4_000) {
                        val line = ":srv NOTICE desk :line $i\r\n".toByteArray()
                        out.write(line)
                        out.flush()
                        sent.write(line)
                        if (i % 4 == 0) Thread.sleep(0, 300_000)
                    }
                }
            }
            val scope = CoroutineScope(SupervisorJob() + Dispatchers.Default)
            val clock = MonotonicClock.System
            val engine = Recorder(clock)
            val closed = CompletableDeferred<Unit>()
            val socket = Socket(InetAddress.getLoopbackAddress(), server.localPort).apply { tcpNoDelay = true }
            IrcSocketLoop(socket, engine, scope, clock, deliver = {}, onClose = { closed.complete(Unit) })
            withTimeout(60_000) { closed.await() }
            writer.join()
            scope.cancel()
            assertEquals(sent.size(), engine.fed.size(), "bytes fed (with ${engine.timeouts} timeouts meanwhile)")
            assertEquals(String(sent.toByteArray()), String(engine.fed.toByteArray()))
        }
    }
}
