package dev.deskwire

import dev.deskwire.core.*
import kotlinx.coroutines.CoroutineScope
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.SupervisorJob
import kotlinx.coroutines.cancel
import kotlinx.coroutines.delay
import kotlinx.coroutines.flow.first
import kotlinx.coroutines.flow.toList
import kotlinx.coroutines.launch
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withTimeout
import okhttp3.OkHttpClient
import okhttp3.Request
import okhttp3.Response
import okhttp3.WebSocket
import okhttp3.WebSocketListener
import org.junit.jupiter.api.AfterEach
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.assertThrows
import java.nio.file.Files
import java.nio.file.Path
import java.util.concurrent.LinkedBlockingQueue
import java.util.concurrent.TimeUnit
import kotlin.test.assertEquals
import kotlin.test.assertIs
import kotlin.test.assertNull
import kotlin.test.assertTrue
import kotlin.time.Duration.Companion.seconds

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

    private fun desktop(port: Int = 0, config: String? = null): ChildProcess =
        ChildProcess(
            listOf(cargoBinary("mobile_desktop").toString(), "--port", "$port", "--tokens", "$tokensFile") +
                (config?.let { listOf("--config", it) } ?: emptyList()),
        ).also { children.add(it) }

    private fun ChildProcess.port(): Int = await(Regex("listening on ws://127\\.0\\.0\\.1:(\\d+)/ws")).groupValues[1].toInt()
    private fun ChildProcess.code(): String = await(Regex("pairing code: (\\d{6})")).groupValues[1]

    /** A wrong code for [code]. */
    private fun wrong(code: String) = ((code.toInt() + 1) % 1_000_000).toString().padStart(6, '0')

    /** Pairs a phone with [url] and returns its token (the phone closed). */
    private suspend fun pairedToken(url: String, code: String): String {
        val store = MemoryTokenStore()
        MobileCompanion(url, store, scope).use { it.pair(code) }
        return store.load()!!
    }

    @Test
    fun `pairs, syncs, runs a task through a permission, and reconnects with its token after a restart`() = runBlocking {
        var server = desktop()
        val port = server.port()
        val code = server.code()
        val store = MemoryTokenStore()
        val phone = MobileCompanion("ws://127.0.0.1:$port/ws", store, scope)
        val events = EventQueue(scope, phone.events)
        assertTrue(!phone.isPaired)

        // pair() returns once the session is up and synced: commands work at once.
        phone.pair(code)
        val token = events.expect<MobileClientEvent.Paired>().token
        assertEquals(64, token.length)
        assertEquals(token, store.load())
        events.expect<MobileClientEvent.Connected>()
        val sync = events.expect<MobileClientEvent.StateChanged>()
        assertEquals(AgentState.Idle, sync.state)
        assertTrue(sync.initial)
        assertEquals(MobileConnectionState.Online(true), phone.currentConnectionState)
        server.await(Regex("paired connection \\d+"))

        // A task: Running, a message, a task update, then the agent asks for permission.
        val taskId = phone.startTask("look around")
        val running = events.expect<MobileClientEvent.StateChanged>().state
        assertIs<AgentState.Running>(running)
        assertEquals(taskId, running.taskId)
        assertEquals(0uL, running.data.iteration)
        assertTrue(events.expect<MobileClientEvent.Message>().message.content.contains("look around"))
        assertEquals(taskId, events.expect<MobileClientEvent.TaskUpdate>().update.taskId)
        val request = events.expect<MobileClientEvent.PermissionRequested>().request
        assertEquals("shell", request.toolName)
        assertEquals("ls -la", request.command)
        assertEquals(listOf(request), phone.currentPermissionRequests)

        // The app approves; the agent runs its step and finishes.
        phone.respondPermission(request.id, approved = true)
        server.await(Regex("permission ${Regex.escape(request.id)}: approved=true"))
        val step = events.expect<MobileClientEvent.StateChanged>().state
        assertEquals(AgentState.Running(RunningData(taskId, 1uL)), step)
        val done = phone.awaitState { it is AgentState.Stopped && it.taskId == taskId }
        assertEquals(AgentState.Stopped(StoppedData(taskId, StopReason.COMPLETED)), done)
        assertTrue(phone.currentPermissionRequests.isEmpty())

        // A second task gets its own id: waiting for its Stopped does not match the first's.
        val second = phone.startTask("look again")
        assertTrue(second != taskId, "$second is a new task")
        val asked = phone.permissionRequests.first { it.isNotEmpty() }.single()
        phone.respondPermission(asked.id, approved = false)
        val secondDone = phone.awaitState { it is AgentState.Stopped && it.taskId == second }
        assertEquals(AgentState.Stopped(StoppedData(second, StopReason.MANUAL_STOP)), secondDone)

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
    fun `a wrong code throws with the attempts left, and a revoked token's session is closed`() = runBlocking {
        val server = desktop()
        val port = server.port()
        val code = server.code()
        val url = "ws://127.0.0.1:$port/ws"

        // A wrong code: pair() throws what the desktop knows; the socket is closed, no retry.
        val store = MemoryTokenStore()
        val phone = MobileCompanion(url, store, scope)
        val events = EventQueue(scope, phone.events)
        val refused = assertThrows<MobileCompanionException.PairingRefused> { runBlocking { phone.pair(wrong(code)) } }
        assertEquals(4, refused.attemptsLeft)
        assertEquals(1000L, refused.retryAfterMs)
        assertTrue(refused.reason!!.startsWith("invalid pairing code"), refused.reason)
        val failed = events.expect<MobileClientEvent.AuthFailed>()
        assertEquals<UInt?>(4u, failed.attemptsLeft)
        assertNull(store.load())
        withTimeout(10_000) { phone.connectionState.first { it == MobileConnectionState.Idle } }
        server.await(Regex("pairing failed on connection \\d+: WrongCode"))

        // The same phone pairs with the right code once the desktop looks at attempts again.
        delay(refused.retryAfterMs!!)
        phone.pair(code)
        val token = store.load()!!
        server.await(Regex("connected \\d+ via Pairing"))

        // The desktop revokes the token: the open session is closed at once, the reconnect is
        // refused with 401, and the phone forgets the token.
        server.send("revoke $token")
        server.await(Regex("revoked: true"))
        server.await(Regex("closing connection \\d+: Revoked"))
        val dropped = events.expect<MobileClientEvent.Disconnected>()
        assertEquals(MobileDisconnectReason.Closed, dropped.reason)
        val refusedAgain = events.expect<MobileClientEvent.Disconnected>()
        assertEquals(MobileDisconnectReason.Unauthorized, refusedAgain.reason)
        assertNull(refusedAgain.retryInMs, "a refused token is not retried")
        events.expect<MobileClientEvent.TokenRejected>()
        assertNull(store.load())
        server.await(Regex("refused connection \\d+: 401"))
        assertEquals(ErrorKind.NO_CREDENTIALS, assertThrows<DeskwireException.Misuse> { runBlocking { phone.connect() } }.kind)
        phone.close()

        // A phone that still holds the revoked token: connect() throws.
        val stale = MobileCompanion(url, MemoryTokenStore(token), scope)
        assertTrue(stale.isPaired)
        assertThrows<MobileCompanionException.TokenRejected> { runBlocking { stale.connect() } }
        assertTrue(!stale.isPaired)
        stale.close()
    }

    @Test
    fun `wrong guesses burn the code and no new code comes until the user asks`() = runBlocking {
        // A short backoff keeps the test quick; the rule is the same at the default 1 s.
        val server = desktop(config = """{"pairing_backoff_ms": 20, "max_pairing_backoff_ms": 20}""")
        val port = server.port()
        val code = server.code()
        val url = "ws://127.0.0.1:$port/ws"
        val guesser = MobileCompanion(url, MemoryTokenStore(), scope)
        val left = mutableListOf<Int?>()
        repeat(5) {
            val e = assertThrows<MobileCompanionException.PairingRefused> { runBlocking { guesser.pair(wrong(code)) } }
            left += e.attemptsLeft
            delay(e.retryAfterMs ?: 0)
        }
        assertEquals(listOf<Int?>(4, 3, 2, 1, 0), left)
        server.await(Regex("pairing closed; type `pair` for a new code"))
        // The code is burnt: the right one is refused too, and no fresh code with a fresh
        // attempt count has appeared.
        val burnt = assertThrows<MobileCompanionException.PairingRefused> { runBlocking { guesser.pair(code) } }
        assertEquals(0, burnt.attemptsLeft)
        assertEquals(1, server.seen.count { it.startsWith("pairing code: ") }, "${server.seen}")
        guesser.close()

        // The user asks for a new code: it pairs, and pairing closes again.
        server.send("pair")
        val fresh = server.code()
        val store = MemoryTokenStore()
        val phone = MobileCompanion(url, store, scope)
        phone.pair(fresh)
        server.await(Regex("paired connection \\d+"))
        assertEquals("pairing closed; type `pair` for a new code", server.await(Regex("^pairing (closed|code).*")).value)
        val late = MobileCompanion(url, MemoryTokenStore(), scope)
        val closed = assertThrows<MobileCompanionException.PairingRefused> { runBlocking { late.pair(fresh) } }
        assertEquals("no pairing code is active on the desktop", closed.reason)
        late.close()
        phone.close()
    }

    @Test
    fun `idle sockets do not keep out a phone with a token`() = runBlocking {
        val server = desktop()
        val port = server.port()
        val url = "ws://127.0.0.1:$port/ws"
        val token = pairedToken(url, server.code())

        // Eight sockets that open and never pair (the desktop holds them up to its auth timeout).
        // OkHttp holds at most 5 calls per host by default, and an open WebSocket is one.
        val raw = OkHttpClient().apply { dispatcher.maxRequestsPerHost = 16 }
        val outcomes = LinkedBlockingQueue<String>()
        val idle = (1..8).map {
            raw.newWebSocket(
                Request.Builder().url(url).build(),
                object : WebSocketListener() {
                    override fun onOpen(webSocket: WebSocket, response: Response) { outcomes.add("open") }
                    override fun onFailure(webSocket: WebSocket, t: Throwable, response: Response?) {
                        outcomes.add("failed ${response?.code}")
                    }
                },
            )
        }
        val seen = (1..8).map { outcomes.poll(20, TimeUnit.SECONDS) ?: error("no outcome for an idle socket") }
        assertEquals(4, seen.count { it == "open" }, "$seen")
        assertEquals(4, seen.count { it == "failed 503" }, "$seen")

        // The phone with its token gets in past them.
        val phone = MobileCompanion(url, MemoryTokenStore(token), scope)
        phone.connect(timeout = 5.seconds)
        server.await(Regex("connected \\d+ via Token"))
        phone.close()
        idle.forEach { it.cancel() }
        raw.dispatcher.executorService.shutdown()
        raw.connectionPool.evictAll()
    }

    @Test
    fun `close shuts down the OkHttp client it made and completes every flow`() = runBlocking {
        val server = desktop()
        val port = server.port()
        val phone = MobileCompanion("ws://127.0.0.1:$port/ws", MemoryTokenStore(), scope)
        val collected = listOf(phone.events, phone.agentState, phone.connectionState, phone.permissionRequests)
            .map { flow -> scope.launch { flow.toList() } }
        phone.pair(server.code())
        phone.close()
        withTimeout(20_000) { collected.forEach { it.join() } }
        // Flows subscribed after the close complete at once.
        assertEquals(emptyList<MobileClientEvent>(), withTimeout(5_000) { phone.events.toList() })
        assertEquals(emptyList<MobileConnectionState>(), withTimeout(5_000) { phone.connectionState.toList() })
        val executor = phone.ownedHttp!!.dispatcher.executorService
        assertTrue(executor.awaitTermination(20, TimeUnit.SECONDS), "the dispatcher's threads ended")
        assertThrows<MobileCompanionException.Stopped> { runBlocking { phone.awaitState { false } } }
        assertThrows<MobileCompanionException.Stopped> { runBlocking { phone.pair("123456") } }
        Unit
    }

    @Test
    fun `a URL that is not a WebSocket address is refused when the companion is made`() = runBlocking {
        val server = desktop()
        val port = server.port()
        for (url in listOf("not a url", "", "ftp://127.0.0.1:$port/ws", "127.0.0.1:$port", "ws://", "ws://exa mple/ws")) {
            val e = assertThrows<DeskwireException.InvalidInput> { MobileCompanion(url, MemoryTokenStore(), scope) }
            assertEquals(ErrorKind.INVALID, e.kind, url)
            assertEquals("url is \"$url\"; give the desktop's WebSocket address, e.g. ws://192.168.1.20:9120/ws", e.detail)
        }
        // The desktop's real address, in each form OkHttp takes: pairs.
        val code = server.code()
        MobileCompanion("WS://127.0.0.1:$port/ws", MemoryTokenStore(), scope).use { it.pair(code) }
        assertEquals(MobileConnectionState.Idle, MobileCompanion("http://127.0.0.1:$port/ws", MemoryTokenStore(), scope).use {
            it.currentConnectionState
        })
    }

    @Test
    fun `the state reads Idle as soon as close returns`() = runBlocking {
        val server = desktop()
        val port = server.port()
        val code = server.code()
        val phone = MobileCompanion("ws://127.0.0.1:$port/ws", MemoryTokenStore(), scope)
        phone.pair(code)
        assertIs<MobileConnectionState.Online>(phone.currentConnectionState)
        phone.close()
        assertEquals(MobileConnectionState.Idle, phone.currentConnectionState)
        // And it stays so once the pump has ended.
        assertEquals(emptyList<MobileConnectionState>(), withTimeout(5_000) { phone.connectionState.toList() })
        assertEquals(MobileConnectionState.Idle, phone.currentConnectionState)
    }

    @Test
    fun `misuse throws typed exceptions and leaves the driver working`() = runBlocking {
        val phone = MobileCompanion("ws://127.0.0.1:9/ws", MemoryTokenStore(), scope)
        assertEquals(ErrorKind.INVALID_CODE, assertThrows<DeskwireException.Misuse> { runBlocking { phone.pair("12ab56") } }.kind)
        assertEquals(ErrorKind.NO_CREDENTIALS, assertThrows<DeskwireException.Misuse> { runBlocking { phone.connect() } }.kind)
        assertEquals(ErrorKind.NOT_CONNECTED, assertThrows<DeskwireException.Misuse> { runBlocking { phone.startTask("x") } }.kind)
        assertEquals(ErrorKind.NOT_CONNECTED, assertThrows<DeskwireException.Misuse> { phone.respondPermission("nope", true) }.kind)
        // Nothing listens on port 9: the attempt fails, retries are scheduled, and pair() gives
        // up after its timeout saying why.
        val events = EventQueue(scope, phone.events)
        val notOnline = assertThrows<MobileCompanionException.NotOnline> { runBlocking { phone.pair("123456", 2.seconds) } }
        assertIs<MobileDisconnectReason.Failed>(notOnline.lastFailure)
        val dropped = events.expect<MobileClientEvent.Disconnected>()
        assertIs<MobileDisconnectReason.Failed>(dropped.reason)
        assertEquals(1000uL, dropped.retryInMs)
        // Given up: the companion is offline, not retrying.
        withTimeout(10_000) { phone.connectionState.first { it == MobileConnectionState.Idle } }
        phone.close()
    }
}
