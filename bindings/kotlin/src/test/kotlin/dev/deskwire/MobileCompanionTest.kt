package dev.deskwire

import kotlinx.coroutines.CoroutineScope
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.SupervisorJob
import kotlinx.coroutines.cancel
import kotlinx.coroutines.flow.first
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withTimeout
import org.junit.jupiter.api.AfterEach
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.assertThrows
import java.nio.file.Files
import java.nio.file.Path
import kotlin.test.assertEquals
import kotlin.test.assertIs
import kotlin.test.assertNull
import kotlin.test.assertTrue

/**
 * The phone's driver end to end over a real WebSocket on loopback, against the real desktop
 * program (examples/mobile_desktop, an Axum server driving the Rust server engine).
 */
class MobileCompanionTest {
    private val scope = CoroutineScope(SupervisorJob() + Dispatchers.Default)
    private val children = mutableListOf<ChildProcess>()
    private val dir: Path = Files.createTempDirectory("deskwire-mobile")
    private val tokensFile: Path = dir.resolve("tokens")

    @AfterEach
    fun tearDown() {
        scope.cancel()
        children.forEach { it.close() }
        dir.toFile().deleteRecursively()
    }

    private fun desktop(port: Int = 0): ChildProcess =
        ChildProcess(listOf(cargoBinary("mobile_desktop").toString(), "--port", "$port", "--tokens", "$tokensFile"))
            .also { children.add(it) }

    private fun ChildProcess.port(): Int = await(Regex("listening on ws://127\\.0\\.0\\.1:(\\d+)/ws")).groupValues[1].toInt()
    private fun ChildProcess.code(): String = await(Regex("pairing code: (\\d{6})")).groupValues[1]

    @Test
    fun `pairs, syncs, runs a task through a permission, and reconnects with its token after a restart`() = runBlocking {
        var server = desktop()
        val port = server.port()
        val code = server.code()
        val store = MemoryTokenStore()
        val phone = MobileCompanion("ws://127.0.0.1:$port/ws", store, scope)
        val events = EventQueue(scope, phone.events)
        assertTrue(!phone.isPaired)

        // Pairing with the code the desktop printed gives a token, kept in the store.
        phone.pair(code)
        val token = events.expect<MobileClientEvent.Paired>().token
        assertEquals(64, token.length)
        assertEquals(token, store.load())
        events.expect<MobileClientEvent.Connected>()
        // The state sync follows at once.
        val sync = events.expect<MobileClientEvent.StateChanged>()
        assertEquals(AgentState.Idle, sync.state)
        assertTrue(sync.initial)
        server.await(Regex("paired connection \\d+"))

        // A task: Running, a message, a task update, then the agent asks for permission.
        phone.startTask("look around")
        val running = events.expect<MobileClientEvent.StateChanged>().state
        assertIs<AgentState.Running>(running)
        assertEquals(0uL, running.iteration)
        assertTrue(events.expect<MobileClientEvent.Message>().message.content.contains("look around"))
        assertEquals(running.taskId, events.expect<MobileClientEvent.TaskUpdate>().update.taskId)
        val request = events.expect<MobileClientEvent.PermissionRequested>().request
        assertEquals("shell", request.toolName)
        assertEquals("ls -la", request.command)
        assertEquals(listOf(request), phone.permissionRequests.value)

        // The app approves; the agent runs its step and finishes.
        phone.respondPermission(request.id, approved = true)
        server.await(Regex("permission ${Regex.escape(request.id)}: approved=true"))
        val step = events.expect<MobileClientEvent.StateChanged>().state
        assertEquals(AgentState.Running(running.taskId, 1uL), step)
        val done = phone.awaitState { it is AgentState.Stopped }
        assertEquals(AgentState.Stopped(running.taskId, StopReason.COMPLETED), done)
        assertTrue(phone.permissionRequests.value.isEmpty())

        // The desktop goes away; the phone retries on the spec's schedule and, once the desktop
        // is back (with its tokens file), gets in with the bearer token, without pairing.
        server.close()
        val delays = mutableListOf<ULong>()
        delays += events.expect<MobileClientEvent.Disconnected>().retryInMs!!
        delays += events.expect<MobileClientEvent.Disconnected>().retryInMs!!
        server = desktop(port)
        server.port()
        while (true) {
            when (val e = events.next()) {
                is MobileClientEvent.Disconnected -> delays += e.retryInMs!!
                is MobileClientEvent.Connected -> break
                is MobileClientEvent.Paired -> error("paired again instead of using the token")
                else -> {}
            }
        }
        val schedule = mobileClientConfigDefault()
        assertEquals(delays.indices.map { mobileBackoffMs(schedule, (it + 1).toUInt()) }, delays)
        assertEquals(listOf(1000uL, 2000uL), delays.take(2))
        server.await(Regex("connected \\d+ via Token"))
        val resync = events.expect<MobileClientEvent.StateChanged>()
        assertTrue(resync.initial)
        assertEquals(AgentState.Idle, resync.state, "the restarted desktop's agent is idle")
        assertEquals(token, store.load())
        phone.close()
    }

    @Test
    fun `a wrong code and a revoked token fail as the spec says`() = runBlocking {
        val server = desktop()
        val port = server.port()
        val code = server.code()
        val url = "ws://127.0.0.1:$port/ws"

        // A wrong code: auth_result with success false, the socket closed, no retry.
        val store = MemoryTokenStore()
        val phone = MobileCompanion(url, store, scope)
        val events = EventQueue(scope, phone.events)
        val wrong = ((code.toInt() + 1) % 1_000_000).toString().padStart(6, '0')
        phone.pair(wrong)
        val failed = events.expect<MobileClientEvent.AuthFailed>()
        assertEquals("invalid pairing code", failed.error)
        assertNull(store.load())
        withTimeout(10_000) { phone.connectionState.first { it == MobileConnectionState.Idle } }
        server.await(Regex("pairing failed on connection \\d+: WrongCode"))

        // The same phone pairs with the right code afterwards (the code survives one mistake).
        phone.pair(code)
        val token = events.expect<MobileClientEvent.Paired>().token
        events.expect<MobileClientEvent.StateChanged>()
        phone.close()

        // The desktop revokes the token: the upgrade is refused with 401, the phone forgets it.
        server.send("revoke $token")
        server.await(Regex("revoked: true"))
        val again = MobileCompanion(url, store, scope)
        val againEvents = EventQueue(scope, again.events)
        assertTrue(again.isPaired)
        again.connect()
        val dropped = againEvents.expect<MobileClientEvent.Disconnected>()
        assertEquals(MobileDisconnectReason.Unauthorized, dropped.reason)
        assertNull(dropped.retryInMs, "a refused token is not retried")
        againEvents.expect<MobileClientEvent.TokenRejected>()
        assertNull(store.load())
        server.await(Regex("refused connection \\d+: 401"))
        val misuse = assertThrows<DeskwireException.Misuse> { again.connect() }
        assertEquals(ErrorKind.NO_CREDENTIALS, misuse.kind)
        again.close()
    }

    @Test
    fun `misuse throws typed exceptions and leaves the driver working`() = runBlocking {
        val phone = MobileCompanion("ws://127.0.0.1:9/ws", MemoryTokenStore(), scope)
        assertEquals(ErrorKind.INVALID_CODE, assertThrows<DeskwireException.Misuse> { phone.pair("12ab56") }.kind)
        assertEquals(ErrorKind.NO_CREDENTIALS, assertThrows<DeskwireException.Misuse> { phone.connect() }.kind)
        assertEquals(ErrorKind.NOT_CONNECTED, assertThrows<DeskwireException.Misuse> { phone.startTask("x") }.kind)
        assertEquals(ErrorKind.NOT_CONNECTED, assertThrows<DeskwireException.Misuse> { phone.respondPermission("nope", true) }.kind)
        // Nothing listens on port 9: the attempt fails and a retry is scheduled.
        val events = EventQueue(scope, phone.events)
        phone.pair("123456")
        val dropped = events.expect<MobileClientEvent.Disconnected>()
        assertIs<MobileDisconnectReason.Failed>(dropped.reason)
        assertEquals(1000uL, dropped.retryInMs)
        phone.close()
    }
}
