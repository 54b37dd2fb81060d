package dev.deskwire

import dev.deskwire.core.*
import kotlinx.coroutines.CoroutineScope
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.SupervisorJob
import kotlinx.coroutines.async
import kotlinx.coroutines.cancel
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withTimeout
import org.junit.jupiter.api.AfterAll
import org.junit.jupiter.api.BeforeAll
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.TestInstance
import kotlin.test.assertEquals
import kotlin.test.assertIs
import kotlin.test.assertTrue

/**
 * What a new user hit: `close()` and an immediate `connect()` sometimes came back as `desk_`
 * (the server had not yet seen the old connection go), and rexd, serving only `desk`, ignored
 * every request. Now the connection asks for `desk` back and `connect` returns once it has it.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class NickRegainTest {
    private lateinit var ngircd: Ngircd
    private lateinit var rexd: ChildProcess
    private val scope = CoroutineScope(SupervisorJob() + Dispatchers.Default)

    @BeforeAll
    fun start() {
        ngircd = Ngircd()
        rexd = ChildProcess(
            listOf(
                cargoBinary("rexd").toString(), "--irc", "127.0.0.1:${ngircd.port}",
                "--allow-from", "desk", "--log-level", "info", "--unauthenticated",
            ),
        )
        rexd.await(Regex("joined", RegexOption.IGNORE_CASE))
    }

    @AfterAll
    fun stop() {
        scope.cancel()
        rexd.close()
        ngircd.close()
    }

    @Test
    fun `close then connect at once, five times over, and every request is answered`() = runBlocking {
        var fallbacks = 0
        for (run in 1..5) {
            val desk = withTimeout(30_000) { DeskConnection.connect("127.0.0.1", ngircd.port, scope = scope) }
            try {
                if (desk.stats().irc.regainAttempts > 0L) fallbacks++
                assertEquals("run $run\n", withTimeout(30_000) { desk.remoteBash("echo run $run") })
            } finally {
                desk.close()
            }
        }
        println("NickRegainTest: $fallbacks of 5 reconnects came back under a fallback nick and took desk back")
    }

    @Test
    fun `a nick held by another connection keeps the desk waiting, and says for what`() = runBlocking {
        // Another client holds `desk` for the whole test.
        holdNick("desk").use {
            val config = DeskConnection.defaultConfig().let { it.copy(oa1 = it.oa1.copy(readyTimeoutMs = 4_000)) }
            val failure = runCatching {
                withTimeout(30_000) { DeskConnection.connect("127.0.0.1", ngircd.port, config = config, scope = scope) }
            }.exceptionOrNull()
            assertIs<Oa1ConnectException>(failure, "connect failed with: $failure")
            val message = failure.message ?: ""
            assertTrue("waiting for our nick `desk` back" in message, message)
            assertTrue("so we are `desk_`" in message, message)
        }
    }

    @Test
    fun `once the other connection goes, connect returns holding desk and is answered`() = runBlocking {
        val holder = holdNick("desk")
        val desk = scope.async { DeskConnection.connect("127.0.0.1", ngircd.port, scope = scope) }
        kotlinx.coroutines.delay(1_000)
        kotlin.test.assertFalse(desk.isCompleted, "connect waits while desk is taken")
        holder.close()
        val connected = withTimeout(30_000) { desk.await() }
        try {
            assertTrue(connected.stats().irc.regainAttempts >= 1L)
            assertEquals("back\n", withTimeout(30_000) { connected.remoteBash("echo back") })
        } finally {
            connected.close()
        }
    }

    /**
     * A plain client registered as [nick] (it answers nothing: enough for a few seconds). The
     * previous test's desk may still hold the nick until the server has seen it go: a `433`
     * is tried again, for at most 10 s.
     */
    private fun holdNick(nick: String): java.net.Socket {
        val holder = java.net.Socket("127.0.0.1", ngircd.port)
        val out = holder.getOutputStream()
        out.write("NICK $nick\r\nUSER other 0 * other\r\n".toByteArray())
        val lines = holder.getInputStream().bufferedReader()
        val end = System.nanoTime() + 10_000_000_000L
        while (true) {
            val line = lines.readLine() ?: error("the server closed the holder's connection")
            if (line.contains(" 001 ")) return holder
            if (line.contains(" 433 ") && System.nanoTime() < end) {
                Thread.sleep(200)
                out.write("NICK $nick\r\n".toByteArray())
            }
        }
    }
}
