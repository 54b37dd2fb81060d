package dev.deskwire

/**
 * The monotonic millisecond clock the engines take as `nowMs`. On Android pass
 * `{ SystemClock.elapsedRealtime() }` (it keeps counting in deep sleep); the default,
 * [System.nanoTime], is monotonic on every JVM.
 */
fun interface MonotonicClock {
    /** Milliseconds since an arbitrary fixed point; never goes backwards. */
    fun nowMs(): Long

    companion object {
        /** [System.nanoTime] in milliseconds, counted from the first call. */
        val System: MonotonicClock = object : MonotonicClock {
            private val origin = java.lang.System.nanoTime()
            override fun nowMs(): Long = (java.lang.System.nanoTime() - origin) / 1_000_000
        }
    }
}

/** `nowMs` as the engines take it. */
internal fun MonotonicClock.now(): ULong = nowMs().coerceAtLeast(0).toULong()

/** How long to wait from [now] until [deadline], in milliseconds (0 when it passed). */
internal fun delayUntil(now: ULong, deadline: ULong): Long =
    if (deadline <= now) 0 else (deadline - now).coerceAtMost(Long.MAX_VALUE.toULong()).toLong()
