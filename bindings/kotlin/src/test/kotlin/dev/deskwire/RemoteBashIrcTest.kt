package dev.deskwire

import dev.deskwire.core.*
import kotlinx.coroutines.CoroutineScope
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.SupervisorJob
import kotlinx.coroutines.async
import kotlinx.coroutines.cancel
import kotlinx.coroutines.cancelAndJoin
import kotlinx.coroutines.launch
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withTimeout
import org.junit.jupiter.api.AfterAll
import org.junit.jupiter.api.BeforeAll
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.TestInstance
import kotlin.test.assertEquals
import kotlin.test.assertIs
import kotlin.test.assertTrue
import kotlin.time.Duration.Companion.seconds

/**
 * `RemoteBash` from the JVM: DeskConnection over a real socket to ngircd, `rexd --irc` answering;
 * both with their defaults (`desk` asks `rexd` in `#desk`).
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class RemoteBashIrcTest {
    private lateinit var ngircd: Ngircd
    private lateinit var rexd: ChildProcess
    private val scope = CoroutineScope(SupervisorJob() + Dispatchers.Default)
    private lateinit var desk: DeskConnection

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
        desk = runBlocking { withTimeout(30_000) { DeskConnection.connect("127.0.0.1", ngircd.port, scope = scope) } }
        assertEquals(ConnectionState.READY, desk.state.value, "connect returns once rexd is there")
        assertEquals(listOf("rexd"), desk.members())
    }

    @AfterAll
    fun stop() {
        desk.close()
        scope.cancel()
        rexd.close()
        ngircd.close()
    }

    @Test
    fun `a command runs on the remote and its output comes back`() = runBlocking {
        val out = withTimeout(30_000) { desk.remoteBash("printf 'hello from %s\\n' jvm; printf 'x%.0s' \$(seq 1 600)") }
        assertEquals("hello from jvm\n" + "x".repeat(600), out)
        assertEquals(ConnectionState.READY, desk.state.value)
        // stderr comes back too, and several calls share the connection.
        assertEquals("oops\n", withTimeout(30_000) { desk.remoteBash("echo oops >&2") })
    }

    @Test
    fun `a cancelled coroutine sends CANCEL and the remote stops`() = runBlocking {
        val before = desk.stats().oa1.cancels
        val call = scope.launch { desk.remoteBash("sleep 30; echo never") }
        val asked = rexd.await(Regex(" asks (\\S+): sleep 30"))
        val id = asked.groupValues[1]
        call.cancelAndJoin()
        rexd.await(Regex("${Regex.escape(id)} cancelled"))
        assertEquals(before + 1L, desk.stats().oa1.cancels)
        // The connection goes on serving.
        assertEquals("still here\n", withTimeout(30_000) { desk.remoteBash("echo still here") })
    }

    @Test
    fun `a timeout fails the call with timeout and cancels it on the remote`() = runBlocking {
        val call = scope.async { runCatching { desk.remoteBash("sleep 20; echo late", timeout = 5.seconds) } }
        val id = rexd.await(Regex(" asks (\\S+): sleep 20")).groupValues[1]
        val failure = assertIs<Oa1RequestException>(withTimeout(15_000) { call.await() }.exceptionOrNull())
        assertEquals(id, failure.id)
        val timedOut = assertIs<Oa1Failure.Timeout>(failure.failure)
        // rexd took the request and is still running it: nothing came back, and the message says
        // what that can mean.
        assertTrue(timedOut.message.startsWith("no complete response before the request timeout, and no OA1 frame came back"), timedOut.message)
        assertTrue(failure.toolResultJson.contains("\"error\":\"timeout\""))
        rexd.await(Regex("${Regex.escape(id)} cancelled"))
        Unit
    }
}
