package dev.deskwire

import dev.deskwire.core.*
import org.junit.jupiter.api.Test
import java.time.Duration
import kotlin.test.assertEquals
import kotlin.test.assertFailsWith
import kotlin.test.assertFalse
import kotlin.test.assertTrue

/**
 * The typed `RemoteBash` call (`remoteBashCommand`, what [DeskConnection.remoteBash] uses) is the
 * core's `Requester::remote_bash`: its refusals come as the core's kinds, and the core tells the
 * timeouts apart.
 */
class RemoteBashTypedTest {
    @Test
    fun `the typed call sends the command and refuses a zero timeout`() {
        Desk(connectionConfig(nick = "desk", channel = "#desk", peer = "deskbot"), 0L, 1L).use { desk ->
            val id = desk.remoteBashCommand(0L, "uname -a", Duration.ofMillis(1500))
            assertTrue(id.isNotEmpty())
            assertEquals(1L, desk.inFlight())
            val zero = assertFailsWith<DeskwireException.InvalidInput> {
                desk.remoteBashCommand(0L, "ls", Duration.ZERO)
            }
            assertEquals(ErrorKind.ZERO_TIMEOUT, zero.kind)
        }
    }

    @Test
    fun `a command that runs nothing is refused and never sent`() {
        Desk(connectionConfig(nick = "desk", channel = "#desk", peer = "deskbot"), 0L, 1L).use { desk ->
            for (command in listOf("", "  \t\n")) {
                val empty = assertFailsWith<DeskwireException.InvalidInput> { desk.remoteBashCommand(0L, command, null) }
                assertEquals(ErrorKind.EMPTY_COMMAND, empty.kind)
            }
            val nul = assertFailsWith<DeskwireException.InvalidInput> { desk.remoteBashCommand(0L, "ls\u0000 -la", null) }
            assertEquals(ErrorKind.NUL_IN_COMMAND, nul.kind)
            assertTrue("byte 2" in nul.message!!, nul.message)
            // The model's JSON arguments are refused the same way.
            val json = assertFailsWith<DeskwireException.InvalidInput> { desk.remoteBash(0L, """{"command": " "}""") }
            assertEquals(ErrorKind.EMPTY_COMMAND, json.kind)
            assertEquals(0L, desk.inFlight())
        }
    }

    @Test
    fun `timeouts are the core's timeouts`() {
        assertTrue(Oa1RequestException("a1", Oa1Failure.Timeout("m")).isTimeout)
        assertTrue(Oa1RequestException("a1", Oa1Failure.NotReady("m")).isTimeout)
        assertFalse(Oa1RequestException("a1", Oa1Failure.Remote("timeout", "the remote's own")).isTimeout)
        assertFalse(Oa1RequestException("a1", Oa1Failure.Incomplete).isTimeout)
    }
}
