package dev.deskwire

import kotlinx.coroutines.CoroutineDispatcher
import kotlinx.coroutines.CoroutineScope
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.Job
import kotlinx.coroutines.channels.Channel
import kotlinx.coroutines.channels.trySendBlocking
import kotlinx.coroutines.flow.Flow
import kotlinx.coroutines.flow.MutableSharedFlow
import kotlinx.coroutines.flow.MutableStateFlow
import kotlinx.coroutines.flow.StateFlow
import kotlinx.coroutines.flow.asSharedFlow
import kotlinx.coroutines.flow.asStateFlow
import kotlinx.coroutines.flow.first
import kotlinx.coroutines.flow.update
import kotlinx.coroutines.launch
import kotlinx.coroutines.withTimeoutOrNull
import okhttp3.OkHttpClient
import okhttp3.Request
import okhttp3.Response
import okhttp3.WebSocket
import okhttp3.WebSocketListener
import okio.ByteString
import java.nio.file.Files
import java.nio.file.Path
import java.nio.file.StandardCopyOption

/**
 * Where the phone keeps the bearer token between runs. [save] with `null` forgets it (the user
 * unpaired, or the desktop refused it).
 *
 * On Android keep it in app-private storage (EncryptedSharedPreferences, DataStore, or a file in
 * `Context.filesDir`); [FileTokenStore] is the plain-file version.
 */
interface TokenStore {
    /** The stored token, or `null` when the phone is not paired. */
    fun load(): String?

    /** Stores [token]; `null` forgets it. */
    fun save(token: String?)
}

/** A [TokenStore] in memory (tests, or an app that pairs every time). */
class MemoryTokenStore(initial: String? = null) : TokenStore {
    @Volatile private var token: String? = initial
    override fun load(): String? = token
    override fun save(token: String?) { this.token = token }
}

/**
 * A [TokenStore] in one file, replaced atomically on every save (java.nio.file: Android API 26+;
 * keep it in app-private storage, `Context.filesDir`).
 */
class FileTokenStore(private val path: Path) : TokenStore {
    override fun load(): String? =
        if (Files.exists(path)) String(Files.readAllBytes(path), Charsets.UTF_8).trim().ifEmpty { null } else null

    override fun save(token: String?) {
        if (token == null) {
            Files.deleteIfExists(path)
            return
        }
        val tmp = path.resolveSibling(path.fileName.toString() + ".tmp")
        Files.write(tmp, token.toByteArray(Charsets.UTF_8))
        Files.move(tmp, path, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE)
    }
}

/**
 * The phone's end of the mobile companion over a real WebSocket (OkHttp), driving the
 * [MobileClient] engine: pairing with the six-digit code, the token kept in a [TokenStore],
 * `Authorization: Bearer` on every later connection, reconnects on the spec's backoff
 * (1, 2, 4, 8, 16, then 30 s), the state sync, and permission requests for the app to answer.
 *
 * ```kotlin
 * val phone = MobileCompanion("ws://192.168.1.20:9120/ws", FileTokenStore(file), lifecycleScope)
 * if (phone.isPaired) phone.connect() else phone.pair(codeTheUserTyped)
 * phone.permissionRequests.collect { requests -> show(requests) }   // answer: respondPermission
 * phone.startTask("tidy the workspace")
 * ```
 *
 * One coroutine in [scope] owns the socket and pumps the engine; the methods may be called
 * from any thread. Cancelling [scope] or calling [close] closes the socket.
 */
class MobileCompanion(
    private val url: String,
    private val tokens: TokenStore,
    scope: CoroutineScope,
    private val http: OkHttpClient = OkHttpClient(),
    config: MobileClientConfig = mobileClientConfigDefault(),
    private val clock: MonotonicClock = MonotonicClock.System,
    dispatcher: CoroutineDispatcher = Dispatchers.Default,
) : AutoCloseable {
    private val engine = MobileClient(config, tokens.load())

    private sealed interface Input {
        class Opened(val socket: WebSocket) : Input
        class Text(val socket: WebSocket, val text: String) : Input
        class Ended(val socket: WebSocket, val reason: MobileDisconnectReason) : Input
        object Wake : Input
    }

    /** OkHttp's threads post here; a full channel blocks the socket's reader (backpressure). */
    private val inputs = Channel<Input>(capacity = 256)

    /** The socket the engine is using; only the pump touches it. Callbacks of older ones are ignored. */
    private var socket: WebSocket? = null

    private val _events = MutableSharedFlow<MobileClientEvent>(extraBufferCapacity = 64)
    private val _agentState = MutableStateFlow<AgentState?>(null)
    private val _connection = MutableStateFlow(engine.connectionState())
    private val _permissions = MutableStateFlow<List<PermissionRequest>>(emptyList())

    /** Every event, as the engine reports it (a hot flow: subscribe before acting). */
    val events: Flow<MobileClientEvent> = _events.asSharedFlow()

    /** The agent's state as the desktop last sent it (`null` before the first sync). */
    val agentState: StateFlow<AgentState?> = _agentState.asStateFlow()

    /** Where the connection is. */
    val connectionState: StateFlow<MobileConnectionState> = _connection.asStateFlow()

    /** Permission requests waiting for the user, oldest first. */
    val permissionRequests: StateFlow<List<PermissionRequest>> = _permissions.asStateFlow()

    /** Whether a token is stored (connect with [connect]; otherwise [pair]). */
    val isPaired: Boolean get() = engine.token() != null

    private val pump: Job = scope.launch(dispatcher) {
        try {
            while (true) {
                val deadline = drain()
                val wait = delayUntil(clock.now(), deadline)
                val input = if (wait == 0L) inputs.tryReceive().getOrNull()
                else withTimeoutOrNull(wait) { inputs.receive() }
                if (input == null) engine.handleTimeout(clock.now()) else apply(input)
            }
        } finally {
            socket?.cancel()
            socket = null
            engine.stop(clock.now())
            engine.close()
            inputs.close()
        }
    }

    /** Pairs with the code the desktop shows; throws [DeskwireException.Misuse] for a code that is not six digits. */
    fun pair(code: String) = command { engine.pair(clock.now(), code) }

    /** Connects with the stored token; throws [DeskwireException.Misuse] (`NoCredentials`) without one. */
    fun connect() = command { engine.start(clock.now()) }

    /** Sends an agent command; throws [DeskwireException.Misuse] (`NotConnected`) while offline. */
    fun sendCommand(command: Command) = command { engine.sendCommand(clock.now(), command) }

    /** `command start` with a task. */
    fun startTask(task: String, maxIterations: Long? = null) =
        sendCommand(Command(CommandAction.START, task, maxIterations?.toULong()))

    /** `command stop`. */
    fun stopTask() = sendCommand(Command(CommandAction.STOP, null, null))

    /** Sends a chat message (or the answer to the agent's question). */
    fun sendMessage(content: String) = command { engine.sendMessage(clock.now(), content) }

    /** Answers a permission request; [remember] applies the answer to such calls from now on. */
    fun respondPermission(id: String, approved: Boolean, remember: Boolean = false) = command {
        engine.respondPermission(clock.now(), id, approved, remember)
        _permissions.update { list -> list.filter { it.id != id } }
    }

    /** Goes offline until [connect] or [pair]. */
    fun disconnect() = command { engine.stop(clock.now()) }

    /** Forgets the token here and in the store (the user unpaired). */
    fun unpair() = command {
        engine.forgetToken()
        tokens.save(null)
    }

    /** Suspends until the agent state matches [predicate] and returns it. */
    suspend fun awaitState(predicate: (AgentState) -> Boolean): AgentState =
        agentState.first { it != null && predicate(it) }!!

    /** Counters of the engine. */
    fun stats(): MobileClientStats = engine.stats()

    /** Closes the socket and stops the pump. */
    override fun close() {
        pump.cancel()
    }

    private inline fun command(block: () -> Unit) {
        block()
        inputs.trySend(Input.Wake)
    }

    /** Does what the engine asks until it only has a deadline left; returns the deadline. */
    private suspend fun drain(): ULong {
        while (true) {
            when (val out = engine.pollOutput(clock.now())) {
                is MobileClientOutput.Connect -> open(out.bearer)
                is MobileClientOutput.Transmit -> socket?.send(out.text)
                is MobileClientOutput.Close -> {
                    socket?.close(NORMAL_CLOSURE, null)
                    socket = null
                }
                is MobileClientOutput.Event -> deliver(out.event)
                is MobileClientOutput.Timeout -> {
                    _connection.value = engine.connectionState()
                    return out.deadlineMs
                }
            }
        }
    }

    private fun open(bearer: String?) {
        val request = Request.Builder().url(url).apply {
            if (bearer != null) header("Authorization", authorizationHeader(bearer))
        }.build()
        socket = http.newWebSocket(request, Listener())
    }

    private fun apply(input: Input) {
        val now = clock.now()
        when (input) {
            is Input.Opened -> if (input.socket === socket) engine.connected(now)
            is Input.Text -> if (input.socket === socket) engine.handleText(now, input.text)
            is Input.Ended -> if (input.socket === socket) {
                socket = null
                engine.disconnected(now, input.reason)
            }
            Input.Wake -> {}
        }
    }

    private suspend fun deliver(event: MobileClientEvent) {
        when (event) {
            is MobileClientEvent.Paired -> tokens.save(event.token)
            is MobileClientEvent.TokenRejected -> tokens.save(null)
            is MobileClientEvent.StateChanged -> _agentState.value = event.state
            is MobileClientEvent.PermissionRequested -> _permissions.update { it + event.request }
            // The engine forgets waiting requests on a drop; the desktop sends them again.
            is MobileClientEvent.Disconnected -> _permissions.value = emptyList()
            else -> {}
        }
        _events.emit(event)
    }

    private inner class Listener : WebSocketListener() {
        override fun onOpen(webSocket: WebSocket, response: Response) {
            inputs.trySendBlocking(Input.Opened(webSocket))
        }

        override fun onMessage(webSocket: WebSocket, text: String) {
            inputs.trySendBlocking(Input.Text(webSocket, text))
        }

        // The protocol has JSON text frames only; binary frames are dropped.
        override fun onMessage(webSocket: WebSocket, bytes: ByteString) {}

        override fun onClosing(webSocket: WebSocket, code: Int, reason: String) {
            webSocket.close(NORMAL_CLOSURE, null)
            inputs.trySendBlocking(Input.Ended(webSocket, MobileDisconnectReason.Closed))
        }

        override fun onClosed(webSocket: WebSocket, code: Int, reason: String) {
            inputs.trySendBlocking(Input.Ended(webSocket, MobileDisconnectReason.Closed))
        }

        override fun onFailure(webSocket: WebSocket, t: Throwable, response: Response?) {
            val reason = when (response?.code) {
                401, 403 -> MobileDisconnectReason.Unauthorized
                else -> MobileDisconnectReason.Failed(response?.let { "HTTP ${it.code}" } ?: t.toString())
            }
            inputs.trySendBlocking(Input.Ended(webSocket, reason))
        }
    }

    private companion object {
        const val NORMAL_CLOSURE = 1000
    }
}
