package dev.deskwire

import dev.deskwire.core.*
import kotlinx.coroutines.CancellationException
import kotlinx.coroutines.CompletableDeferred
import kotlinx.coroutines.CoroutineScope
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.DisposableHandle
import kotlinx.coroutines.Job
import kotlinx.coroutines.SupervisorJob
import kotlinx.coroutines.cancel
import kotlinx.coroutines.channels.BufferOverflow
import kotlinx.coroutines.channels.Channel
import kotlinx.coroutines.flow.Flow
import kotlinx.coroutines.flow.SharedFlow
import kotlinx.coroutines.flow.MutableSharedFlow
import kotlinx.coroutines.flow.MutableStateFlow
import kotlinx.coroutines.flow.StateFlow
import kotlinx.coroutines.flow.asSharedFlow
import kotlinx.coroutines.flow.asStateFlow
import kotlinx.coroutines.flow.first
import kotlinx.coroutines.future.future
import kotlinx.coroutines.launch
import kotlinx.coroutines.withTimeoutOrNull
import java.net.Socket
import java.security.SecureRandom
import java.util.concurrent.CompletableFuture
import kotlin.time.Duration
import kotlin.time.toJavaDuration

/** An event of a [MultiDeskConnection]: its desk's [channel] (`null`: the connection's own). */
data class DeskEvent(val channel: String?, val event: ConnectionEvent)

/**
 * Many desks over one IRC connection, one per channel ([MultiDesk] behind it: each desk has its
 * own remote, request ids, timeouts and counters; the channels share the connection's flood
 * pacing in turns, so one desk's long request does not hold another's short one back).
 *
 * ```kotlin
 * val desks = runBlocking { MultiDeskConnection.connect("irc.example", 6667, nick = "npcs") }
 * desks.addDesk("#desk-1", "rexd")
 * desks.addDesk("#desk-2", "rexd-lab")
 * println(runBlocking { desks.remoteBash("#desk-2", "uname -a", timeout = 30.seconds) })
 * ```
 *
 * Desks are added and removed at run time ([addDesk], [removeDesk]); requests to a desk wait in
 * it until its channel is joined and its remote is there ([awaitReady] suspends until then).
 * A call that names a channel the connection does not carry throws [DeskwireException.Misuse]
 * with kind [ErrorKind.UNKNOWN_CHANNEL].
 *
 * Chat beside OA1 is opt-in ([connect]'s `chat` and `membership`): [chat] is a [Flow] of
 * [ChatEvent.Message] (`PRIVMSG`, `NOTICE`, `ACTION` with sender and tags) and
 * [ChatEvent.Membership] (joins, parts, kicks, quits, nick changes, each channel's member
 * list), in the order their lines came. [sendText] sends plain text through the same pacing,
 * cut at spaces under the line budget; text starting with `OA1 ` throws
 * [DeskwireException.InvalidInput] with kind [ErrorKind.RESERVED_PREFIX].
 *
 * [events] and [chat] are hot flows from when they are collected; each keeps at most 1024
 * items for a slow collector, dropping the oldest, so the connection never waits for one.
 * The connection's coroutines run in a scope of its own, as [DeskConnection]'s do; [close]
 * sends `QUIT` and ends them. From Java: [connectAsync], [awaitReadyAsync], [requestAsync] and
 * [remoteBashAsync] return `CompletableFuture`s.
 */
class MultiDeskConnection private constructor(
    private val engine: MultiDesk,
    private val socket: Socket,
    private val scope: CoroutineScope,
    private val clock: MonotonicClock,
    /** How long [awaitReady] waits by default (the config's `oa1.readyTimeoutMs`). */
    private val readyTimeoutMs: Long,
) : AutoCloseable {
    private sealed interface Input {
        class Bytes(val bytes: ByteArray) : Input
        data object Eof : Input
        data object Wake : Input
    }

    /** The caller's scope watching this connection (cancelled: close), let go on close. */
    @Volatile private var watch: DisposableHandle? = null

    @Volatile private var closing = false

    private val inputs = Channel<Input>(capacity = 64)

    /** The calls waiting for their answers, by channel and request id. */
    private val waiting = HashMap<Pair<String, String>, CompletableDeferred<String>>()

    private val _state = MutableStateFlow(ConnectionState.REGISTERING)
    private val _events = MutableSharedFlow<DeskEvent>(extraBufferCapacity = 1024, onBufferOverflow = BufferOverflow.DROP_OLDEST)
    private val _chat = MutableSharedFlow<ChatEvent>(extraBufferCapacity = 1024, onBufferOverflow = BufferOverflow.DROP_OLDEST)

    /** Bumped after every turn of the pump: what [awaitReady] re-reads the desk's state on. */
    private val turns = MutableStateFlow(0L)

    /** How registration ended: `null` once registered, or the failure that came first. */
    private val registered = CompletableDeferred<Oa1Failure?>()

    /**
     * Every IRC, OA1 and link event of the connection and its desks, with the desk's channel,
     * from when it is collected.
     */
    val events: SharedFlow<DeskEvent> = _events.asSharedFlow()

    /**
     * Chat and membership in the desks' channels (when [connect] asked for them), in order, a
     * [Flow] (a [SharedFlow]: `onSubscription` tells when a collector is in place).
     */
    val chat: SharedFlow<ChatEvent> = _chat.asSharedFlow()

    /** The connection's state: `REGISTERING`, `READY` once registered, `CLOSED` at the end. */
    val state: StateFlow<ConnectionState> = _state.asStateFlow()

    private val reader: Job = scope.launch(Dispatchers.IO) {
        val stream = socket.getInputStream()
        val buffer = ByteArray(16 * 1024)
        try {
            while (true) {
                val n = stream.read(buffer)
                if (n < 0) break
                inputs.send(Input.Bytes(buffer.copyOf(n)))
            }
        } catch (_: java.io.IOException) {
            // The socket failed or was closed: the engine learns it as the end of the stream.
        } finally {
            inputs.trySend(Input.Eof)
        }
    }

    private val pump: Job = scope.launch(Dispatchers.IO) {
        val out = socket.getOutputStream()
        try {
            while (true) {
                val drained = engine.drain(clock.nowMs())
                if (drained.bytes.isNotEmpty()) out.write(drained.bytes)
                out.flush()
                // The state first: a caller woken by an event reads it as of that event.
                setState(engine.state())
                drained.events.forEach(::deliver)
                turns.value++
                if (engine.state() == ConnectionState.CLOSED) break
                when (val input = inputs.receiveWithin(delayUntil(clock.nowMs(), drained.deadlineMs))) {
                    null -> engine.handleTimeout(clock.nowMs())
                    is Input.Bytes -> engine.handleBytes(clock.nowMs(), input.bytes)
                    Input.Eof -> engine.handleEof(clock.nowMs())
                    Input.Wake -> {}
                }
            }
        } finally {
            runCatching {
                engine.quit(clock.nowMs(), "bye")
                val last = engine.drain(clock.nowMs())
                if (last.bytes.isNotEmpty()) out.write(last.bytes)
                out.flush()
                last.events.forEach(::deliver)
            }
            socket.close()
            reader.cancel()
            setState(ConnectionState.CLOSED)
            turns.value++
            registered.complete(Oa1Failure.Disconnected("the connection was closed"))
            val orphans = synchronized(waiting) { waiting.values.toList().also { waiting.clear() } }
            orphans.forEach { it.cancel(CancellationException("the connection is closed")) }
        }
    }

    private fun setState(state: ConnectionState) = synchronized(_state) {
        _state.value = if (closing) ConnectionState.CLOSED else state
    }

    /** Settles the waiting calls, then tells the collectors. Runs on the pump. */
    private fun deliver(event: MultiDeskEvent) {
        when (event) {
            is MultiDeskEvent.Chat -> _chat.tryEmit(event.event)
            is MultiDeskEvent.Connection -> {
                val inner = event.event
                when {
                    inner is ConnectionEvent.Irc && inner.event is IrcSessionEvent.Registered -> registered.complete(null)
                    inner is ConnectionEvent.Irc && inner.event is IrcSessionEvent.Disconnected -> registered.complete(
                        Oa1Failure.Disconnected(ircDisconnectReasonMessage((inner.event as IrcSessionEvent.Disconnected).reason)),
                    )
                    inner is ConnectionEvent.Oa1 && event.channel != null -> when (val e = inner.event) {
                        is Oa1Event.Response -> synchronized(waiting) { waiting.remove(event.channel to e.id) }?.complete(e.text)
                        is Oa1Event.Failed -> synchronized(waiting) { waiting.remove(event.channel to e.id) }
                            ?.completeExceptionally(Oa1RequestException(e.id, e.failure))
                        else -> {}
                    }
                }
                _events.tryEmit(DeskEvent(event.channel, inner))
            }
        }
    }

    private fun wake() {
        inputs.trySend(Input.Wake)
    }

    /** The engine, or [DeskwireException.Misuse] (`CLOSED`) once the caller closed the connection. */
    private fun open(): MultiDesk {
        if (closing) throw DeskwireException.Misuse(ErrorKind.CLOSED, "the IRC connection has ended")
        return engine
    }

    /**
     * Adds a desk in [channel] whose remote is [remote] (a nick such as `rexd`, a
     * `nick!user@host` mask, or `"*"`); the channel is joined at once. Requests to it wait until
     * it is ready ([awaitReady]). Throws [DeskwireException.InvalidInput] with kind
     * [ErrorKind.DUPLICATE_CHANNEL] for a channel the connection carries already, or
     * [ErrorKind.INVALID_CHANNEL] / [ErrorKind.ALLOWED_SENDER] for bad names.
     */
    fun addDesk(channel: String, remote: String) {
        open().addDesk(clock.nowMs(), channel, remote)
        wake()
    }

    /**
     * Leaves [channel] and drops its desk: its requests in flight fail with
     * [Oa1Failure.Disconnected]. Throws [DeskwireException.Misuse] with kind
     * [ErrorKind.UNKNOWN_CHANNEL] for a channel the connection does not carry.
     */
    fun removeDesk(channel: String) {
        open().removeDesk(clock.nowMs(), channel)
        wake()
    }

    /**
     * Suspends until the desk in [channel] is ready (joined, its remote there). Throws
     * [Oa1ConnectException] with [Oa1Failure.NotReady] saying what it waited for after
     * [timeoutMs] (default: the config's `oa1.readyTimeoutMs`), and
     * [DeskwireException.Misuse] with kind [ErrorKind.UNKNOWN_CHANNEL].
     */
    suspend fun awaitReady(channel: String, timeoutMs: Long = readyTimeoutMs) {
        open().channelState(channel) // an unknown channel throws here
        // withTimeoutOrNull, not withTimeout: a caller's own withTimeout around this call must
        // end it as the caller's timeout, not be taken for this one.
        val ready = withTimeoutOrNull(timeoutMs) {
            turns.first { engine.channelState(channel) == ConnectionState.READY || closing }
        }
        if (ready == null) {
            val what = engine.waitingFor(channel) ?: return
            throw Oa1ConnectException(
                Oa1Failure.NotReady("not ready after ${formatMs(timeoutMs)}: waiting for $what"),
                engine.members(channel),
            )
        }
        open()
    }

    /** [awaitReady] for Java. */
    @JvmOverloads
    fun awaitReadyAsync(channel: String, timeoutMs: Long = readyTimeoutMs): CompletableFuture<Unit> =
        calls.future { awaitReady(channel, timeoutMs) }

    /**
     * Sends [payload] to the remote of the desk in [channel] and suspends until the whole
     * response arrives ([timeoutMs] overrides `oa1.requestTimeoutMs`). Throws
     * [Oa1RequestException] when the request fails, [DeskwireException.Misuse] when it is
     * refused ([ErrorKind.UNKNOWN_CHANNEL], [ErrorKind.TOO_LARGE], [ErrorKind.CLOSED], ...).
     * Cancelling the caller sends `CANCEL`.
     */
    suspend fun request(channel: String, payload: String, timeoutMs: Long? = null): String =
        await(channel) { request(clock.nowMs(), channel, payload, timeoutMs) }

    /**
     * Runs [command] through `RemoteBash` on the remote of the desk in [channel] and returns its
     * output; [timeout] (`null`: `oa1.requestTimeoutMs`) as [DeskConnection.remoteBash]'s.
     * Throws as [request] does.
     */
    suspend fun remoteBash(channel: String, command: String, timeout: Duration? = null): String {
        val javaTimeout = timeout?.coerceAtLeast(Duration.ZERO)?.toJavaDuration()
        return await(channel) { remoteBashCommand(clock.nowMs(), channel, command, javaTimeout) }
    }

    /** [request] for Java: a future that fails as [request] throws; cancelling it sends `CANCEL`. */
    @JvmOverloads
    fun requestAsync(channel: String, payload: String, timeoutMs: Long? = null): CompletableFuture<String> =
        calls.future { request(channel, payload, timeoutMs) }

    /** [remoteBash] for Java, with a `java.time.Duration` timeout (`null`: the configured one). */
    @JvmOverloads
    fun remoteBashAsync(channel: String, command: String, timeout: java.time.Duration? = null): CompletableFuture<String> =
        calls.future {
            val javaTimeout = timeout?.let { if (it.isNegative) java.time.Duration.ZERO else it }
            await(channel) { remoteBashCommand(clock.nowMs(), channel, command, javaTimeout) }
        }

    /**
     * Sends [text] to [channel] as chat (`NOTICE`s when [notice]): cut at spaces, or at
     * character boundaries, into lines that fit, through the shared pacing once the channel is
     * joined. Returns the number of lines. Throws [DeskwireException.InvalidInput] with kind
     * [ErrorKind.RESERVED_PREFIX] for text starting with `OA1 `, [ErrorKind.EMPTY_TEXT] or
     * [ErrorKind.FORBIDDEN_BYTE] (NUL, CR, LF); [DeskwireException.Misuse] with
     * [ErrorKind.UNKNOWN_CHANNEL], [ErrorKind.QUEUE_FULL] (64 KiB wait per channel) or
     * [ErrorKind.CLOSED].
     */
    @JvmOverloads
    fun sendText(channel: String, text: String, notice: Boolean = false): Int {
        val lines = open().sendText(channel, text, notice)
        wake()
        return lines.toInt()
    }

    /** The desks' channels, in the order they were added. */
    fun channels(): List<String> = open().channels()

    /** Where the desk in [channel] stands; [ErrorKind.UNKNOWN_CHANNEL] for an unknown one. */
    fun channelState(channel: String): ConnectionState = open().channelState(channel)

    /** The other members of the desk's channel. */
    fun members(channel: String): List<String> = open().members(channel)

    /** Requests of the desk in [channel] in flight. */
    fun inFlight(channel: String): Long = open().inFlight(channel)

    /** What the desk's requests wait for, in words; `null` when ready. */
    fun waitingFor(channel: String): String? = open().waitingFor(channel)

    /** The OA1 counters of the desk in [channel]. */
    fun channelStats(channel: String): Oa1Stats = open().channelStats(channel)

    /** The IRC session's counters. */
    fun ircStats(): IrcSessionStats = engine.ircStats()

    /** Chat messages and membership changes the engine dropped because nobody took them. */
    fun chatDropped(): Long = engine.chatDropped()

    /** Our nick as the server knows it. */
    val nick: String get() = engine.nick()

    /** Where the futures of the `…Async` calls run (not the connection's scope, which [close] cancels). */
    private val calls = CoroutineScope(Dispatchers.IO)

    /**
     * Says goodbye (`QUIT`) and closes the socket. Requests in flight end; later calls throw
     * [DeskwireException.Misuse] with kind [ErrorKind.CLOSED]. Closing twice does nothing more.
     */
    override fun close() {
        closing = true
        watch?.dispose()
        setState(ConnectionState.CLOSED)
        pump.cancel() // its finally sends the QUIT and closes the socket
        reader.cancel()
        runCatching { socket.shutdownInput() }
        scope.cancel("the connection is closed")
    }

    private suspend fun await(channel: String, start: MultiDesk.() -> String): String {
        open()
        val answer = CompletableDeferred<String>()
        val id = synchronized(waiting) { engine.start().also { waiting[channel to it] = answer } }
        wake()
        try {
            return answer.await()
        } catch (e: CancellationException) {
            val mine = synchronized(waiting) { waiting.remove(channel to id) != null }
            if (mine && !pump.isCompleted) {
                runCatching { engine.cancel(clock.nowMs(), channel, id, "cancelled by the caller") }
                wake()
            }
            throw e
        }
    }

    companion object {
        /**
         * Connects to the IRC server at [host]:[port] as [nick] and suspends until the server
         * has accepted it (registered); no desk yet unless [desks] (channel to remote) names
         * some, which are added at once ([awaitReady] waits for each). [config] (default: the
         * spec's for [nick], with no channel) gives the settings every desk gets and the pacing
         * they share; its `oa1.channel`, when not empty, is a first desk. [chat] and
         * [membership] turn on [MultiDeskConnection.chat]'s two kinds of events.
         *
         * Throws [DeskwireException.InvalidInput] for a bad config or desk before anything is
         * sent, [IrcConnectException] when the socket cannot connect, and [Oa1ConnectException]
         * when the link ends before registration or it takes longer than
         * `config.oa1.readyTimeoutMs`. [seed] (default: [SecureRandom]) starts the request ids;
         * [scope] only bounds the connection's life (its cancellation closes it).
         */
        suspend fun connect(
            host: String,
            port: Int = 6667,
            nick: String = "desks",
            desks: Map<String, String> = emptyMap(),
            config: ConnectionConfig = connectionConfig(nick = nick, channel = ""),
            chat: Boolean = false,
            membership: Boolean = false,
            scope: CoroutineScope? = null,
            seed: Long = SecureRandom().nextLong(),
            clock: MonotonicClock = MonotonicClock.System,
            connectTimeoutMs: Int = 10_000,
            tls: javax.net.ssl.SSLSocketFactory? = null,
        ): MultiDeskConnection {
            val engine = MultiDesk(config, clock.nowMs(), seed) // a bad config throws before the socket opens
            try {
                for ((channel, remote) in desks) engine.addDesk(clock.nowMs(), channel, remote)
                engine.setChat(chat)
                engine.setMembership(membership)
            } catch (e: Throwable) {
                engine.close()
                throw e
            }
            val socket = try {
                connectSocket(host, port, connectTimeoutMs, tls)
            } catch (e: Throwable) {
                engine.close()
                throw e
            }
            val own = CoroutineScope(SupervisorJob() + Dispatchers.IO)
            val connection = MultiDeskConnection(engine, socket, own, clock, config.oa1.readyTimeoutMs)
            val owner = scope?.coroutineContext?.get(Job)
            connection.watch = owner?.invokeOnCompletion { cause -> if (cause != null) connection.close() }
            val failure = try {
                // Boxed: null is this wait's own timeout, never a caller's withTimeout.
                val outcome = withTimeoutOrNull(config.oa1.readyTimeoutMs) { listOf(connection.registered.await()) }
                if (outcome == null) {
                    Oa1Failure.NotReady("not registered after ${formatMs(config.oa1.readyTimeoutMs)}")
                } else {
                    outcome.single()
                }
            } catch (e: Throwable) {
                connection.close()
                throw e
            }
            if (failure != null) {
                connection.close()
                throw Oa1ConnectException(failure)
            }
            return connection
        }

        /**
         * [connect] for Java: a future of the registered connection, failing as [connect]
         * throws (in an `ExecutionException`).
         */
        @JvmStatic
        @JvmOverloads
        fun connectAsync(
            host: String,
            port: Int = 6667,
            nick: String = "desks",
            config: ConnectionConfig = connectionConfig(nick = nick, channel = ""),
            chat: Boolean = false,
            membership: Boolean = false,
            tls: javax.net.ssl.SSLSocketFactory? = null,
        ): CompletableFuture<MultiDeskConnection> = CoroutineScope(Dispatchers.IO).future {
            connect(host, port, nick, config = config, chat = chat, membership = membership, tls = tls)
        }
    }
}
