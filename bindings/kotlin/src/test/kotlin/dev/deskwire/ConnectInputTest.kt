package dev.deskwire

import kotlinx.coroutines.CoroutineScope
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.SupervisorJob
import kotlinx.coroutines.cancel
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withTimeout
import org.junit.jupiter.api.AfterAll
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.TestInstance
import kotlin.test.assertEquals
import kotlin.test.assertFailsWith
import kotlin.test.assertTrue

/**
 * What a caller gets for an address that cannot be dialled, with an IRC server listening on
 * loopback (ngircd, and rexd in the channel): a typed error that says what is wrong, never the
 * JDK's own exception nor a connection to somewhere else.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class ConnectInputTest {
    private val ngircd = Ngircd()
    private val rexd = ChildProcess(
        listOf(
            cargoBinary("rexd").toString(), "--irc", "127.0.0.1:${ngircd.port}",
            "--allow-from", "desk", "--log-level", "info", "--unauthenticated",
        ),
    ).also { it.await(Regex("joined", RegexOption.IGNORE_CASE)) }
    private val scope = CoroutineScope(SupervisorJob() + Dispatchers.Default)

    @AfterAll
    fun stop() {
        scope.cancel()
        rexd.close()
        ngircd.close()
    }

    @Test
    fun `a port out of range is refused by name, from every connect`() = runBlocking {
        for (port in listOf(70000, -1, 0, 65536)) {
            val desk = assertFailsWith<DeskwireException.InvalidInput> {
                withTimeout(10_000) { DeskConnection.connect("127.0.0.1", port, scope = scope) }
            }
            assertEquals(ErrorKind.INVALID, desk.kind)
            assertEquals("port is $port; an IRC server's port is 1 to 65535", desk.detail)
            val multi = assertFailsWith<DeskwireException.InvalidInput> {
                withTimeout(10_000) { MultiDeskConnection.connect("127.0.0.1", port, scope = scope) }
            }
            assertEquals(desk.detail, multi.detail)
        }
        // The same server on its real port: the desk works.
        DeskConnection.connect("127.0.0.1", ngircd.port, scope = scope).use { desk ->
            assertEquals("ok\n", withTimeout(20_000) { desk.remoteBash("echo ok") })
        }
    }

    @Test
    fun `an empty host is refused, not taken as this machine`() = runBlocking {
        // ngircd listens on 127.0.0.1, which the JDK takes "" for.
        for (host in listOf("", "  ")) {
            val e = assertFailsWith<DeskwireException.InvalidInput> {
                withTimeout(10_000) { DeskConnection.connect(host, ngircd.port, scope = scope) }
            }
            assertEquals(ErrorKind.INVALID, e.kind)
            assertEquals(
                "the IRC server's host is empty; give its name or address (\"127.0.0.1\" for this machine)",
                e.detail,
            )
        }
    }

    @Test
    fun `a clock that reads negative is refused before dialling`() = runBlocking {
        val e = assertFailsWith<DeskwireException.InvalidInput> {
            withTimeout(10_000) { DeskConnection.connect("127.0.0.1", ngircd.port, scope = scope, clock = { -5L }) }
        }
        assertEquals(ErrorKind.NEGATIVE, e.kind)
        assertEquals("nowMs is -5; the clock starts at 0", e.detail)
    }

    @Test
    fun `a name that does not resolve says so`() = runBlocking {
        val e = assertFailsWith<IrcConnectException> {
            withTimeout(30_000) { DeskConnection.connect("no.such.host.invalid", ngircd.port, scope = scope) }
        }
        assertEquals(
            "connect to no.such.host.invalid:${ngircd.port} failed: the name no.such.host.invalid does not resolve",
            e.message,
        )
        // The JDK's exception is the cause (under a copy of the exception that coroutines'
        // stack trace recovery may put on top).
        val causes = generateSequence(e.cause) { it.cause }.toList()
        assertTrue(causes.any { it is java.net.UnknownHostException }, "$causes")
    }
}
