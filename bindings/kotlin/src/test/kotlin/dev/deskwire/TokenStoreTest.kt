package dev.deskwire

import dev.deskwire.core.*
import org.junit.jupiter.api.Test
import java.nio.file.Files
import kotlin.test.assertEquals
import kotlin.test.assertFalse
import kotlin.test.assertNull

class TokenStoreTest {
    @Test
    fun `a file token store keeps the token across instances and forgets it`() {
        val dir = Files.createTempDirectory("deskwire-token")
        try {
            val file = dir.resolve("token")
            assertNull(FileTokenStore(file).load())
            FileTokenStore(file).save("abc123")
            assertEquals("abc123", FileTokenStore(file).load(), "a new instance (an app restart) reads it")
            FileTokenStore(file).save("def456")
            assertEquals("def456", FileTokenStore(file).load())
            FileTokenStore(file).save(null)
            assertNull(FileTokenStore(file).load())
            assertFalse(Files.exists(file))
        } finally {
            dir.toFile().deleteRecursively()
        }
    }
}
