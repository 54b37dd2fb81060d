package dev.deskwire

import dev.deskwire.core.*
import com.fasterxml.jackson.databind.JsonNode
import com.fasterxml.jackson.databind.ObjectMapper
import kotlinx.coroutines.flow.asFlow
import kotlinx.coroutines.runBlocking
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.assertThrows
import kotlin.random.Random
import kotlin.test.assertEquals
import kotlin.test.assertFalse
import kotlin.test.assertIs
import kotlin.test.assertNull
import kotlin.test.assertTrue

/**
 * Provider translation from Kotlin: an agent's turns with each API (the extras each needs back
 * survive the trip through the records), and bad bodies and streams ending in
 * [DeskwireException]s, never a JVM crash.
 */
class ProvidersTest {
    private val mapper = ObjectMapper()
    private fun tree(text: String): JsonNode = mapper.readTree(text)

    private fun sse(vararg events: String, named: Boolean = false): ByteArray = events.joinToString("") { e ->
        val type = if (named) "event: ${tree(e)["type"].asText()}\n" else ""
        "${type}data: $e\n\n"
    }.toByteArray()

    @Test
    fun `a Gemini call keeps its thought signature and its generated id stays out of the echo`() {
        val body = """{"candidates":[{"content":{"role":"model","parts":[{"text":"Checking."},
            {"functionCall":{"name":"read","args":{"path":"notes.txt"}},"thoughtSignature":"c2lnLTE="}]},
            "finishReason":"STOP"}]}"""
        val response = providerParseResponse(Provider.GEMINI, body.toByteArray(), seed = 7uL)
        assertEquals("Checking.", response.text)
        assertEquals("STOP", response.stopReason)
        val call = response.toolCalls.single()
        assertEquals("read", call.name)
        assertEquals("c2lnLTE=", call.thoughtSignature)
        assertTrue(call.idGenerated)
        assertEquals(tree("""{"path":"notes.txt"}"""), tree(call.argsJson))

        Toolbox(null, 0uL).use { toolbox ->
            toolbox.setContext("npc", ToolContext())
            assertEquals(ToolVerdict.Run, toolbox.checkCall(0uL, "npc", call, ToolOrigin.MODEL))
        }
        val turn = tree(providerAssistantTurn(Provider.GEMINI, response))
        val part = turn["parts"][1]
        assertEquals("c2lnLTE=", part["thoughtSignature"].asText())
        assertNull(part["functionCall"]["id"], "Gemini never saw the generated id")
        val results = tree(providerToolResults(Provider.GEMINI, response, listOf(ToolResult(call.id, "hello"))))
        val answer = results["parts"][0]["functionResponse"]
        assertEquals("read", answer["name"].asText(), "the name is recovered from the call")
        assertEquals("hello", answer["response"]["content"].asText())
    }

    @Test
    fun `a streamed Responses answer read from an InputStream echoes its reasoning item and item ids`() {
        val stream = sse(
            """{"type":"response.output_item.added","output_index":0,"item":{"type":"reasoning","id":"rs_1","summary":[]}}""",
            """{"type":"response.output_item.done","output_index":0,"item":{"type":"reasoning","id":"rs_1","encrypted_content":"gAAAAB","summary":[]}}""",
            """{"type":"response.output_item.added","output_index":1,"item":{"type":"function_call","id":"fc_9","call_id":"call_9","name":"bash","arguments":""}}""",
            """{"type":"response.function_call_arguments.delta","item_id":"fc_9","output_index":1,"delta":"{\"command\":"}""",
            """{"type":"response.function_call_arguments.delta","item_id":"fc_9","output_index":1,"delta":"\"ls\"}"}""",
            """{"type":"response.completed","response":{"status":"completed"}}""",
            named = true,
        )
        val response = stream.inputStream().readProviderStream(Provider.OPENAI_RESPONSES)
        assertIs<ResponseSegment.Reasoning>(response.segments[0])
        val call = response.toolCalls.single()
        assertEquals("call_9" to "fc_9", call.id to call.itemId)
        val items = tree(providerAssistantTurn(Provider.OPENAI_RESPONSES, response))
        assertEquals("gAAAAB", items[0]["encrypted_content"].asText(), "the reasoning item goes back unchanged")
        assertEquals("fc_9", items[1]["id"].asText())
        assertEquals("call_9", items[1]["call_id"].asText())
        val outputs = tree(providerToolResults(Provider.OPENAI_RESPONSES, response, listOf(ToolResult("call_9", "a.txt"))))
        assertEquals("function_call_output", outputs[0]["type"].asText())
    }

    @Test
    fun `an Anthropic stream collected from a Flow echoes its thinking block first`() = runBlocking {
        val bytes = sse(
            """{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}""",
            """{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Listing."}}""",
            """{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQB"}}""",
            """{"type":"content_block_stop","index":0}""",
            """{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_1","name":"bash","input":{}}}""",
            """{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"command\":\"ls\"}"}}""",
            """{"type":"content_block_stop","index":1}""",
            """{"type":"message_delta","delta":{"stop_reason":"tool_use"}}""",
            named = true,
        )
        // Chunks of 7 bytes: events and UTF-8 cut anywhere.
        val response = bytes.toList().chunked(7).map { it.toByteArray() }.asFlow()
            .collectProviderResponse(Provider.ANTHROPIC)
        assertEquals("tool_use", response.stopReason)
        val turn = tree(providerAssistantTurn(Provider.ANTHROPIC, response))
        assertEquals(tree("""{"type":"thinking","thinking":"Listing.","signature":"EqQB"}"""), turn["content"][0])
        assertEquals("toolu_1", turn["content"][1]["id"].asText())
        val results = tree(providerToolResults(Provider.ANTHROPIC, response, listOf(ToolResult("toolu_1", "denied", isError = true))))
        assertTrue(results["content"][0]["is_error"].asBoolean())
    }

    @Test
    fun `the toolbox writes each agent's tool fields, gating by allowed names where the API can`() {
        Toolbox(null, 0uL).use { toolbox ->
            toolbox.setContext("npc", ToolContext())
            val chat = tree(toolbox.requestTools("npc", Provider.OPENAI_CHAT, ToolChoice.Auto))
            val names = chat["tools"].map { it["function"]["name"].asText() }
            assertFalse("RemoteBash" in names, "RemoteBash is only offered while bound: $names")
            val gemini = tree(toolbox.requestTools("npc", Provider.GEMINI, ToolChoice.Auto, keepList = true))
            val declared = gemini["tools"][0]["functionDeclarations"].map { it["name"].asText() }
            val allowed = gemini["toolConfig"]["functionCallingConfig"]["allowedFunctionNames"].map { it.asText() }
            assertTrue("RemoteBash" in declared && "RemoteBash" !in allowed, "$declared / $allowed")
            toolbox.setContext("npc", ToolContext(boundNpcId = "npc"))
            val bound = tree(toolbox.requestTools("npc", Provider.GEMINI, ToolChoice.Auto, keepList = true))
            assertEquals(gemini["tools"], bound["tools"], "the declared list (the cached prefix) stays the same")
            assertTrue("RemoteBash" in bound["toolConfig"]["functionCallingConfig"]["allowedFunctionNames"].map { it.asText() })
            val anthropic = tree(toolbox.requestTools("npc", Provider.ANTHROPIC, ToolChoice.Tool("RemoteBash"), parallelToolCalls = false))
            assertEquals(tree("""{"type":"tool","name":"RemoteBash","disable_parallel_tool_use":true}"""), anthropic["tool_choice"])
        }
    }

    // ---------------------------------------------------------------------------------------------
    // Bad input

    /** The `kind` of the [E] that [block] throws. */
    private inline fun <reified E : DeskwireException> kind(noinline block: () -> Unit): ErrorKind =
        when (val e: DeskwireException = assertThrows<E>(block)) {
            is DeskwireException.Misuse -> e.kind
            is DeskwireException.InvalidInput -> e.kind
            is DeskwireException.Remote -> e.kind
        }

    @Test
    fun `malformed bodies are InvalidInput, the provider's own error is Remote`() {
        for (provider in Provider.entries) {
            fun parse(body: ByteArray) = providerParseResponse(provider, body)
            assertEquals(ErrorKind.NOT_JSON, kind<DeskwireException.InvalidInput> { parse(ByteArray(0)) }, "$provider")
            assertEquals(ErrorKind.NOT_JSON, kind<DeskwireException.InvalidInput> { parse("""{"choices":[""".toByteArray()) })
            assertEquals(ErrorKind.NOT_JSON, kind<DeskwireException.InvalidInput> { parse(byteArrayOf(0xff.toByte(), 0xfe.toByte(), '{'.code.toByte())) })
            // Nesting far beyond serde_json's recursion limit: an error, not a stack overflow.
            assertEquals(ErrorKind.NOT_JSON, kind<DeskwireException.InvalidInput> { parse(("[".repeat(100_000)).toByteArray()) })
            assertEquals(ErrorKind.SHAPE, kind<DeskwireException.InvalidInput> { parse("42".toByteArray()) })
            val error = assertThrows<DeskwireException.Remote> {
                parse("""{"error":{"type":"rate_limit_error","message":"slow down"}}""".toByteArray())
            }
            assertEquals(ErrorKind.PROVIDER, error.kind)
            assertTrue("slow down" in error.detail, error.detail)
        }
    }

    @Test
    fun `wrong types in a body become invalid calls or Shape errors`() {
        // Arguments that are not an object: the call is kept, as one to answer with an error.
        val chat = """{"choices":[{"finish_reason":"tool_calls","message":{"role":"assistant","content":null,
            "tool_calls":[{"id":"c1","type":"function","function":{"name":"bash","arguments":"[1,2]"}},
                          {"id":"c2","type":"function","function":{"name":"bash","arguments":7}}]}}]}"""
        val response = providerParseResponse(Provider.OPENAI_CHAT, chat.toByteArray())
        assertEquals(listOf("c1", "c2"), response.invalidToolCalls.map { it.id })
        assertTrue(response.toolCalls.isEmpty())
        assertTrue("an array" in response.invalidToolCalls[0].error)
        // An invalid call is echoed too, so its error result has a call to answer.
        val turn = tree(providerAssistantTurn(Provider.OPENAI_CHAT, response))
        assertEquals("[1,2]", turn["tool_calls"][0]["function"]["arguments"].asText())

        assertEquals(ErrorKind.SHAPE, kind<DeskwireException.InvalidInput> {
            providerParseResponse(Provider.OPENAI_CHAT, """{"choices":[{"message":"hi"}]}""".toByteArray())
        })
        assertEquals(ErrorKind.SHAPE, kind<DeskwireException.InvalidInput> {
            providerParseResponse(Provider.ANTHROPIC, """{"content":"hi"}""".toByteArray())
        })
        assertEquals(ErrorKind.SHAPE, kind<DeskwireException.InvalidInput> {
            providerParseResponse(Provider.OPENAI_RESPONSES, """{"output":{"type":"message"}}""".toByteArray())
        })
    }

    @Test
    fun `records the host built wrong are InvalidInput`() {
        fun response(segment: ResponseSegment) = ProviderResponse(listOf(segment))
        assertEquals(ErrorKind.JSON, kind<DeskwireException.InvalidInput> {
            providerAssistantTurn(Provider.ANTHROPIC, response(ResponseSegment.ToolCall(ToolCall("c1", "bash", "{oops"))))
        })
        assertEquals(ErrorKind.JSON, kind<DeskwireException.InvalidInput> {
            providerAssistantTurn(Provider.ANTHROPIC, response(ResponseSegment.Reasoning("not json")))
        })
        val previous = response(ResponseSegment.ToolCall(ToolCall("c1", "bash", "{}")))
        val unknown = assertThrows<DeskwireException.InvalidInput> {
            providerToolResults(Provider.GEMINI, previous, listOf(ToolResult("c9", "x")))
        }
        assertEquals(ErrorKind.UNKNOWN_CALL, unknown.kind)
        assertEquals("no call \"c9\" in the previous model turn", unknown.detail)
        val schema = """{"type":"object"}"""
        fun request(vararg specs: ToolSpec) = providerRequestTools(Provider.OPENAI_CHAT, ProviderToolRequest(specs.toList(), ToolChoice.Auto))
        assertEquals(ErrorKind.INVALID_NAME, kind<DeskwireException.InvalidInput> { request(ToolSpec("no spaces allowed", "", schema)) })
        assertEquals(ErrorKind.SCHEMA_NOT_OBJECT, kind<DeskwireException.InvalidInput> { request(ToolSpec("t", "", """{"type":"string"}""")) })
        assertEquals(ErrorKind.JSON, kind<DeskwireException.InvalidInput> { request(ToolSpec("t", "", "{")) })
        assertEquals("{}", request(), "no tools: nothing to offer")
    }

    @Test
    fun `a truncated stream ends in Incomplete or NotJson, and the error sticks`() {
        val events = listOf(
            """{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_1","name":"bash","input":{}}}""",
            """{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"command\": \"l"}}""",
        )
        // The body ends between events, before the stop reason: cut off, not a half call to run.
        ProviderStreamParser(Provider.ANTHROPIC).use { p ->
            p.feed(sse(*events.toTypedArray(), named = true))
            val e = assertThrows<DeskwireException.InvalidInput> { p.finish() }
            assertEquals(ErrorKind.INCOMPLETE, e.kind)
            assertTrue("message_delta" in e.detail, e.detail)
        }
        // The whole stream with arguments the model got wrong: an invalid call, to answer.
        val whole = ProviderStreamParser(Provider.ANTHROPIC).use { p ->
            p.feed(sse(*events.toTypedArray(), """{"type":"message_delta","delta":{"stop_reason":"tool_use"}}""", named = true))
            p.finish()
        }
        assertEquals("toolu_1", whole.invalidToolCalls.single().id)
        assertTrue("not valid JSON" in whole.invalidToolCalls.single().error)

        // The body ends inside an event's JSON: NotJson at finish.
        val bytes = sse(*events.toTypedArray(), named = true)
        ProviderStreamParser(Provider.ANTHROPIC).use { p ->
            p.feed(bytes.copyOfRange(0, bytes.size - 20))
            assertEquals(ErrorKind.NOT_JSON, kind<DeskwireException.InvalidInput> { p.finish() })
            assertTrue(p.isFinished())
            assertEquals(ErrorKind.FINISHED, kind<DeskwireException.Misuse> { p.feed(ByteArray(1)) })
            assertEquals(ErrorKind.FINISHED, kind<DeskwireException.Misuse> { p.finish() })
        }

        // A bad event mid-stream: that error, again on every later call.
        ProviderStreamParser(Provider.OPENAI_CHAT).use { p ->
            p.feed("data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\n".toByteArray())
            assertEquals(ErrorKind.NOT_JSON, kind<DeskwireException.InvalidInput> { p.feed("data: {nope\n\n".toByteArray()) })
            assertEquals(ErrorKind.NOT_JSON, kind<DeskwireException.InvalidInput> { p.feed("data: {}\n\n".toByteArray()) })
            assertEquals(ErrorKind.NOT_JSON, kind<DeskwireException.InvalidInput> { p.pushData("{}".toByteArray()) })
            assertEquals(ErrorKind.NOT_JSON, kind<DeskwireException.InvalidInput> { p.finish() })
        }
        ProviderStreamParser(Provider.ANTHROPIC).use { p ->
            val e = assertThrows<DeskwireException.Remote> {
                p.feed(sse("""{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}""", named = true))
            }
            assertTrue("Overloaded" in e.detail, e.detail)
        }
    }

    @Test
    fun `limits bound what a stream may hold`() {
        val limits = ProviderLimits(maxBytes = 4_096uL, maxItems = 2uL)
        ProviderStreamParser(Provider.OPENAI_CHAT, limits = limits).use { p ->
            val chunk = "data: {\"choices\":[{\"delta\":{\"content\":\"${"x".repeat(1_000)}\"}}]}\n\n".toByteArray()
            val error = assertThrows<DeskwireException.InvalidInput> { repeat(10) { p.feed(chunk) } }
            assertEquals(ErrorKind.TOO_LARGE, error.kind)
        }
        ProviderStreamParser(Provider.OPENAI_CHAT, limits = limits).use { p ->
            val error = assertThrows<DeskwireException.InvalidInput> {
                for (i in 0 until 3) {
                    p.pushData("""{"choices":[{"delta":{"tool_calls":[{"index":$i,"id":"c$i","function":{"name":"bash","arguments":"{}"}}]}}]}""".toByteArray())
                }
            }
            assertEquals(ErrorKind.TOO_LARGE, error.kind)
        }
        // An endless SSE line without a newline is refused, not buffered forever.
        ProviderStreamParser(Provider.GEMINI, limits = limits).use { p ->
            val error = assertThrows<DeskwireException.InvalidInput> { repeat(100) { p.feed(ByteArray(1_000) { 'a'.code.toByte() }) } }
            assertEquals(ErrorKind.TOO_LARGE, error.kind)
        }
        assertEquals(16uL * 1024uL * 1024uL, providerLimitsDefault().maxBytes)
    }

    @Test
    fun `random bytes into every stream parser end in DeskwireExceptions only, never a crash`() {
        val random = Random(99)
        var failures = 0
        for (round in 0 until 400) {
            val provider = Provider.entries[round % Provider.entries.size]
            ProviderStreamParser(provider, limits = ProviderLimits(maxBytes = 65_536uL, maxItems = 64uL)).use { p ->
                try {
                    repeat(20) {
                        val bytes = when (random.nextInt(4)) {
                            0 -> ByteArray(random.nextInt(1, 400)).also(random::nextBytes)
                            1 -> "data: ${"{\"a\":".repeat(random.nextInt(1, 200))}\n\n".toByteArray()
                            2 -> "event: x\r\ndata: [DONE]\r\n\r\n: comment\n".toByteArray()
                            else -> "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":${random.nextInt()}}]}}]}\n\n".toByteArray()
                        }
                        p.feed(bytes)
                    }
                    p.finish()
                } catch (e: DeskwireException) {
                    assertTrue(e is DeskwireException.InvalidInput || e is DeskwireException.Remote, "$e")
                    failures++
                }
            }
        }
        assertTrue(failures > 0, "garbage was refused somewhere")
        // And the parsers still work after all that.
        val ok = ProviderStreamParser(Provider.OPENAI_CHAT).use { p ->
            p.feed("data: {\"choices\":[{\"delta\":{\"content\":\"fine\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n".toByteArray())
            p.finish()
        }
        assertEquals("fine", ok.text)
        // A closed parser refuses calls with a JVM exception instead of touching freed memory.
        val closed = ProviderStreamParser(Provider.GEMINI)
        closed.close()
        assertThrows<IllegalStateException> { closed.feed(ByteArray(1)) }
    }
}
