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
import kotlinx.coroutines.future.future
import kotlinx.coroutines.flow.Flow
import kotlinx.coroutines.flow.MutableStateFlow
import kotlinx.coroutines.flow.StateFlow
import kotlinx.coroutines.flow.asStateFlow
import kotlinx.coroutines.flow.first
import kotlinx.coroutines.launch
import kotlinx.coroutines.withTimeoutOrNull
import java.net.Socket
import java.security.SecureRandom
import java.util.concurrent.CompletableFuture
import kotlin.time.Duration
import kotlin.time.toJavaDuration

/**
 * A request that ended without a response: the remote answered `ERR`, it timed out (the engine
 * sent `CANCEL`), a chunk never came, it could not leave in time (`NotReady`), the server
 * refused the join or kicked us, the remote left, or the IRC connection ended.
 */
class Oa1RequestException(val id: String, val failure: Oa1Failure) :
    Exception("request $id failed: ${oa1FailureCode(failure)}: ${oa1FailureMessage(failure)}") {
    /** The tool result a model gets for it: `{"ok": false, "error": code, "message": message}`. */
    val toolResultJson: String get() = remoteBashFailureJson(failure)

    /**
     * Whether it ran out of time here ([Oa1Failure.Timeout], or [Oa1Failure.NotReady]: it never
     * left), as the core tells timeouts apart; a remote's own `ERR timeout` is not one.
     */
    val isTimeout: Boolean get() = oa1FailureIsTimeout(failure)
}

/**
 * The desk's end of OA1 over a plain TCP socket to an IRC server, driving the [Desk] engine
 * (registration, `PING`, `JOIN`, chunking, reassembly, pacing and timeouts all live there).
 *
 * ```kotlin
 * val desk = runBlocking { DeskConnection.connect(host = "irc.example", port = 6667) }  // returns
 * desk.use { println(runBlocking { it.remoteBash("uname -a", timeout = 30.seconds) }) }
 * ```
 *
 * The connection owns its coroutines: they run in a scope of its own (a [SupervisorJob] on
 * [Dispatchers.IO]), never as children of the caller's, so `runBlocking { connect(...) }`
 * returns as soon as the desk is ready, and the desk works from any coroutine or thread after
 * that. [close] ends that scope. A `scope` given to [connect] only bounds the connection's
 * life: when it is cancelled (or fails), the connection closes; when it completes normally
 * (a `runBlocking` block returning), nothing happens.
 *
 * From Java: [connectAsync], [remoteBashAsync] and [requestAsync] return `CompletableFuture`s
 * (cancelling one cancels the call, which sends OA1 `CANCEL`), with overloads for the defaults.
 *
 * [connect] returns once the desk is in the channel with its remote (by default `rexd`, what
 * `rexd --irc` joins as), and throws [Oa1ConnectException] when that cannot happen. [request]
 * and [remoteBash] suspend until the answer arrives; cancelling the calling coroutine sends
 * OA1 `CANCEL` so the remote stops. One coroutine of the connection's scope pumps the engine; a
 * second one reads the socket. Closing (or cancelling the `scope` given to [connect]) sends
 * `QUIT` and closes the socket; [state] reads `CLOSED` from then on and every call but [stats]
 * and [nick] throws [DeskwireException.Misuse] with kind [ErrorKind.CLOSED].
 *
 * If the server refuses the desk's nick (`433`, in use: often our own previous connection, not
 * yet gone), the engine goes on as `desk_` ([IrcSessionEvent.NickRefused] on [events]) and asks
 * for `desk` back; requests wait meanwhile (`WAITING_FOR_NICK`), since a remote that takes
 * requests only from `desk` (`rexd --allow-from desk`) would ignore `desk_`.
 *
 * With a [ReconnectPolicy] ([connect]'s `reconnect`), a lost link (the server gone, or found
 * dead by the keepalive `PING`: `session.pingIntervalMs` then `session.pingTimeoutMs`) comes
 * back with a new engine: requests in flight fail [Oa1Failure.Disconnected] (never resent: they
 * may have run), and requests made meanwhile wait for the next connection, at most
 * `oa1.readyTimeoutMs`.
 */
class DeskConnection private constructor(
    first: Desk,
    socket: Socket,
    private val scope: CoroutineScope,
    private val clock: MonotonicClock,
    private val readyTimeoutMs: Long,
    /** How a lost link comes back; `null`: the connection ends with its link. */
    private val redialer: Redialer<Desk>?,
) : AutoCloseable {
    /** The caller's scope watching this connection (cancelled: close), let go on close. */
    @Volatile private var watch: DisposableHandle? = null

    private val waiting = HashMap<String, CompletableDeferred<String>>()
    private val _state = MutableStateFlow(ConnectionState.REGISTERING)
    private val _events = EventStream<ConnectionEvent>(capacity = 64)

    /** Bumped each time a new connection (engine and socket) takes over. */
    private val generation = MutableStateFlow(0)

    @Volatile private var desk: Desk = first

    @Volatile private var closing = false

    /** [connect] returned: a link lost from now on is reconnected (before, connect throws). */
    @Volatile private var established = false

    private var loop: IrcSocketLoop = start(first, socket)

    /** How many times the connection came back after the link was lost. */
    @Volatile var reconnects: Int = 0
        private set

    private fun start(desk: Desk, socket: Socket): IrcSocketLoop =
        IrcSocketLoop(socket, desk.asEngine(), scope, clock, ::deliver, _state) { ended(desk) }

    /** A loop ended: the caller's close, or the link lost (then, with a policy, connect again). */
    private fun ended(engine: Desk) {
        // What the engine could not fail itself (the loop stopped on an error) fails here.
        val orphans = synchronized(waiting) { waiting.values.toList().also { waiting.clear() } }
        if (closing || !established || redialer == null) {
            orphans.forEach { it.cancel(CancellationException("the connection is closed")) }
            _events.end()
            return
        }
        orphans.forEach {
            it.completeExceptionally(Oa1RequestException("", Oa1Failure.Disconnected("the IRC connection was lost")))
        }
        if (engine !== desk) return
        _state.value = ConnectionState.REGISTERING
        scope.launch { comeBack() }
    }

    private suspend fun comeBack() {
        val (engine, socket) = redialer?.next { closing } ?: return
        desk.close()
        desk = engine
        loop = start(engine, socket)
        reconnects++
        generation.value++
    }

    /**
     * Every event of the connection (IRC, OA1, link), as the engine reports it from when it is
     * collected: those of the start (before [connect] returned) are not replayed; [state],
     * [nick] and [members] say where the connection stands. With a reconnect policy, the
     * events of every connection in turn. Collecting ends (`collect` returns) when the
     * connection is closed, after the events before that.
     */
    val events: Flow<ConnectionEvent> = _events.flow

    /**
     * Where the connection stands: `READY` once the channel is joined and the remote is there;
     * `JOINING`, `WAITING_FOR_NICK` or `WAITING_FOR_PEER` while a kick, a part, a taken nick or
     * the remote's absence holds requests back; with a reconnect policy, `REGISTERING` again
     * while the connection comes back after the link was lost; `CLOSED` at the end.
     */
    val state: StateFlow<ConnectionState> = _state.asStateFlow()

    /**
     * Sends [payload] and suspends until the whole response arrives; [timeoutMs] overrides the
     * configured `oa1.requestTimeoutMs`. The timeout starts when the request may leave (the
     * connection ready, the remote in the channel); until then `oa1.readyTimeoutMs` applies.
     *
     * Throws [Oa1RequestException] when the request fails (its [Oa1Failure] says why), and
     * [DeskwireException.Misuse] when the engine refuses it: too large ([ErrorKind.TOO_LARGE]),
     * too many in flight, or the connection closed ([ErrorKind.CLOSED], after [close] or the
     * end of the link). Cancelling the caller sends `CANCEL`.
     */
    suspend fun request(payload: String, timeoutMs: Long? = null): String =
        await { request(clock.nowMs(), payload, timeoutMs) }

    /**
     * Runs [command] on the remote machine (OA1 `RemoteBash`, through the core's typed call) and
     * returns its combined output. [timeout] (`null`: the configured `oa1.requestTimeoutMs`)
     * counts from when the request may leave, rounded up to a whole millisecond; on expiry the
     * engine sends `CANCEL`. What arrived before then is returned, ending with a line
     * `...[cut at the 30 s timeout: N bytes arrived; the rest was cancelled]...`; so is what
     * arrived before the remote or the link went away (`...[cut short: ...]...`), and an
     * answer over the 128 KiB cap ends with `...[truncated]...`: the last line says which.
     * Only a request of which nothing arrived throws [Oa1RequestException]
     * ([Oa1Failure.Timeout], [Oa1Failure.PeerLeft], ...). A timeout that is not positive
     * throws [DeskwireException.InvalidInput] with kind [ErrorKind.ZERO_TIMEOUT]; a refused
     * request throws as [request] does.
     */
    suspend fun remoteBash(command: String, timeout: Duration? = null): String {
        val javaTimeout = timeout?.coerceAtLeast(Duration.ZERO)?.toJavaDuration()
        return await { remoteBashCommand(clock.nowMs(), command, javaTimeout) }
    }

    /**
     * Our nick as the server knows it: `desk`, or after the server refused it (`433`, in use)
     * the one tried next (`desk_`, ...), which a remote that allows only `desk` ignores.
     */
    val nick: String get() = desk.nick()

    /**
     * What requests wait for before they can leave, in words; `null` when ready. Throws
     * [DeskwireException.Misuse] with kind [ErrorKind.CLOSED] after [close].
     */
    fun waitingFor(): String? = open().waitingFor()

    /**
     * The other members of the channel, as the server wrote their nicks. Throws
     * [DeskwireException.Misuse] with kind [ErrorKind.CLOSED] after [close].
     */
    fun members(): List<String> = open().members()

    /** The engine, or [DeskwireException.Misuse] (`CLOSED`) once the caller closed the connection. */
    private fun open(): Desk {
        // The engine's own words for a closed connection.
        if (closing) throw DeskwireException.Misuse(ErrorKind.CLOSED, "the IRC connection has ended")
        return desk
    }

    /**
     * [request] for Java: a future of the response that fails as [request] throws (in an
     * `ExecutionException`); cancelling it cancels the request (OA1 `CANCEL`).
     */
    @JvmOverloads
    fun requestAsync(payload: String, timeoutMs: Long? = null): CompletableFuture<String> =
        calls.future { request(payload, timeoutMs) }

    /**
     * [remoteBash] for Java: a future of the command's output ([timeout] `null`: the configured
     * `oa1.requestTimeoutMs`) that fails as [remoteBash] throws (in an `ExecutionException`);
     * cancelling it cancels the request (OA1 `CANCEL`).
     */
    @JvmOverloads
    fun remoteBashAsync(command: String, timeout: java.time.Duration? = null): CompletableFuture<String> =
        calls.future {
            val javaTimeout = timeout?.let { if (it.isNegative) java.time.Duration.ZERO else it }
            await { remoteBashCommand(clock.nowMs(), command, javaTimeout) }
        }

    /**
     * Where the futures of the `…Async` calls run: not the connection's scope, which [close]
     * cancels, so that a call after close fails as the suspend call throws (`CLOSED`).
     */
    private val calls = CoroutineScope(Dispatchers.IO)

    /** Counters of both layers. */
    fun stats(): ConnectionStats = desk.stats()

    /**
     * Says goodbye (`QUIT`) and closes the socket. Requests in flight fail with
     * [Oa1Failure.Disconnected]; later calls throw [DeskwireException.Misuse] with kind
     * [ErrorKind.CLOSED]. Closing twice does nothing more.
     */
    override fun close() {
        closing = true
        watch?.dispose()
        runCatching { desk.quit(clock.nowMs(), "bye") }
        loop.wake()
        loop.close() // the state reads CLOSED from here
        // The pump's own end (QUIT, then the socket closed) runs in its finally block.
        scope.cancel("the connection is closed")
    }

    private suspend fun await(start: Desk.() -> String): String {
        open() // closed by the caller: CLOSED at once, whatever the engine still has in hand
        val answer = CompletableDeferred<String>()
        val desk = currentDesk()
        val loop = this.loop
        val id = synchronized(waiting) { desk.start().also { waiting[it] = answer } }
        loop.wake()
        try {
            return answer.await()
        } catch (e: CancellationException) {
            val mine = synchronized(waiting) { waiting.remove(id) != null }
            if (mine && !loop.isClosed) {
                runCatching { desk.cancel(clock.nowMs(), id, "cancelled by the caller") }
                loop.wake()
            }
            throw e
        }
    }

    /**
     * The engine a new request goes to. While the connection comes back after a lost link, the
     * next one's, waited for at most `oa1.readyTimeoutMs` (then [Oa1Failure.NotReady]); OA1
     * promises nothing across reconnects, so nothing is resent.
     */
    private suspend fun currentDesk(): Desk {
        if (redialer == null || closing) return desk
        val seen = generation.value
        val desk = this.desk
        if (desk.state() != ConnectionState.CLOSED) return desk
        val next = withTimeoutOrNull(readyTimeoutMs) { generation.first { it > seen } }
        if (next == null && !closing) {
            throw Oa1RequestException(
                "",
                Oa1Failure.NotReady("not ready after ${formatMs(readyTimeoutMs)}: waiting for a connection to the server"),
            )
        }
        return this.desk
    }

    /** Settles the waiting calls (on the pump, before the event is emitted). */
    private suspend fun deliver(event: ConnectionEvent) {
        if ((event as? ConnectionEvent.Link)?.event == LinkEvent.StateChanged(ConnectionState.READY)) redialer?.ready()
        _events.emit(event)
        if (event is ConnectionEvent.Oa1) {
            when (val e = event.event) {
                is Oa1Event.Response -> synchronized(waiting) { waiting.remove(e.id) }?.complete(e.text)
                is Oa1Event.Failed -> synchronized(waiting) { waiting.remove(e.id) }
                    ?.completeExceptionally(Oa1RequestException(e.id, e.failure))
                else -> {}
            }
        }
    }

    companion object {
        /** The configuration that works with `rexd --irc`'s defaults: `desk` in `#desk`, asking `rexd`. */
        @JvmStatic
        fun defaultConfig(): ConnectionConfig = connectionConfig(nick = "desk", channel = "#desk", peer = "rexd")

        /**
         * Connects to the IRC server at [host]:[port] and suspends until the desk can ask: it
         * registers, joins `config.oa1.channel` and waits for its remote (`config.oa1.allowedSender`)
         * to be there. The network is used on [kotlinx.coroutines.Dispatchers.IO] only.
         *
         * The default [config] is [defaultConfig]; a desk must name its remote (`peer` of
         * [connectionConfig]: a nick, a `nick!user@host` mask, or `"*"` for anyone in the
         * channel), and a config without one, or with a nick or channel the server would refuse,
         * throws [DeskwireException.InvalidInput] before anything is sent.
         *
         * Throws [Oa1ConnectException] when the server refuses the join
         * ([Oa1Failure.JoinFailed], at once, with the server's numeric and text), when the link
         * ends ([Oa1Failure.Disconnected]), or when the desk is not ready within
         * `config.oa1.readyTimeoutMs` ([Oa1Failure.NotReady], e.g. ``not ready after 30 s:
         * waiting for remote `rexd` in #desk; members: deskbot``); a socket that cannot connect
         * throws [IrcConnectException] with the host, the port and the reason (`the name ... does
         * not resolve` for an unknown host). An empty [host] or a [port] outside 1 to 65535 throws
         * [DeskwireException.InvalidInput] (kind [ErrorKind.INVALID]), and a [clock] that reads
         * negative throws it with kind [ErrorKind.NEGATIVE], before anything is dialled. With [tls] (e.g.
         * `SSLSocketFactory.getDefault() as SSLSocketFactory`, or an `SSLContext`'s socket
         * factory for a private CA or a client certificate) the link is TLS, the server's
         * certificate and host name verified; a failed check throws [IrcConnectException] naming
         * it. SASL and the server password are the config's (`session.sasl`, `session.password`). The connection is closed when it throws, and when the
         * caller is cancelled meanwhile.
         *
         * [seed] fixes the sequence of request ids; the default comes from [SecureRandom]. Pass
         * a fixed one in tests only: two desks with the same seed pick the same ids, and one can
         * take the other's answer.
         *
         * The connection's coroutines run in a scope of its own, never as children of the
         * caller's: `runBlocking { connect(...) }` returns once the desk is ready. [scope]
         * (optional) bounds its life: cancelling it closes the connection; its normal end does
         * not. [close] ends the connection and its scope.
         */
        suspend fun connect(
            host: String,
            port: Int = 6667,
            config: ConnectionConfig = defaultConfig(),
            scope: CoroutineScope? = null,
            seed: Long = SecureRandom().nextLong(),
            clock: MonotonicClock = MonotonicClock.System,
            connectTimeoutMs: Int = 10_000,
            tls: javax.net.ssl.SSLSocketFactory? = null,
            reconnect: ReconnectPolicy? = null,
        ): DeskConnection {
            val ids = java.util.Random(seed)
            suspend fun dial(): Pair<Desk, Socket> {
                val desk = Desk(config, clock.nowMs(), ids.nextLong()) // a bad config throws before the socket opens
                val socket = try {
                    connectSocket(host, port, connectTimeoutMs, tls)
                } catch (e: Throwable) {
                    desk.close()
                    throw e
                }
                return desk to socket
            }
            val redialer = reconnect?.let { Redialer(it, ::dial) } // a bad policy throws before dialling
            val (desk, socket) = dial()
            val own = CoroutineScope(SupervisorJob() + Dispatchers.IO)
            val connection = DeskConnection(desk, socket, own, clock, config.oa1.readyTimeoutMs, redialer)
            val owner = scope?.coroutineContext?.get(Job)
            connection.watch = owner?.invokeOnCompletion { cause -> if (cause != null) connection.close() }
            try {
                connection.loop.awaitReady(config.oa1.readyTimeoutMs, desk::waitingFor, desk::members)
            } catch (e: Throwable) {
                connection.watch?.dispose()
                own.cancel()
                throw e
            }
            connection.established = true
            return connection
        }

        /**
         * [connect] for Java: a future of the ready connection, failing as [connect] throws (in
         * an `ExecutionException`: [Oa1ConnectException], [IrcConnectException] naming the host
         * and the port, [DeskwireException.InvalidInput]). The connection's coroutines are its
         * own ([close] ends them); cancelling the future stops the attempt.
         */
        @JvmStatic
        @JvmOverloads
        fun connectAsync(
            host: String,
            port: Int = 6667,
            config: ConnectionConfig = defaultConfig(),
            tls: javax.net.ssl.SSLSocketFactory? = null,
            reconnect: ReconnectPolicy? = null,
        ): CompletableFuture<DeskConnection> =
            CoroutineScope(Dispatchers.IO).future { connect(host, port, config, tls = tls, reconnect = reconnect) }
    }
}
