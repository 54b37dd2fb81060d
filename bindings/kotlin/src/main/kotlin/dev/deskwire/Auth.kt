@file:JvmName("DeskwireAuth")

package dev.deskwire

/**
 * Shared-secret authentication (OA1A frames) in one line: the [Oa1AuthConfig] of a secret,
 * with the epoch (the Unix time of the clock's `nowMs` 0) computed here from [MonotonicClock]
 * and the wall clock, and the spec's skew and replay defaults.
 *
 * ```kotlin
 * val config = DeskConnection.defaultConfig().withSecret(secret)   // or Oa1AuthConfig.withSecret(secret)
 * ```
 *
 * From Java: `Oa1Auth.withSecret(secret)`. The secret is the bytes of rexd's `--secret-file`
 * without its trailing line end; a `String` secret is taken as its UTF-8 bytes.
 */
object Oa1Auth {
    /** The auth configuration of [secret] for an engine whose times come from [clock]. */
    @JvmStatic
    @JvmOverloads
    fun withSecret(
        secret: ByteArray,
        clock: MonotonicClock = MonotonicClock.System,
        maxSkewMs: Long = 60_000,
    ): Oa1AuthConfig =
        Oa1AuthConfig(secret.copyOf(), epochUnixMs = System.currentTimeMillis() - clock.nowMs(), maxSkewMs = maxSkewMs)

    /** [withSecret] of [secret]'s UTF-8 bytes. */
    @JvmStatic
    @JvmOverloads
    fun withSecret(
        secret: String,
        clock: MonotonicClock = MonotonicClock.System,
        maxSkewMs: Long = 60_000,
    ): Oa1AuthConfig = withSecret(secret.toByteArray(Charsets.UTF_8), clock, maxSkewMs)
}

/** `Oa1AuthConfig.withSecret(secret)`: [Oa1Auth.withSecret]. */
fun Oa1AuthConfig.Companion.withSecret(
    secret: ByteArray,
    clock: MonotonicClock = MonotonicClock.System,
    maxSkewMs: Long = 60_000,
): Oa1AuthConfig = Oa1Auth.withSecret(secret, clock, maxSkewMs)

/** `Oa1AuthConfig.withSecret("...")`: [Oa1Auth.withSecret] of the UTF-8 bytes. */
fun Oa1AuthConfig.Companion.withSecret(
    secret: String,
    clock: MonotonicClock = MonotonicClock.System,
    maxSkewMs: Long = 60_000,
): Oa1AuthConfig = Oa1Auth.withSecret(secret, clock, maxSkewMs)

/**
 * This configuration with OA1A authentication by [secret] (`oa1.auth`): what rexd's
 * `--secret-file` holds. Pass the same [clock] as to `connect`.
 */
@JvmOverloads
fun ConnectionConfig.withSecret(secret: ByteArray, clock: MonotonicClock = MonotonicClock.System): ConnectionConfig =
    copy(oa1 = oa1.copy(auth = Oa1Auth.withSecret(secret, clock)))

/** [withSecret] of [secret]'s UTF-8 bytes. */
@JvmOverloads
fun ConnectionConfig.withSecret(secret: String, clock: MonotonicClock = MonotonicClock.System): ConnectionConfig =
    copy(oa1 = oa1.copy(auth = Oa1Auth.withSecret(secret, clock)))
