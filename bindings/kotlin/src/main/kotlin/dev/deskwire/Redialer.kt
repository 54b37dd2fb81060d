package dev.deskwire

import kotlinx.coroutines.delay
import java.net.Socket
import java.security.SecureRandom

/**
 * How a connection comes back after a lost link, under the core's reconnect policy: the waits
 * from [reconnectDelayMs] (doubling with each try, back to the first once [ready]), then a new
 * engine and socket from [dial]. What [DeskConnection] and [RemoteConnection] share.
 */
internal class Redialer<E : AutoCloseable>(
    private val policy: ReconnectPolicy,
    private val dial: suspend () -> Pair<E, Socket>,
) {
    init {
        reconnectDelayMs(policy, 0, 0) // a policy the core refuses throws here
    }

    private val random = SecureRandom()

    /** Tries since a connection was last ready. */
    @Volatile private var attempt = 0

    /** A connection got ready: the next outage starts from the first wait. */
    fun ready() {
        attempt = 0
    }

    /**
     * Waits and dials until a connection is made (its engine and socket), trying again after a
     * refused, unreachable or failed TLS connect; `null` once [stopped] says so.
     */
    suspend fun next(stopped: () -> Boolean): Pair<E, Socket>? {
        while (!stopped()) {
            delay(reconnectDelayMs(policy, attempt, random.nextLong()))
            attempt++
            val made = try {
                dial()
            } catch (_: java.io.IOException) {
                continue
            }
            if (stopped()) {
                made.first.close()
                made.second.close()
                return null
            }
            return made
        }
        return null
    }
}
