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
 * without its trailing line end; a `String` secret is taken as its UTF-8 bytes. An empty one
 * throws [DeskwireException.InvalidInput]; one shorter than [MIN_SECRET_BYTES] (16) is taken
 * with a warning (`java.util.logging`, logger `dev.deskwire`), as rexd warns. A config's
 * `toString()` shows the secret's length only.
 */
object Oa1Auth {
    /** The auth configuration of [secret] for an engine whose times come from [clock]. */
    @JvmStatic
    @JvmOverloads
    fun withSecret(
        secret: ByteArray,
        clock: MonotonicClock = MonotonicClock.System,
        maxSkewMs: Long = 60_000,
    ): Oa1AuthConfig {
        checkSecret(secret)
        return Oa1AuthConfig(secret.copyOf(), epochUnixMs = System.currentTimeMillis() - clock.nowMs(), maxSkewMs = maxSkewMs)
    }

    /**
     * The shortest secret taken without a warning, as rexd's `--secret-file`: a shorter one can
     * be guessed offline from the frames' tags by whoever sees the channel.
     */
    const val MIN_SECRET_BYTES: Int = 16

    /** Where the warning about a short secret goes (`java.util.logging`, logger `dev.deskwire`). */
    internal val log: java.util.logging.Logger = java.util.logging.Logger.getLogger("dev.deskwire")

    /**
     * An empty secret is refused ([DeskwireException.InvalidInput], kind [ErrorKind.INVALID]):
     * anybody could seal frames with it. One under [MIN_SECRET_BYTES] is taken with a warning
     * on [log], as rexd warns of its `--secret-file`. No message shows the secret.
     */
    private fun checkSecret(secret: ByteArray) {
        if (secret.isEmpty()) {
            throw DeskwireException.InvalidInput(
                ErrorKind.INVALID,
                "the secret is empty; use the bytes of rexd's --secret-file (make one with `openssl rand -hex 32`)",
            )
        }
        if (secret.size < MIN_SECRET_BYTES) {
            log.warning(
                "a secret of ${secret.size} bytes can be guessed from the frames' tags by whoever sees the " +
                    "channel; make one with `openssl rand -hex 32`",
            )
        }
    }

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
