package dev.deskwire

import dev.deskwire.core.*
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withTimeout
import org.junit.jupiter.api.AfterAll
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.TestInstance
import java.net.ServerSocket
import java.nio.file.Files
import java.nio.file.attribute.PosixFilePermissions
import kotlin.test.assertEquals
import kotlin.test.assertFailsWith
import kotlin.test.assertNull
import kotlin.test.assertTrue
import kotlin.time.Duration.Companion.seconds

/**
 * What a new Kotlin user tripped on (issue 39, part 6), done as the README shows it, over
 * ngircd to a real `rexd --irc`: `runBlocking { connect(...) }` returns and the desk works
 * after it; the shared secret in one line; a closed desk says so; a refused port and a
 * desktop that never answers are named failures.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class FirstUseTest {
    private val ngircd = Ngircd()

    @AfterAll
    fun stop() = ngircd.close()

    private fun rexd(vararg extra: String): ChildProcess = ChildProcess(
        listOf(
            cargoBinary("rexd").toString(), "--irc", "127.0.0.1:${ngircd.port}",
            "--allow-from", "desk", "--log-level", "info", *extra,
        ),
    ).also { it.await(Regex("joined", RegexOption.IGNORE_CASE)) }

    @Test
    fun `runBlocking connect returns and the desk works after it`() {
        rexd("--unauthenticated").use {
            // The README's shape, with the caller's scope given too: the connection's coroutines
            // are its own, so runBlocking returns once the desk is ready.
            val desk = runBlocking { withTimeout(20_000) { DeskConnection.connect("127.0.0.1", ngircd.port, scope = this) } }
            desk.use {
                assertEquals(ConnectionState.READY, desk.state.value)
                assertEquals("hello\n", runBlocking { desk.remoteBash("echo hello", timeout = 20.seconds) })
                assertTrue("rexd" in desk.members())
            }
            // Without a scope at all, the same.
            val second = runBlocking { withTimeout(20_000) { DeskConnection.connect("127.0.0.1", ngircd.port) } }
            second.use { assertEquals("again\n", runBlocking { it.remoteBash("echo again", timeout = 20.seconds) }) }
        }
    }

    @Test
    fun `the shared secret is one line and rexd with --secret-file answers it`() {
        val dir = Files.createTempDirectory("deskwire-secret")
        val file = dir.resolve("secret")
        Files.createFile(file, PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rw-------")))
        Files.writeString(file, "correct horse battery staple\n")
        try {
            rexd("--secret-file", file.toString()).use {
                val secret = Files.readString(file).trimEnd('\r', '\n')
                val config = DeskConnection.defaultConfig().let { it.copy(oa1 = it.oa1.copy(auth = Oa1AuthConfig.withSecret(secret))) }
                runBlocking {
                    DeskConnection.connect("127.0.0.1", ngircd.port, config).use { desk ->
                        assertEquals("sealed\n", desk.remoteBash("echo sealed", timeout = 20.seconds))
                    }
                    // The extension on the config says the same.
                    DeskConnection.connect("127.0.0.1", ngircd.port, DeskConnection.defaultConfig().withSecret(secret)).use { desk ->
                        assertEquals("again\n", desk.remoteBash("echo again", timeout = 20.seconds))
                    }
                }
                // The epoch is the wall clock's time at the monotonic clock's 0.
                val auth = Oa1AuthConfig.withSecret(secret)
                val expected = System.currentTimeMillis() - MonotonicClock.System.nowMs()
                assertTrue(kotlin.math.abs(auth.epochUnixMs - expected) < 1_000, "epoch ${auth.epochUnixMs} vs $expected")
                assertEquals(60_000L, auth.maxSkewMs)
            }
        } finally {
            dir.toFile().deleteRecursively()
        }
    }

    @Test
    fun `after close state reads CLOSED at once and calls throw CLOSED misuse`() {
        rexd("--unauthenticated").use {
            val desk = runBlocking { withTimeout(20_000) { DeskConnection.connect("127.0.0.1", ngircd.port) } }
            desk.close()
            assertEquals(ConnectionState.CLOSED, desk.state.value)
            assertEquals(ErrorKind.CLOSED, assertFailsWith<DeskwireException.Misuse> { desk.members() }.kind)
            assertEquals(ErrorKind.CLOSED, assertFailsWith<DeskwireException.Misuse> { desk.waitingFor() }.kind)
            val misuse = assertFailsWith<DeskwireException.Misuse> { runBlocking { desk.remoteBash("uname -a") } }
            assertEquals(ErrorKind.CLOSED, misuse.kind)
            assertTrue(desk.stats().oa1.framesOut >= 0, "the counters still answer")
        }
    }

    @Test
    fun `a refused port is an IrcConnectException naming the host and the port`() {
        val nowhere = freePort()
        val e = assertFailsWith<IrcConnectException> { runBlocking { DeskConnection.connect("127.0.0.1", nowhere) } }
        assertTrue(e.message!!.startsWith("connect to 127.0.0.1:$nowhere failed: "), e.message)
        assertTrue(generateSequence<Throwable>(e) { it.cause }.any { it is java.net.ConnectException })
    }

    @Test
    fun `pairing with a desktop that never answers fails in time naming where`() {
        // Accepts the TCP connection and never answers the WebSocket handshake.
        ServerSocket(0, 50, java.net.InetAddress.getLoopbackAddress()).use { silent ->
            val url = "ws://127.0.0.1:${silent.localPort}/ws"
            val scope = kotlinx.coroutines.CoroutineScope(kotlinx.coroutines.Dispatchers.Default)
            MobileCompanion(url, MemoryTokenStore(), scope).use { phone ->
                val started = System.nanoTime()
                val e = assertFailsWith<MobileCompanionException.NotOnline> { runBlocking { phone.pair("123456", timeout = 2.seconds) } }
                val took = (System.nanoTime() - started) / 1_000_000
                assertTrue(took in 1_900..6_000, "gave up after $took ms")
                assertEquals(url, e.url)
                assertEquals("pair", e.operation)
                assertNull(e.lastFailure)
                assertEquals("pair with the desktop at $url timed out after 2s: not online; no attempt ended yet (the desktop does not answer)", e.message)
            }
            assertEquals(15.seconds, MobileCompanion.DEFAULT_PAIR_TIMEOUT)
        }
    }
}
