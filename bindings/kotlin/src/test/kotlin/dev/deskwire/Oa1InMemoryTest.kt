package dev.deskwire

import dev.deskwire.core.*
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.assertThrows
import kotlin.test.assertEquals
import kotlin.test.assertIs
import kotlin.test.assertTrue

/**
 * A desk and a remote talking OA1 through an in-memory channel on a virtual clock: what one
 * endpoint transmits reaches the other the way an IRC server relays it (with the sender's
 * prefix in front).
 */
class Oa1InMemoryTest {
    private var now = 0L
    private val desk = Oa1Client(oa1Config(nick = "desk", channel = "#desk").copy(allowedSender = "deskbot"), 7L)
    private val remote = Oa1Server(oa1Config(nick = "deskbot", channel = "#desk").copy(allowedSender = "desk"))
    private val deskEvents = mutableListOf<Oa1Event>()
    private val remoteEvents = mutableListOf<Oa1Event>()

    /** Drains both endpoints, relaying lines, until neither has anything but a deadline. */
    private fun relay(): Long {
        var deadline: Long
        do {
            var moved = false
            deadline = Long.MAX_VALUE
            for ((from, to, events, prefix) in listOf(
                Hop(desk::pollOutput, remote::handleLine, deskEvents, ":desk!~desk@10.0.0.1 "),
                Hop(remote::pollOutput, desk::handleLine, remoteEvents, ":deskbot!~bot@10.0.0.2 "),
            )) {
                while (true) {
                    when (val out = from(now)) {
                        is Oa1Output.Transmit -> { to(now, (prefix + out.line).toByteArray()); moved = true }
                        is Oa1Output.Event -> events.add(out.event)
                        is Oa1Output.Timeout -> { deadline = minOf(deadline, out.deadlineMs); break }
                    }
                }
            }
        } while (moved)
        return deadline
    }

    private data class Hop(
        val from: (Long) -> Oa1Output,
        val to: (Long, ByteArray) -> Unit,
        val events: MutableList<Oa1Event>,
        val prefix: String,
    )

    /** Relays, jumping the clock to each deadline, until [done] holds (at most [limitMs] later). */
    private fun runUntil(limitMs: Long = 120_000L, done: () -> Boolean) {
        val end = now + limitMs
        while (!done()) {
            val deadline = relay()
            if (done()) return
            check(deadline <= end) { "nothing happens before $end; desk saw $deskEvents, remote saw $remoteEvents" }
            now = maxOf(now, deadline)
        }
    }

    @Test
    fun `a request and a long streamed answer cross in chunks`() {
        // Lines leave paced (3 at once, then one a second), so ~40 frames take ~40 s of the
        // virtual clock: more than the default 30 s request timeout.
        val id = desk.request(now, "cat big.txt", 120_000L)
        runUntil { remoteEvents.isNotEmpty() }
        assertEquals(Oa1Event.Request(id, "desk", "cat big.txt"), remoteEvents.single())
        // Output with every byte class the escaping handles, far over one frame.
        val text = (0 until 300).joinToString("") { "line $it\ttab\\slash é\r\n" }
        remote.send(now, id, text.substring(0, 5000))
        remote.send(now, id, text.substring(5000))
        remote.finish(now, id)
        runUntil { deskEvents.isNotEmpty() }
        assertEquals(Oa1Event.Response(id, text, false), deskEvents.single())
        assertTrue(remote.stats().framesOut > 20L, "the answer went in many frames")
        assertEquals(0L, desk.stats().bytesBuffered)
        assertTrue(now > 30_000L, "pacing spread the frames over the virtual clock")
    }

    @Test
    fun `errors, cancellation and timeouts reach the other side`() {
        val failing = desk.request(now, "false", null)
        runUntil { remoteEvents.size == 1 }
        remote.fail(now, failing, "exit_status", "exit 1")
        runUntil { deskEvents.size == 1 }
        val failed = assertIs<Oa1Event.Failed>(deskEvents.single())
        assertEquals(Oa1Failure.Remote("exit_status", "exit 1"), failed.failure)
        assertEquals("""{"error":"exit_status","message":"exit 1","ok":false}""", remoteBashFailureJson(failed.failure))

        val slow = desk.request(now, "sleep 100", null)
        runUntil { remoteEvents.size == 2 }
        desk.cancel(now, slow, "the user pressed stop")
        runUntil { remoteEvents.size == 3 }
        assertEquals(Oa1Event.Cancelled(slow, "the user pressed stop"), remoteEvents.last())

        // A request nobody answers times out on the desk's clock; the engine sends CANCEL.
        val lost = desk.remoteBash(now, """{"command":"sleep 100","timeout_sec":2}""")
        val sentAt = now
        runUntil { deskEvents.size == 2 }
        val timedOut = assertIs<Oa1Event.Failed>(deskEvents.last())
        assertEquals(lost, timedOut.id)
        assertIs<Oa1Failure.Timeout>(timedOut.failure)
        assertEquals(sentAt + 2_000L, now, "the virtual clock jumped straight to the deadline")
        runUntil { remoteEvents.size == 5 }
        assertEquals(lost, assertIs<Oa1Event.Cancelled>(remoteEvents.last()).id)
        assertEquals(2L, desk.stats().cancels)
    }

    @Test
    fun `misuse is a typed exception`() {
        val e = assertThrows<DeskwireException.Misuse> { remote.finish(now, "nope") }
        assertEquals(ErrorKind.UNKNOWN_REQUEST, e.kind)
        assertEquals(ErrorKind.INVALID_ERROR_CODE, assertThrows<DeskwireException.Misuse> {
            val id = desk.request(now, "x", null)
            runUntil { remoteEvents.isNotEmpty() }
            remote.fail(now, id, "Not A Code", "m")
        }.kind)
        assertEquals(ErrorKind.TOO_LARGE, assertThrows<DeskwireException.Misuse> {
            desk.request(now, "x".repeat(200_000), null)
        }.kind)
        assertEquals(ErrorKind.INVALID, assertThrows<DeskwireException.InvalidInput> {
            desk.remoteBash(now, """{"cmd":"ls"}""")
        }.kind)
    }
}
