package dev.deskwire

import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withTimeout
import org.junit.jupiter.api.AfterAll
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.TestInstance
import org.junit.jupiter.api.assertThrows
import java.nio.file.Files
import java.nio.file.Path
import java.nio.file.attribute.PosixFilePermissions
import java.util.logging.Handler
import java.util.logging.Level
import java.util.logging.LogRecord
import java.util.logging.Logger
import kotlin.test.assertEquals
import kotlin.test.assertFalse
import kotlin.test.assertTrue

/**
 * The shared secret as a user handles it: a config that holds one prints without it, an empty
 * one is refused, a short one is warned of (as rexd warns of its `--secret-file`) and still
 * works against rexd with the same secret.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class SecretConfigTest {
    private val ngircd = Ngircd()
    private val dir: Path = Files.createTempDirectory("deskwire-secret")

    @AfterAll
    fun stop() {
        ngircd.close()
        dir.toFile().deleteRecursively()
    }

    private fun rexd(secret: String): ChildProcess {
        val file = dir.resolve("secret-${secret.length}")
        Files.createFile(file, PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rw-------")))
        Files.writeString(file, secret + "\n")
        return ChildProcess(
            listOf(
                cargoBinary("rexd").toString(), "--irc", "127.0.0.1:${ngircd.port}",
                "--allow-from", "desk", "--log-level", "info", "--secret-file", file.toString(),
            ),
        ).also { it.await(Regex("joined", RegexOption.IGNORE_CASE)) }
    }

    /** The warnings the binding logs while [block] runs. */
    private fun <T> warnings(block: () -> T): Pair<T, List<String>> {
        val seen = java.util.Collections.synchronizedList(mutableListOf<String>())
        val handler = object : Handler() {
            override fun publish(record: LogRecord) {
                if (record.level == Level.WARNING) seen.add(record.message)
            }
            override fun flush() {}
            override fun close() {}
        }
        val log = Logger.getLogger("dev.deskwire")
        log.addHandler(handler)
        try {
            return block() to seen.toList()
        } finally {
            log.removeHandler(handler)
        }
    }

    @Test
    fun `no config prints its secret`() = runBlocking {
        val secret = "hunter2-correct-horse-battery"
        val (config, warned) = warnings { DeskConnection.defaultConfig().withSecret(secret) }
        assertEquals(emptyList(), warned, "a secret of ${secret.length} bytes is long enough")
        val bytes = secret.toByteArray().joinToString(", ")
        for (text in listOf(config.toString(), config.oa1.toString(), config.oa1.auth.toString())) {
            assertFalse(secret in text || bytes in text || "104, 117" in text, text)
            assertTrue("secret=<${secret.length} bytes, hidden>" in text, text)
        }
        val auth = config.oa1.auth!!
        assertTrue(auth.toString().startsWith("Oa1AuthConfig(secret=<29 bytes, hidden>, epochUnixMs=${auth.epochUnixMs}, "), "$auth")
        // Still a data class: equal configs are equal, the secret is there to use.
        assertEquals(auth, auth.copy())
        assertEquals(secret, String(auth.secret))
        // And it is the secret rexd has: the desk's frames pass.
        rexd(secret).use {
            DeskConnection.connect("127.0.0.1", ngircd.port, config).use { desk ->
                assertEquals("sealed\n", withTimeout(20_000) { desk.remoteBash("echo sealed") })
            }
        }
    }

    @Test
    fun `an empty secret is refused, a short one warned of and still used`() = runBlocking {
        for (call in listOf<() -> Any>(
            { DeskConnection.defaultConfig().withSecret("") },
            { DeskConnection.defaultConfig().withSecret(ByteArray(0)) },
            { Oa1Auth.withSecret("") },
        )) {
            val empty = assertThrows<DeskwireException.InvalidInput> { call() }
            assertEquals(ErrorKind.INVALID, empty.kind)
            assertEquals(
                "the secret is empty; use the bytes of rexd's --secret-file (make one with `openssl rand -hex 32`)",
                empty.detail,
            )
        }
        // A config made by hand with an empty secret is refused when the engine is built.
        val base = DeskConnection.defaultConfig()
        val byHand = base.copy(oa1 = base.oa1.copy(auth = Oa1AuthConfig(ByteArray(0), 0L)))
        val refused = assertThrows<DeskwireException.InvalidInput> {
            runBlocking { DeskConnection.connect("127.0.0.1", ngircd.port, byHand) }
        }
        assertTrue(refused.detail.startsWith("oa1.auth.secret is empty"), refused.detail)

        val (config, warned) = warnings { base.withSecret("abc") }
        assertEquals(
            listOf(
                "a secret of 3 bytes can be guessed from the frames' tags by whoever sees the channel; " +
                    "make one with `openssl rand -hex 32`",
            ),
            warned,
        )
        assertFalse(warned.any { "abc" in it })
        rexd("abc").use {
            DeskConnection.connect("127.0.0.1", ngircd.port, config).use { desk ->
                assertEquals("short\n", withTimeout(20_000) { desk.remoteBash("echo short") })
            }
        }
    }
}
