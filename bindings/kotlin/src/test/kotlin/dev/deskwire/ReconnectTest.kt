package dev.deskwire

import dev.deskwire.core.*
import kotlinx.coroutines.CoroutineScope
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.SupervisorJob
import kotlinx.coroutines.async
import kotlinx.coroutines.cancel
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withTimeout
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.assertThrows
import kotlin.test.assertEquals
import kotlin.test.assertIs
import kotlin.test.assertTrue

/** A DeskConnection with a ReconnectPolicy comes back after the server restarts. */
class ReconnectTest {
    /** `rexd --irc` on [ngircd] serving the desk `desk`, coming back fast (0.2 s, at most 1 s), joined. */
    private fun rexdOn(ngircd: Ngircd, vararg extra: String): ChildProcess {
        val rexd = ChildProcess(
            listOf(
                cargoBinary("rexd").toString(), "--irc", "127.0.0.1:${ngircd.port}",
                "--allow-from", "desk", "--log-level", "info", "--unauthenticated",
                "--reconnect-first-ms", "200", "--reconnect-max-ms", "1000",
            ) + extra,
        )
        rexd.await(Regex("joined", RegexOption.IGNORE_CASE))
        return rexd
    }

    @Test
    fun `the policy's waits are the core's, and a bad one is refused`() {
        val policy = ReconnectPolicy(firstDelayMs = 1_000, maxDelayMs = 10_000, jitterPercent = 0)
        assertEquals(listOf(1_000L, 2_000L, 4_000L, 8_000L, 10_000L, 10_000L), (0..5).map { reconnectDelayMs(policy, it, 0) })
        val jittered = ReconnectPolicy()
        val waits = (0L..200L).map { reconnectDelayMs(jittered, 0, it * 7_919) }
        assertTrue(waits.all { it in 1_000L..1_500L } && waits.toSet().size > 50, "$waits")
        assertThrows<DeskwireException.InvalidInput> { reconnectDelayMs(ReconnectPolicy(firstDelayMs = 0), 0, 0) }
        assertThrows<DeskwireException.InvalidInput> { reconnectDelayMs(ReconnectPolicy(jitterPercent = 101), 0, 0) }
    }

    @Test
    fun `after a server restart the call in flight fails disconnected and the next one is answered`() = runBlocking {
        val scope = CoroutineScope(SupervisorJob() + Dispatchers.Default)
        Ngircd().use { ngircd ->
            rexdOn(ngircd).use { rexd ->
                val policy = ReconnectPolicy(firstDelayMs = 200, maxDelayMs = 1_000)
                val desk = withTimeout(30_000) {
                    DeskConnection.connect("127.0.0.1", ngircd.port, scope = scope, reconnect = policy)
                }
                try {
                    assertEquals("before\n", withTimeout(30_000) { desk.remoteBash("echo before") })
                    val inFlight = scope.async { runCatching { desk.remoteBash("sleep 30; echo never") } }
                    rexd.await(Regex("asks \\S+: sleep 30"))
                    ngircd.restart()
                    val lost = withTimeout(10_000) { inFlight.await() }.exceptionOrNull()
                    assertIs<Oa1RequestException>(lost, "$lost")
                    assertEquals("disconnected", oa1FailureCode(lost.failure))
                    // At once, while the connection comes back: the call waits for it.
                    assertEquals("after\n", withTimeout(30_000) { desk.remoteBash("echo after") })
                    assertTrue(desk.reconnects >= 1)
                    assertEquals(ConnectionState.READY, desk.state.value)
                } finally {
                    desk.close()
                }
                withTimeout(10_000) { while (desk.state.value != ConnectionState.CLOSED) kotlinx.coroutines.delay(20) }
                kotlinx.coroutines.delay(1_500)
                assertEquals(ConnectionState.CLOSED, desk.state.value, "closed for good: no reconnect after close()")
            }
        }
        scope.cancel()
    }

    @Test
    fun `a server that stops answering is noticed by the keepalive and left for a new connection`() = runBlocking {
        val scope = CoroutineScope(SupervisorJob() + Dispatchers.Default)
        Ngircd().use { ngircd ->
            rexdOn(ngircd, "--irc-ping-interval-ms", "1000", "--irc-ping-timeout-ms", "1500").use { rexd ->
                // A keepalive PING after 1 s of silence, given up 1.5 s later.
                val config = DeskConnection.defaultConfig().let {
                    it.copy(session = it.session.copy(pingIntervalMs = 1_000, pingTimeoutMs = 1_500))
                }
                val policy = ReconnectPolicy(firstDelayMs = 200, maxDelayMs = 1_000)
                val desk = withTimeout(30_000) {
                    DeskConnection.connect("127.0.0.1", ngircd.port, config, scope = scope, reconnect = policy)
                }
                try {
                    assertEquals("before\n", withTimeout(30_000) { desk.remoteBash("echo before") })
                    // The TCP connection stays open: only an unanswered PING can tell.
                    ngircd.pause()
                    val stopped = System.nanoTime()
                    withTimeout(20_000) { while (desk.state.value == ConnectionState.READY) kotlinx.coroutines.delay(20) }
                    val noticedMs = (System.nanoTime() - stopped) / 1_000_000
                    ngircd.resume()
                    val resumed = System.nanoTime()
                    assertEquals("after\n", withTimeout(30_000) { desk.remoteBash("echo after") })
                    val answeredMs = (System.nanoTime() - resumed) / 1_000_000
                    assertTrue(desk.reconnects >= 1, "a new connection: ${desk.reconnects}")
                    // Printed, not asserted: these machines are shared.
                    println("kotlin dead link: noticed ${noticedMs} ms after the stop, answered ${answeredMs} ms after the resume")
                } finally {
                    ngircd.resume()
                    desk.close()
                }
            }
        }
        scope.cancel()
    }

    @Test
    fun `a remote connection comes back too, and serves the desk that came back`() = runBlocking {
        val scope = CoroutineScope(SupervisorJob() + Dispatchers.Default)
        Ngircd().use { ngircd ->
            val policy = ReconnectPolicy(firstDelayMs = 200, maxDelayMs = 1_000)
            val remote = withTimeout(30_000) {
                RemoteConnection.serve(
                    "127.0.0.1", ngircd.port, connectionConfig("kbot", "#desk", "desk"), scope, reconnect = policy,
                ) { call -> "served ${call.payload}" }
            }
            val config = connectionConfig("desk", "#desk", "kbot")
            val desk = withTimeout(30_000) {
                DeskConnection.connect("127.0.0.1", ngircd.port, config, scope, reconnect = policy)
            }
            try {
                assertEquals("served one", withTimeout(30_000) { desk.request("one") })
                ngircd.restart()
                assertEquals("served two", withTimeout(30_000) { desk.request("two") })
                assertTrue(remote.reconnects >= 1 && desk.reconnects >= 1)
                assertEquals(ConnectionState.READY, remote.state.value)
            } finally {
                desk.close()
                remote.close()
            }
        }
        scope.cancel()
    }
}
