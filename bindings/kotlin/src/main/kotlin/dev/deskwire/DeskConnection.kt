package dev.deskwire

import dev.deskwire.core.*
import kotlinx.coroutines.CancellationException
import kotlinx.coroutines.CompletableDeferred
import kotlinx.coroutines.CoroutineScope
import kotlinx.coroutines.flow.Flow
import kotlinx.coroutines.flow.StateFlow
import java.net.Socket
import java.security.SecureRandom
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
 * DeskConnection.connect(host = "irc.example", port = 6667, scope = scope).use { desk ->
 *     println(desk.remoteBash("uname -a", timeout = 30.seconds))
 * }
 * ```
 *
 * [connect] returns once the desk is in the channel with its remote (by default `rexd`, what
 * `rexd --irc` joins as), and throws [Oa1ConnectException] when that cannot happen. [request]
 * and [remoteBash] suspend until the answer arrives; cancelling the calling coroutine sends
 * OA1 `CANCEL` so the remote stops. One coroutine in `scope` pumps the engine; a second one
 * reads the socket. Closing (or cancelling `scope`) sends `QUIT` and closes the socket; the
 * connection cannot be used again.
 *
 * If the server refuses the desk's nick (`433`, in use), the engine goes on as `desk_`, `desk1`,
 * ... ([IrcSessionEvent.NickRefused] on [events]): a remote that takes requests only from `desk`
 * (`rexd --allow-from desk`) then ignores this desk, and its requests time out.
 */
class DeskConnection private constructor(
    private val desk: Desk,
    socket: Socket,
    scope: CoroutineScope,
    private val clock: MonotonicClock,
) : AutoCloseable {
    private val waiting = HashMap<String, CompletableDeferred<String>>()
    private val loop = IrcSocketLoop(socket, desk.asEngine(), scope, clock, ::deliver) {
        synchronized(waiting) {
            waiting.values.forEach { it.cancel(CancellationException("the connection is closed")) }
            waiting.clear()
        }
    }

    /**
     * Every event of the connection (IRC, OA1, link), as the engine reports it from when it is
     * collected: those of the start (before [connect] returned) are not replayed; [state],
     * [nick] and [members] say where the connection stands.
     */
    val events: Flow<ConnectionEvent> = loop.events

    /**
     * Where the connection stands: `READY` once the channel is joined and the remote is there;
     * `JOINING` or `WAITING_FOR_PEER` while a kick, a part or the remote's absence holds
     * requests back; `CLOSED` at the end.
     */
    val state: StateFlow<ConnectionState> = loop.state

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
        await { desk.request(clock.nowMs(), payload, timeoutMs) }

    /**
     * Runs [command] on the remote machine (OA1 `RemoteBash`, through the core's typed call) and
     * returns its combined output. [timeout] (`null`: the configured `oa1.requestTimeoutMs`)
     * counts from when the request may leave, rounded up to a whole millisecond; on expiry the
     * engine sends `CANCEL` and this throws [Oa1RequestException] with [Oa1Failure.Timeout]. A
     * timeout that is not positive throws [DeskwireException.InvalidInput] with kind
     * [ErrorKind.ZERO_TIMEOUT]; a refused request throws as [request] does.
     */
    suspend fun remoteBash(command: String, timeout: Duration? = null): String {
        val javaTimeout = timeout?.coerceAtLeast(Duration.ZERO)?.toJavaDuration()
        return await { desk.remoteBashCommand(clock.nowMs(), command, javaTimeout) }
    }

    /**
     * Our nick as the server knows it: `desk`, or after the server refused it (`433`, in use)
     * the one tried next (`desk_`, ...), which a remote that allows only `desk` ignores.
     */
    val nick: String get() = desk.nick()

    /** What requests wait for before they can leave, in words; `null` when ready or closed. */
    fun waitingFor(): String? = desk.waitingFor()

    /** The other members of the channel, as the server wrote their nicks. */
    fun members(): List<String> = desk.members()

    /** Counters of both layers. */
    fun stats(): ConnectionStats = desk.stats()

    /**
     * Says goodbye (`QUIT`) and closes the socket. Requests in flight fail with
     * [Oa1Failure.Disconnected]; later calls throw [DeskwireException.Misuse] with kind
     * [ErrorKind.CLOSED]. Closing twice does nothing more.
     */
    override fun close() {
        desk.quit(clock.nowMs(), "bye")
        loop.wake()
        loop.close()
    }

    private suspend fun await(start: () -> String): String {
        val answer = CompletableDeferred<String>()
        val id = synchronized(waiting) { start().also { waiting[it] = answer } }
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

    /** Settles the waiting calls (on the pump, before the event is emitted). */
    private fun deliver(event: ConnectionEvent) {
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
         * throws [IrcConnectException] with the host, the port and the reason. With [tls] (e.g.
         * `SSLSocketFactory.getDefault() as SSLSocketFactory`, or an `SSLContext`'s socket
         * factory for a private CA or a client certificate) the link is TLS, the server's
         * certificate and host name verified; a failed check throws [IrcConnectException] naming
         * it. SASL and the server password are the config's (`session.sasl`, `session.password`). The connection is closed when it throws, and when the
         * caller is cancelled meanwhile.
         *
         * [seed] fixes the sequence of request ids; the default comes from [SecureRandom]. Pass
         * a fixed one in tests only: two desks with the same seed pick the same ids, and one can
         * take the other's answer.
         */
        suspend fun connect(
            host: String,
            port: Int = 6667,
            config: ConnectionConfig = defaultConfig(),
            scope: CoroutineScope,
            seed: Long = SecureRandom().nextLong(),
            clock: MonotonicClock = MonotonicClock.System,
            connectTimeoutMs: Int = 10_000,
            tls: javax.net.ssl.SSLSocketFactory? = null,
        ): DeskConnection {
            val desk = Desk(config, clock.nowMs(), seed) // a bad config throws before the socket opens
            val socket = try {
                connectSocket(host, port, connectTimeoutMs, tls)
            } catch (e: Throwable) {
                desk.close()
                throw e
            }
            val connection = DeskConnection(desk, socket, scope, clock)
            connection.loop.awaitReady(config.oa1.readyTimeoutMs, desk::waitingFor, desk::members)
            return connection
        }
    }
}
