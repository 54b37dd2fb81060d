package dev.deskwire

import dev.deskwire.core.*
import kotlinx.coroutines.CancellationException
import kotlinx.coroutines.CompletableDeferred
import kotlinx.coroutines.CoroutineDispatcher
import kotlinx.coroutines.CoroutineScope
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.Job
import kotlinx.coroutines.NonCancellable
import kotlinx.coroutines.channels.Channel
import kotlinx.coroutines.channels.trySendBlocking
import kotlinx.coroutines.flow.Flow
import kotlinx.coroutines.flow.MutableSharedFlow
import kotlinx.coroutines.flow.MutableStateFlow
import kotlinx.coroutines.flow.StateFlow
import kotlinx.coroutines.flow.combine
import kotlinx.coroutines.flow.firstOrNull
import kotlinx.coroutines.flow.map
import kotlinx.coroutines.flow.onSubscription
import kotlinx.coroutines.flow.takeWhile
import kotlinx.coroutines.flow.update
import kotlinx.coroutines.launch
import kotlinx.coroutines.withContext
import kotlinx.coroutines.withTimeoutOrNull
import okhttp3.HttpUrl.Companion.toHttpUrlOrNull
import okhttp3.OkHttpClient
import okhttp3.Request
import okhttp3.Response
import okhttp3.WebSocket
import okhttp3.WebSocketListener
import okio.ByteString
import java.nio.file.Files
import java.nio.file.Path
import java.nio.file.StandardCopyOption
import kotlin.time.Duration
import kotlin.time.Duration.Companion.seconds

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
 * Why [MobileCompanion.pair], [MobileCompanion.connect], [MobileCompanion.startTask] or
 * [MobileCompanion.awaitState] gave up. Misuse (a code that is not six digits, no stored token,
 * offline) is [DeskwireException.Misuse], thrown at once instead.
 */
sealed class MobileCompanionException(message: String) : Exception(message) {
    /**
     * The desktop refused the pairing code. [reason] is its text; [attemptsLeft] the wrong
     * codes it still allows for the code it shows (0: ask the desktop for a new code) and
     * [retryAfterMs] how long it looks at no attempt, each `null` when the desktop did not say.
     */
    class PairingRefused(val reason: String?, val attemptsLeft: Int?, val retryAfterMs: Long?) :
        MobileCompanionException(
            buildString {
                append("pairing refused: ").append(reason ?: "the desktop gave no reason")
                if (attemptsLeft != null) append(" (attempts left: $attemptsLeft)")
                if (retryAfterMs != null) append(" (retry after $retryAfterMs ms)")
            },
        )

    /** The desktop refused the stored token (revoked, or not its own); it is forgotten: pair again. */
    class TokenRejected : MobileCompanionException("the desktop refused the stored token (revoked or unknown): pair again")

    /**
     * Not online within the time given (the attempt is stopped): [operation] (`pair` or
     * `connect`) with the desktop at [url] timed out after [waited]. [lastFailure] is why the
     * last connection attempt failed, when one did (`null`: none had ended yet, e.g. a desktop
     * that does not answer at all).
     */
    class NotOnline(
        val waited: Duration,
        val lastFailure: MobileDisconnectReason?,
        val url: String = "",
        val operation: String = "connect",
    ) : MobileCompanionException(
        "$operation with the desktop at $url timed out after $waited: not online" +
            (lastFailure?.let { "; the last attempt: $it" } ?: "; no attempt ended yet (the desktop does not answer)"),
    )

    /** [MobileCompanion.disconnect] or [MobileCompanion.close] was called while waiting. */
    class Stopped(what: String) : MobileCompanionException(what)

    /** No new task showed up in the agent's state within the time given after `command start`. */
    class TaskNotStarted(val waited: Duration, val state: AgentState?) :
        MobileCompanionException("no new task started within $waited; the agent's state: $state")
}

/** The task an agent state is about (`null` when idle). */
val AgentState.taskIdOrNull: String?
    get() = when (this) {
        is AgentState.Running -> taskId
        is AgentState.Paused -> taskId
        is AgentState.Stopped -> taskId
        else -> null
    }

// The core keeps a state's task in the variant's `data` (the wire's `{"status", "data"}`); these
// read it as `state.taskId`, as in `awaitState { it is AgentState.Stopped && it.taskId == id }`.

/** The running task. */
val AgentState.Running.taskId: String get() = data.taskId

/** The paused task. */
val AgentState.Paused.taskId: String get() = data.taskId

/** The stopped task. */
val AgentState.Stopped.taskId: String get() = data.taskId

/**
 * The phone's end of the mobile companion over a real WebSocket (OkHttp), driving the
 * [MobileClient] engine: pairing with the six-digit code, the token kept in a [TokenStore],
 * `Authorization: Bearer` on every later connection, reconnects on the spec's backoff
 * (1, 2, 4, 8, 16, then 30 s), the state sync, and permission requests for the app to answer.
 *
 * ```kotlin
 * val phone = MobileCompanion("ws://192.168.1.20:9120/ws", FileTokenStore(file), lifecycleScope)
 * try {
 *     if (phone.isPaired) phone.connect() else phone.pair(codeTheUserTyped)  // suspend until online
 * } catch (e: MobileCompanionException.PairingRefused) {
 *     showError(e.message)                                 // e.attemptsLeft, e.retryAfterMs
 * }
 * lifecycleScope.launch { phone.permissionRequests.collect { requests -> show(requests) } }
 * val taskId = phone.startTask("tidy the workspace")        // answer prompts: respondPermission
 * val done = phone.awaitState { it is AgentState.Stopped && it.taskId == taskId }
 * phone.close()
 * ```
 *
 * [url] is the desktop's `ws://` or `wss://` address (`http://` and `https://` are taken too);
 * anything else throws [DeskwireException.InvalidInput] (kind [ErrorKind.INVALID]) here.
 * One coroutine in [scope] owns the socket and pumps the engine; the methods may be called
 * from any thread. Cancelling [scope] or calling [close] closes the socket, shuts down the
 * OkHttp client the companion made (not one passed in [http]), and completes every flow.
 */
class MobileCompanion(
    private val url: String,
    private val tokens: TokenStore,
    scope: CoroutineScope,
    http: OkHttpClient? = null,
    config: MobileClientConfig = mobileClientConfigDefault(),
    private val clock: MonotonicClock = MonotonicClock.System,
    dispatcher: CoroutineDispatcher = Dispatchers.Default,
) : AutoCloseable {
    init {
        checkUrl(url) // before anything is made that close() would have to undo
    }

    private val engine = MobileClient(config, tokens.load())

    /** The client made here (shut down on close), or `null` when the caller gave one. */
    internal val ownedHttp: OkHttpClient? = if (http == null) OkHttpClient() else null
    private val http: OkHttpClient = http ?: ownedHttp!!

    private sealed interface Input {
        class Opened(val socket: WebSocket) : Input
        class Text(val socket: WebSocket, val text: String) : Input
        class Ended(val socket: WebSocket, val reason: MobileDisconnectReason) : Input
        data object Wake : Input
    }

    /** OkHttp's threads post here; a full channel blocks the socket's reader (backpressure). */
    private val inputs = Channel<Input>(capacity = 256)

    /** The socket the engine is using; only the pump touches it. Callbacks of older ones are ignored. */
    private var socket: WebSocket? = null

    /** Events, then `null` once closed (so that collectors complete after the last event). */
    private val _events = MutableSharedFlow<MobileClientEvent?>(extraBufferCapacity = 64)
    private val _agentState = MutableStateFlow<AgentState?>(null)
    private val _connection = MutableStateFlow(engine.connectionState())
    private val _permissions = MutableStateFlow<List<PermissionRequest>>(emptyList())
    private val closed = MutableStateFlow(false)

    /**
     * [close] was called: the state reads `Idle` from then on, whatever the pump still does, and
     * the state flows complete (they do not wait for the pump to end, which is asynchronous).
     */
    private val closeCalled = MutableStateFlow(false)
    private val closing: Boolean get() = closeCalled.value

    /** Callers of [pair] and [connect] waiting for the session (guarded by itself). */
    private val waiters = mutableListOf<CompletableDeferred<Unit>>()
    @Volatile private var lastFailure: MobileDisconnectReason? = null

    /** Every event, as the engine reports it (hot: subscribe before acting); completes on close. */
    val events: Flow<MobileClientEvent> =
        _events.onSubscription { if (closed.value) emit(null) }.takeWhile { it != null }.map { it!! }

    /** The agent's state as the desktop last sent it (`null` before the first sync), now and as it changes; completes on close. */
    val agentState: Flow<AgentState?> = _agentState.untilClosed()

    /** Where the connection is, now and as it changes; completes on close. */
    val connectionState: Flow<MobileConnectionState> = _connection.untilClosed()

    /** Permission requests waiting for the user, oldest first, now and as they change; completes on close. */
    val permissionRequests: Flow<List<PermissionRequest>> = _permissions.untilClosed()

    /** The agent's state as the desktop last sent it (`null` before the first sync). */
    val currentAgentState: AgentState? get() = _agentState.value

    /** Where the connection is ([MobileConnectionState.Idle] once [close] has returned). */
    val currentConnectionState: MobileConnectionState
        get() = if (closing) MobileConnectionState.Idle else _connection.value

    /** What ended the pump when it was not [close] (then pair and connect throw it). */
    @Volatile private var crash: Throwable? = null

    /** Permission requests waiting for the user, oldest first. */
    val currentPermissionRequests: List<PermissionRequest> get() = _permissions.value

    /** Whether a token is stored (connect with [connect]; otherwise [pair]). */
    val isPaired: Boolean get() = tokens.load() != null

    private val pump: Job = scope.launch(dispatcher) {
        try {
            while (true) {
                val deadline = drain()
                val wait = delayUntil(clock.now(), deadline)
                val input = inputs.receiveWithin(wait)
                if (input == null) engine.handleTimeout(clock.now()) else apply(input)
            }
        } catch (e: Throwable) {
            if (e !is CancellationException) crash = e
            throw e
        } finally {
            socket?.cancel()
            socket = null
            engine.stop(clock.now())
            engine.close()
            inputs.close()
            // Without this the client's non-daemon dispatcher threads keep the JVM alive ~60 s.
            ownedHttp?.let {
                it.dispatcher.executorService.shutdown()
                it.connectionPool.evictAll()
            }
            _connection.value = MobileConnectionState.Idle
            // Under the waiters' lock: a pair() or connect() either sees closed or is failed here.
            synchronized(waiters) { closed.value = true }
            fail(crash ?: MobileCompanionException.Stopped("the companion was closed"))
            withContext(NonCancellable) { _events.emit(null) }
        }
    }

    /**
     * Pairs with the code the desktop shows and suspends until the session is up and the
     * state synced. Throws [DeskwireException.Misuse] at once for a code that is not six
     * digits; [MobileCompanionException.PairingRefused] when the desktop refuses it (with the
     * attempts left it knows); [MobileCompanionException.NotOnline] naming the URL when not
     * online within [timeout], by default [DEFAULT_PAIR_TIMEOUT] (15 s: the attempt is stopped;
     * a desktop that cannot be reached is retried until then).
     */
    suspend fun pair(code: String, timeout: Duration = DEFAULT_PAIR_TIMEOUT) =
        goOnline(timeout, "pair") { engine.pair(clock.now(), code) }

    /**
     * Connects with the stored token and suspends until the session is up and the state
     * synced. Throws [DeskwireException.Misuse] (`NoCredentials`) at once without a token;
     * [MobileCompanionException.TokenRejected] when the desktop refuses it (it is forgotten);
     * [MobileCompanionException.NotOnline] naming the URL when not online within [timeout]
     * (by default [DEFAULT_CONNECT_TIMEOUT], 30 s).
     */
    suspend fun connect(timeout: Duration = DEFAULT_CONNECT_TIMEOUT) =
        goOnline(timeout, "connect") { engine.start(clock.now()) }

    /** Sends an agent command; throws [DeskwireException.Misuse] (`NotConnected`) while offline. */
    fun sendCommand(command: Command) = command { engine.sendCommand(clock.now(), command) }

    /**
     * `command start` with a task; suspends until the desktop's agent state shows a task other
     * than the one it showed before, and returns that task's id (the spec's `command` carries
     * no id, so the first new task after the command is taken as this one). Throws
     * [MobileCompanionException.TaskNotStarted] when none shows up within [timeout].
     */
    suspend fun startTask(task: String, maxIterations: Long? = null, timeout: Duration = DEFAULT_TIMEOUT): String {
        val before = _agentState.value?.taskIdOrNull
        sendCommand(Command(CommandAction.START, task, maxIterations?.toULong()))
        val started = withTimeoutOrNull(timeout) {
            agentState.firstOrNull { it?.taskIdOrNull.let { id -> id != null && id != before } }
                ?: throw MobileCompanionException.Stopped("the companion was closed")
        }
        return started?.taskIdOrNull ?: throw MobileCompanionException.TaskNotStarted(timeout, _agentState.value)
    }

    /** `command stop`. */
    fun stopTask() = sendCommand(Command(CommandAction.STOP, null, null))

    /** Sends a chat message (or the answer to the agent's question). */
    fun sendMessage(content: String) = command { engine.sendMessage(clock.now(), content) }

    /** Answers a permission request; [remember] applies the answer to such calls from now on. */
    fun respondPermission(id: String, approved: Boolean, remember: Boolean = false) = command {
        engine.respondPermission(clock.now(), id, approved, remember)
        _permissions.update { list -> list.filter { it.id != id } }
    }

    /** Goes offline until [connect] or [pair] (a [pair] or [connect] waiting fails). */
    fun disconnect() = command {
        engine.stop(clock.now())
        fail(MobileCompanionException.Stopped("disconnect() was called"))
    }

    /** Forgets the token here and in the store (the user unpaired). */
    fun unpair() = command {
        engine.forgetToken()
        tokens.save(null)
    }

    /**
     * Suspends until the agent state matches [predicate] and returns it; throws
     * [MobileCompanionException.Stopped] when the companion closes first. Match the task id
     * [startTask] returned, or an earlier task's `Stopped` matches too.
     */
    suspend fun awaitState(predicate: (AgentState) -> Boolean): AgentState =
        agentState.firstOrNull { it != null && predicate(it) }
            ?: throw MobileCompanionException.Stopped("the companion was closed")

    /** Counters of the engine. */
    fun stats(): MobileClientStats = engine.stats()

    /**
     * Closes the socket, stops the pump, shuts down the OkHttp client made here; flows complete.
     * [currentConnectionState] reads `Idle` once this returns.
     */
    override fun close() {
        _connection.value = MobileConnectionState.Idle
        closeCalled.value = true
        pump.cancel()
    }

    private inline fun command(block: () -> Unit) {
        block()
        inputs.trySend(Input.Wake)
    }

    private suspend fun goOnline(timeout: Duration, operation: String, start: () -> Unit) {
        val waiter = CompletableDeferred<Unit>()
        synchronized(waiters) {
            if (closed.value) throw MobileCompanionException.Stopped("the companion was closed")
            waiters += waiter
        }
        try {
            lastFailure = null
            command(start)
            if (withTimeoutOrNull(timeout) { waiter.await() } == null) {
                command { engine.stop(clock.now()) }
                throw MobileCompanionException.NotOnline(timeout, lastFailure, url, operation)
            }
        } catch (e: CancellationException) {
            // The caller gave up: so does the attempt.
            if (!closed.value) command { engine.stop(clock.now()) }
            throw e
        } finally {
            synchronized(waiters) { waiters -= waiter }
        }
    }

    private fun settle(result: Throwable?) {
        val waiting = synchronized(waiters) { waiters.toList().also { waiters.clear() } }
        waiting.forEach { if (result == null) it.complete(Unit) else it.completeExceptionally(result) }
    }

    private fun fail(error: Throwable) = settle(error)

    private fun <T> StateFlow<T>.untilClosed(): Flow<T> =
        combine(this, closed, closeCalled) { value, done, called -> value to (done || called) }
            .takeWhile { !it.second }
            .map { it.first }

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
                    if (!closing) _connection.value = engine.connectionState()
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
            is MobileClientEvent.TokenRejected -> {
                tokens.save(null)
                fail(MobileCompanionException.TokenRejected())
            }
            is MobileClientEvent.AuthFailed -> fail(
                MobileCompanionException.PairingRefused(
                    event.error,
                    event.attemptsLeft?.toInt(),
                    event.retryAfterMs?.toLong(),
                ),
            )
            is MobileClientEvent.StateChanged -> {
                _agentState.value = event.state
                // Online once the state is synced, so that what follows sees the desktop's state
                // (and the connection state says so before pair/connect return).
                if (event.initial) {
                    if (!closing) _connection.value = engine.connectionState()
                    settle(null)
                }
            }
            is MobileClientEvent.PermissionRequested -> _permissions.update { it + event.request }
            // The engine forgets waiting requests on a drop; the desktop sends them again.
            is MobileClientEvent.Disconnected -> {
                lastFailure = event.reason
                _permissions.value = emptyList()
            }
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

    companion object {
        private const val NORMAL_CLOSURE = 1000

        /**
         * The desktop's address as [MobileCompanion] takes it: a `ws://` or `wss://` URL
         * (`http://` and `https://` too, which OkHttp upgrades), else
         * [DeskwireException.InvalidInput] (kind [ErrorKind.INVALID]) naming it.
         */
        private fun checkUrl(url: String) {
            // OkHttp's own parse, as Request.Builder().url() does it (ws is http to it).
            val rest = url.trim().substringAfter("://")
            val http = when (url.trim().substringBefore("://", "").lowercase()) {
                "ws", "http" -> "http://$rest"
                "wss", "https" -> "https://$rest"
                else -> null
            }
            if (http?.toHttpUrlOrNull() == null) {
                throw DeskwireException.InvalidInput(
                    ErrorKind.INVALID,
                    "url is \"$url\"; give the desktop's WebSocket address, e.g. ws://192.168.1.20:9120/ws",
                )
            }
        }

        private val DEFAULT_TIMEOUT = 30.seconds

        /** How long [pair] waits by default for a desktop to answer: a user is looking at the screen. */
        val DEFAULT_PAIR_TIMEOUT: Duration = 15.seconds

        /** How long [connect] waits by default (the desktop may be starting, or on its backoff). */
        val DEFAULT_CONNECT_TIMEOUT: Duration = 30.seconds
    }
}
