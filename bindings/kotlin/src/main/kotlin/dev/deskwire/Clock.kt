package dev.deskwire

import dev.deskwire.core.*

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

/** How long to wait from [now] until [deadline], in milliseconds (0 when it passed). */
internal fun delayUntil(now: Long, deadline: Long): Long = if (deadline <= now) 0 else deadline - now

/** `1500` → `1.5 s`, as the core writes durations in its messages. */
internal fun formatMs(ms: Long): String = when {
    ms < 1000 -> "$ms ms"
    ms % 1000 == 0L -> "${ms / 1000} s"
    else -> "%.1f s".format(java.util.Locale.ROOT, ms / 1000.0)
}
