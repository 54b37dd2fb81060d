package dev.deskwire

import kotlinx.coroutines.CancellationException
import kotlinx.coroutines.CompletableDeferred
import kotlinx.coroutines.CoroutineScope
import kotlinx.coroutines.flow.Flow
import kotlinx.coroutines.flow.StateFlow
import java.net.Socket
import kotlin.random.Random
import kotlin.time.Duration

/**
 * A request that ended without a response: the remote answered `ERR`, it timed out (the engine
 * sent `CANCEL`), a chunk never came, or the IRC connection ended.
 */
class Oa1RequestException(val id: String, val failure: Oa1Failure) :
    Exception("request $id failed: ${oa1FailureCode(failure)}: ${oa1FailureMessage(failure)}") {
    /** The tool result a model gets for it: `{"ok": false, "error": code, "message": message}`. */
    val toolResultJson: String get() = remoteBashFailureJson(failure)
}

/**
 * The desk's end of OA1 over a plain TCP socket to an IRC server, driving the [Desk] engine
 * (registration, `PING`, `JOIN`, chunking, reassembly, pacing and timeouts all live there).
 *
 * ```kotlin
 * val config = connectionConfig("desk", "#desk").let { it.copy(oa1 = it.oa1.copy(allowedSender = "deskbot")) }
 * DeskConnection.connect("irc.example", 6667, config, scope).use { desk ->
 *     println(desk.remoteBash("uname -a", timeout = 30.seconds))
 * }
 * ```
 *
 * [request] and [remoteBash] suspend until the answer arrives; cancelling the calling coroutine
 * sends OA1 `CANCEL` so the remote stops. One coroutine in `scope` pumps the engine; a second
 * one reads the socket. Closing (or cancelling `scope`) sends `QUIT` and closes the socket.
 */
class DeskConnection private constructor(
    socket: Socket,
    config: ConnectionConfig,
    scope: CoroutineScope,
    seed: Long,
    private val clock: MonotonicClock,
) : AutoCloseable {
    private val desk = Desk(config, clock.now(), seed.toULong())
    private val waiting = HashMap<String, CompletableDeferred<String>>()
    private val loop = IrcSocketLoop(socket, desk.asEngine(), scope, clock, ::deliver) {
        synchronized(waiting) {
            waiting.values.forEach { it.cancel(CancellationException("the connection is closed")) }
            waiting.clear()
        }
        desk.close()
    }

    /** Every event of the connection (IRC, OA1, link), as the engine reports it. */
    val events: Flow<ConnectionEvent> = loop.events

    /** Where the connection stands (`READY` once the channel is joined and the peer is there). */
    val state: StateFlow<ConnectionState> = loop.state

    /**
     * Sends [payload] and suspends until the whole response arrives; [timeoutMs] overrides the
     * configured request timeout. Throws [Oa1RequestException] when the request fails, and
     * [DeskwireException.Misuse] when the engine refuses it (too large, too many in flight,
     * connection closed). Cancelling the caller sends `CANCEL`.
     */
    suspend fun request(payload: String, timeoutMs: Long? = null): String =
        await { desk.request(clock.now(), payload, timeoutMs?.toULong()) }

    /**
     * Runs [command] on the remote machine (OA1 `RemoteBash`) and returns its combined output.
     * [timeout] is the tool's `timeout_sec` (whole seconds, at least one); on expiry the engine
     * sends `CANCEL` and this throws [Oa1RequestException] with [Oa1Failure.Timeout].
     */
    suspend fun remoteBash(command: String, timeout: Duration? = null): String {
        val seconds = timeout?.let { maxOf(1L, it.inWholeSeconds) }
        return request(command, seconds?.let { it * 1000 })
    }

    /** Counters of both layers. */
    fun stats(): ConnectionStats = desk.stats()

    /** Says goodbye (`QUIT`) and closes the socket. */
    override fun close() = loop.close()

    private suspend fun await(start: () -> String): String {
        val answer = CompletableDeferred<String>()
        val id = synchronized(waiting) { start().also { waiting[it] = answer } }
        loop.wake()
        try {
            return answer.await()
        } catch (e: CancellationException) {
            val mine = synchronized(waiting) { waiting.remove(id) != null }
            if (mine && !loop.isClosed) {
                runCatching { desk.cancel(clock.now(), id, "cancelled by the caller") }
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
        /**
         * Connects to the IRC server at [host]:[port] and starts the engine (it registers and
         * joins on its own; requests made meanwhile wait inside it). [seed] fixes request ids.
         */
        fun connect(
            host: String,
            port: Int,
            config: ConnectionConfig,
            scope: CoroutineScope,
            seed: Long = Random.nextLong(),
            clock: MonotonicClock = MonotonicClock.System,
            connectTimeoutMs: Int = 10_000,
        ): DeskConnection {
            return DeskConnection(connectSocket(host, port, connectTimeoutMs), config, scope, seed, clock)
        }
    }
}
