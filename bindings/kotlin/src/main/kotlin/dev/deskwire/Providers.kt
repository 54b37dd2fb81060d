package dev.deskwire

import dev.deskwire.core.*
import kotlinx.coroutines.flow.Flow
import java.io.InputStream

/*
 * An agent's turn with an LLM API, in Kotlin terms. The translation itself is the core's
 * (`providerRequestTools`, `providerParseResponse`, `ProviderStreamParser`,
 * `providerAssistantTurn`, `providerToolResults`); this file only pumps bytes into it and
 * names what a loop reads from a response.
 *
 * ```kotlin
 * val fields = toolbox.requestTools("npc-1", Provider.ANTHROPIC, ToolChoice.Auto)  // merge into the body
 * val response = http.stream(body).byteStream().readProviderStream(Provider.ANTHROPIC)
 * val results = response.toolCalls.map { call -> ToolResult(call.id, run(call)) }
 * messages += providerAssistantTurn(Provider.ANTHROPIC, response)
 * messages += providerToolResults(Provider.ANTHROPIC, response, results)
 * ```
 */

/** The calls to run, in the order the model made them. */
val ProviderResponse.toolCalls: List<ToolCall>
    get() = segments.mapNotNull { (it as? ResponseSegment.ToolCall)?.call }

/** The calls whose arguments could not be read: answer each with an error [ToolResult]. */
val ProviderResponse.invalidToolCalls: List<InvalidToolCall>
    get() = segments.mapNotNull { (it as? ResponseSegment.InvalidToolCall)?.call }

/** The text for the user (the model's text segments, joined). */
val ProviderResponse.text: String
    get() = segments.joinToString("") { (it as? ResponseSegment.Text)?.text ?: "" }

/**
 * Reads a streamed response body (server-sent events) to its end and returns the response:
 * OkHttp's `response.body.byteStream()`, a `HttpURLConnection`'s input. Blocks the calling
 * thread while it reads (call it from `Dispatchers.IO`); does not close the stream.
 *
 * @throws DeskwireException.Remote the provider streamed an error event.
 * @throws DeskwireException.InvalidInput the body is not the provider's stream, or is larger
 *   than [limits] allow.
 */
fun InputStream.readProviderStream(
    provider: Provider,
    seed: ULong = 0uL,
    limits: ProviderLimits? = null,
): ProviderResponse = ProviderStreamParser(provider, seed, limits).use { parser ->
    val buffer = ByteArray(16 * 1024)
    while (true) {
        val n = read(buffer)
        if (n < 0) break
        if (n > 0) parser.feed(buffer.copyOf(n))
    }
    parser.finish()
}

/**
 * Collects a streamed response body arriving as chunks of bytes (any split) and returns the
 * response. Cancelling the collecting coroutine stops reading; the parser is freed either way.
 *
 * @throws DeskwireException.Remote the provider streamed an error event.
 * @throws DeskwireException.InvalidInput the body is not the provider's stream.
 */
suspend fun Flow<ByteArray>.collectProviderResponse(
    provider: Provider,
    seed: ULong = 0uL,
    limits: ProviderLimits? = null,
): ProviderResponse = ProviderStreamParser(provider, seed, limits).use { parser ->
    collect { parser.feed(it) }
    parser.finish()
}
