package dev.deskwire

import dev.deskwire.core.*
import org.jetbrains.kotlin.cli.common.ExitCode
import org.jetbrains.kotlin.cli.jvm.K2JVMCompiler
import org.junit.jupiter.api.Test
import java.io.ByteArrayOutputStream
import java.io.File
import java.io.PrintStream
import java.nio.file.Files
import kotlin.test.assertEquals
import kotlin.test.assertTrue

/**
 * Every ```kotlin block of the README compiles against the library as built (the main classes
 * and this module's dependencies), with the compiler the build uses: a README change that
 * breaks one fails the suite.
 *
 * Each block is the body of a suspend function whose parameters are what the snippets take as
 * given from the app around them: its `scope`, a `tokenFile` (a `Path`), a permission `request`
 * the user answers and `showPrompts`, a `toolbox`, the `httpBody` of a provider's answer,
 * `nowMs`, the app's own `run` for a tool call, `awaitApproval` and the conversation's
 * `messages`. The packages `dev.deskwire`, `dev.deskwire.core` (the core's types), 
 * `kotlinx.coroutines` (and `.flow`) and `Duration.Companion.seconds` are imported.
 */
class ReadmeTest {
    private fun kotlinBlocks(): List<String> {
        val readme = repo.resolve("README.md").toFile().readText()
        return Regex("^```kotlin\\n(.*?)^```$", setOf(RegexOption.MULTILINE, RegexOption.DOT_MATCHES_ALL))
            .findAll(readme).map { it.groupValues[1] }.toList()
    }

    private fun source(index: Int, block: String): String = "package readme.block$index\n\n" + """
            import dev.deskwire.*
            import dev.deskwire.core.*
            import kotlinx.coroutines.*
            import kotlinx.coroutines.flow.*
            import kotlin.time.Duration.Companion.seconds

            @Suppress("UNUSED_PARAMETER", "UNUSED_VARIABLE")
            suspend fun snippet(
                scope: CoroutineScope,
                tokenFile: java.nio.file.Path,
                request: PermissionRequest,
                showPrompts: (List<PermissionRequest>) -> Unit,
                toolbox: Toolbox,
                httpBody: okhttp3.ResponseBody,
                nowMs: ULong,
                run: (ToolCall) -> String,
                awaitApproval: suspend (approvalId: String) -> String,
                messages: MutableList<String>,
            ) {
        """.trimIndent() + "\n" + block.prependIndent("    ") + "\n}\n"

    @Test
    fun `the README's Kotlin blocks compile against the library`() {
        val blocks = kotlinBlocks()
        assertTrue(blocks.size >= 3, "the README's Kotlin section has its blocks: found ${blocks.size}")
        val dir = Files.createTempDirectory("deskwire-readme").toFile()
        try {
            val files = blocks.mapIndexed { i, block ->
                File(dir, "Block$i.kt").apply { writeText(source(i, block)) }
            }
            // Surefire runs the tests from a manifest-only jar; the real class path is here.
            val classpath = System.getProperty("surefire.test.class.path") ?: System.getProperty("java.class.path")
            val messages = ByteArrayOutputStream()
            val exit = K2JVMCompiler().exec(
                PrintStream(messages),
                "-no-stdlib", "-no-reflect", "-jvm-target", "17",
                "-classpath", classpath,
                "-d", File(dir, "out").path,
                *files.map { it.path }.toTypedArray(),
            )
            val numbered = files.joinToString("\n") { f ->
                "${f.name}:\n" + f.readLines().mapIndexed { n, l -> "%3d  %s".format(n + 1, l) }.joinToString("\n")
            }
            assertEquals(ExitCode.OK, exit, "the README's Kotlin does not compile:\n$messages\n$numbered")
        } finally {
            dir.deleteRecursively()
        }
    }
}
