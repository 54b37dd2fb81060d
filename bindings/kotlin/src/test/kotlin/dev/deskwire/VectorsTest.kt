package dev.deskwire

import dev.deskwire.core.*
import com.fasterxml.jackson.databind.JsonNode
import com.fasterxml.jackson.databind.ObjectMapper
import com.fasterxml.jackson.databind.node.JsonNodeFactory
import com.fasterxml.jackson.databind.node.ObjectNode
import org.junit.jupiter.api.DynamicTest
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.TestFactory
import org.junit.jupiter.api.assertThrows
import java.nio.file.Files
import java.time.Instant
import kotlin.io.path.name
import kotlin.test.assertEquals
import kotlin.test.assertTrue
import kotlin.test.fail

/**
 * Every conformance vector file in tests/vectors/ through the Kotlin API: the same cases the
 * Rust, C, Python and Godot runners check. What this runner cannot run is listed in [notRun]
 * with the reason.
 */
class VectorsTest {
    private val mapper = ObjectMapper()
    private val json = JsonNodeFactory.instance

    private fun load(name: String): JsonNode = mapper.readTree(repo.resolve("tests/vectors/$name").toFile())

    /** JSON equality where 2 and 2.0 are the same number (as in serde_json's `Value`). */
    private fun same(a: JsonNode, b: JsonNode): Boolean = a.equals(
        Comparator { x, y ->
            when {
                x == y -> 0
                x.isNumber && y.isNumber && x.decimalValue().compareTo(y.decimalValue()) == 0 -> 0
                else -> 1
            }
        },
        b,
    )

    private fun assertSameJson(expected: JsonNode, actual: JsonNode, what: String) =
        assertTrue(same(expected, actual), "$what:\n  want $expected\n  got  $actual")

    /** `TooManyInFlight` → `too_many_in_flight`: the vectors' names for the core's variants. */
    private fun snake(kind: String) =
        kind.replace(Regex("(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])"), "_").lowercase()

    /** [ErrorKind.TOO_MANY_IN_FLIGHT] → `too_many_in_flight`. */
    private fun snake(kind: ErrorKind) = kind.name.lowercase()

    /** [ErrorKind.NOT_JSON] → `NotJson`, the core's variant name. */
    private fun variant(kind: ErrorKind) =
        kind.name.split('_').joinToString("") { it.lowercase().replaceFirstChar(Char::uppercaseChar) }

    private fun cases(doc: JsonNode, section: String): List<JsonNode> =
        doc[section].toList().also { assertTrue(it.isNotEmpty(), "$section has no cases") }

    private fun dynamic(file: String, cases: List<JsonNode>, body: (JsonNode) -> Unit): List<DynamicTest> =
        cases.mapIndexed { i, case ->
            val name = case["name"]?.asText() ?: case["input"]?.asText() ?: "#$i"
            DynamicTest.dynamicTest("$file: $name") { body(case) }
        }

    // ---------------------------------------------------------------------------------------------
    // Which files run where

    /** Files (relative to tests/vectors) this runner does not run, and why. */
    private val notRun = mapOf<String, String>()

    private val runners = setOf(
        "oa1.json", "irc-msg-split.json", "jsonrpc.json", "mobile.json", "gateway.json",
        "rexd.json", "sidecar.json", "tools.json", "providers/anthropic.json", "providers/gemini.json",
        "providers/openai_chat.json", "providers/openai_responses.json",
    )

    @Test
    fun `every vector file is run here or listed with the reason it is not`() {
        val root = repo.resolve("tests/vectors")
        val files = Files.walk(root).use { paths ->
            paths.filter { it.name.endsWith(".json") && !root.relativize(it).startsWith("providers/schemas") }
                .map { root.relativize(it).toString() }.toList()
        }
        assertTrue(files.size >= 12, "$files")
        for (file in files) {
            assertTrue(file in runners || file in notRun, "no Kotlin runner and no reason for tests/vectors/$file")
        }
        for ((file, reason) in notRun) println("tests/vectors/$file not run from Kotlin: $reason")
    }

    // ---------------------------------------------------------------------------------------------
    // OA1

    @TestFactory
    fun oa1(): List<DynamicTest> {
        val doc = load("oa1.json")
        return dynamic("oa1 escape", cases(doc, "escape")) {
            assertEquals(it["escaped"].asText(), oa1Escape(it["text"].asText()))
        } + dynamic("oa1 unescape", cases(doc, "unescape")) {
            assertEquals(it["text"].asText(), String(oa1Unescape(it["escaped"].asText().toByteArray())))
        } + dynamic("oa1 frames", cases(doc, "frames")) {
            val frame = oa1ParseFrame(it["text"].asText())
            assertSameJson(it["frame"], frame?.let(::frameJson) ?: json.nullNode(), "parsed")
        } + dynamic("oa1 format", cases(doc, "format")) {
            val f = it["frame"]
            val frame = Oa1Frame(
                Oa1FrameType.valueOf(f["type"].asText().uppercase().replace("REQZ", "REQ_Z").replace("RESZ", "RES_Z")),
                f["id"].asText(), f["seq"].asLong(), f["more"].asBoolean(), f["payload"].asText(),
            )
            val text = oa1FormatFrame(frame)
            assertEquals(it["text"].asText(), text)
            assertSameJson(f, frameJson(oa1ParseFrame(text)!!), "read back")
        } + dynamic("oa1 chunks", cases(doc, "chunks")) {
            val payloads = oa1Chunk(it["text"].asText(), it["budget"].asLong())
            assertEquals(it["payloads"].map { p -> p.asText() }, payloads)
            val joined = payloads.flatMap { p -> oa1Unescape(p.toByteArray()).toList() }.toByteArray()
            assertEquals(it["text"].asText(), String(joined))
        } + dynamic("oa1 err_payloads", cases(doc, "err_payloads")) {
            val failure = oa1FailureFromErrPayload(it["payload"].asText())
            assertEquals(it["code"].asText(), oa1FailureCode(failure))
            assertEquals(it["message"].asText(), oa1FailureMessage(failure))
        } + dynamic("oa1 exchanges", cases(doc, "exchanges"), ::runExchange)
    }

    private fun frameJson(f: Oa1Frame): JsonNode = json.objectNode().apply {
        put("type", f.kind.name.replace("_", ""))
        put("id", f.id)
        put("seq", f.seq)
        put("more", f.more)
        put("payload", f.payload)
    }

    private fun eventJson(e: Oa1Event, expected: JsonNode?): JsonNode = json.objectNode().apply {
        when (e) {
            is Oa1Event.Response -> putObject("response").put("id", e.id).put("text", e.text).put("truncated", e.truncated)
            is Oa1Event.Failed -> putObject("failed").apply {
                put("id", e.id)
                put("error", oa1FailureCode(e.failure))
                if (expected?.at("/event/failed/message")?.isMissingNode == false) put("message", oa1FailureMessage(e.failure))
            }
            is Oa1Event.Request -> putObject("request").put("id", e.id).put("sender", e.sender).put("payload", e.payload)
            is Oa1Event.Cancelled -> putObject("cancelled").put("id", e.id).put("reason", e.reason)
        }
    }

    /** The counters by their snake_case names, read from the data class's getters. */
    private fun statsJson(stats: Any): ObjectNode = json.objectNode().apply {
        for (m in stats.javaClass.methods) {
            if (m.name.startsWith("get") && m.parameterCount == 0 && m.name != "getClass") {
                val value = m.invoke(stats)
                val number = when (value) {
                    is Long -> value // a ULong is a Long on the JVM too
                    is Int -> value.toLong()
                    else -> continue
                }
                // Getters of ULong properties carry a mangled suffix (`getLinesIn-s-VKNKU`).
                val property = m.name.removePrefix("get").substringBefore('-')
                put(snake(property.replaceFirstChar { it.lowercase() }), number)
            }
        }
    }

    private fun bind(text: String, ids: Map<String, String>): String =
        ids.entries.fold(text) { s, (name, id) -> s.replace("{$name}", id) }

    private fun bind(node: JsonNode, ids: Map<String, String>): JsonNode =
        mapper.readTree(bind(node.toString(), ids))

    private fun runExchange(exchange: JsonNode) {
        val name = exchange["name"].asText()
        val config = oa1ConfigFromJson(exchange["config"].toString())
        val client = if (exchange["endpoint"].asText() == "client") Oa1Client(config, exchange["seed"].asLong()) else null
        val server = if (client == null) Oa1Server(config) else null
        val ids = HashMap<String, String>()
        for ((index, raw) in exchange["steps"].withIndex()) {
            val step = bind(raw, ids)
            val now = step["at"].asLong()
            val at = "$name, step $index ($raw)"
            when {
                step.has("line") -> {
                    val line = step["line"].asText().toByteArray()
                    client?.handleLine(now, line) ?: server!!.handleLine(now, line)
                }
                step.has("poll") -> {
                    val expected = step["poll"].toList()
                    val got = mutableListOf<JsonNode>()
                    while (true) {
                        val out = client?.pollOutput(now) ?: server!!.pollOutput(now)
                        got.add(when (out) {
                            is Oa1Output.Transmit -> json.objectNode().put("transmit", out.line)
                            is Oa1Output.Timeout -> json.objectNode().put("timeout", out.deadlineMs)
                            is Oa1Output.Event -> json.objectNode().set<JsonNode>("event", eventJson(out.event, expected.getOrNull(got.size)))
                        })
                        assertTrue(got.size <= expected.size + 50, "$at: poll does not end")
                        if (out is Oa1Output.Timeout) break
                    }
                    assertSameJson(json.arrayNode().addAll(expected), json.arrayNode().addAll(got), at)
                }
                step.has("stats") -> {
                    val stats = statsJson(client?.stats() ?: server!!.stats())
                    for ((counter, value) in step["stats"].properties()) {
                        assertTrue(stats.has(counter), "$at: unknown counter $counter in $stats")
                        assertSameJson(value, stats[counter], "$at: $counter")
                    }
                }
                else -> {
                    val error = try {
                        call(client, server, now, step, ids)
                        null
                    } catch (e: DeskwireException.Misuse) {
                        snake(e.kind)
                    }
                    assertEquals(step["expect_error"]?.asText(), error, at)
                }
            }
        }
    }

    private fun call(client: Oa1Client?, server: Oa1Server?, now: Long, step: JsonNode, ids: MutableMap<String, String>) {
        fun s(node: JsonNode, key: String) = node[key].asText()
        when {
            step.has("request") -> {
                val r = step["request"]
                val id = client!!.request(now, s(r, "payload"), r["timeout_ms"]?.asLong())
                step["bind"]?.let { ids[it.asText()] = id }
            }
            step.has("cancel") -> client!!.cancel(now, s(step["cancel"], "id"), s(step["cancel"], "reason"))
            step.has("send") -> server!!.send(now, s(step["send"], "id"), s(step["send"], "text"))
            step.has("finish") -> server!!.finish(now, s(step["finish"], "id"))
            step.has("respond") -> server!!.respond(now, s(step["respond"], "id"), s(step["respond"], "text"))
            step.has("fail") -> server!!.fail(now, s(step["fail"], "id"), s(step["fail"], "code"), s(step["fail"], "message"))
            else -> fail("unknown step $step")
        }
    }

    // ---------------------------------------------------------------------------------------------
    // IRC and JSON-RPC

    @TestFactory
    fun irc(): List<DynamicTest> = dynamic("irc-msg-split", load("irc-msg-split.json")["tests"].toList()) {
        val atoms = it["atoms"]
        val m = ircParseLine(it["input"].asText().toByteArray())
        assertEquals(atoms["verb"].asText(), m.command)
        assertEquals(atoms["source"]?.asText(), m.source)
        assertEquals(atoms["params"]?.map { p -> p.asText() } ?: emptyList(), m.params)
        val tags = atoms["tags"]?.properties()?.associate { (k, v) -> k to v.asText() } ?: emptyMap()
        assertEquals(tags, m.tags)
    }

    @TestFactory
    fun jsonrpc(): List<DynamicTest> {
        val doc = load("jsonrpc.json")
        val limit = doc["batch_limit"].asLong().toULong()
        return dynamic("jsonrpc", cases(doc, "cases")) { case ->
            val input = case["input"]?.asText()?.toByteArray()
                ?: case["input_hex"].asText().chunked(2).map { it.toInt(16).toByte() }.toByteArray()
            val expect = case["expect"]
            when (val parsed = parseJsonRpc(input, limit)) {
                is JsonRpcParsed.Invalid -> checkInvalid(parsed.invalid, expect)
                is JsonRpcParsed.Batch -> {
                    assertEquals("batch", expect["kind"].asText())
                    val elements = expect["elements"].toList()
                    assertEquals(elements.size, parsed.items.size)
                    for ((item, e) in parsed.items.zip(elements)) when (item) {
                        is JsonRpcBatchItem.Message -> checkMessage(item.message, e, limit)
                        is JsonRpcBatchItem.Invalid -> checkInvalid(item.invalid, e)
                    }
                }
                is JsonRpcParsed.Single -> checkMessage(parsed.message, expect, limit)
            }
        }
    }

    private fun idJson(id: JsonRpcId): JsonNode = when (id) {
        is JsonRpcId.Number -> json.numberNode(id.value)
        is JsonRpcId.Text -> json.textNode(id.value)
        JsonRpcId.Null -> json.nullNode()
    }

    private fun checkInvalid(invalid: JsonRpcInvalid, expect: JsonNode) {
        assertEquals("invalid", expect["kind"].asText(), invalid.reason)
        assertEquals(expect["code"].asLong(), invalid.code)
        assertSameJson(expect["id"], idJson(invalid.id), "id of the error answer")
    }

    private fun checkMessage(m: JsonRpcMessage, expect: JsonNode, limit: ULong) {
        val kind = expect["kind"].asText()
        when (m) {
            is JsonRpcMessage.Request -> {
                assertEquals("request", kind); assertSameJson(expect["id"], idJson(m.id), "id")
                assertEquals(expect["method"].asText(), m.method); assertEquals(expect["params"]?.asText(), m.paramsJson)
            }
            is JsonRpcMessage.Notification -> {
                assertEquals("notification", kind)
                assertEquals(expect["method"].asText(), m.method); assertEquals(expect["params"]?.asText(), m.paramsJson)
            }
            is JsonRpcMessage.Response -> {
                assertEquals("response", kind); assertSameJson(expect["id"], idJson(m.id), "id")
                assertEquals(expect["result"].asText(), m.resultJson)
            }
            is JsonRpcMessage.Error -> {
                assertEquals("error", kind); assertSameJson(expect["id"], idJson(m.id), "id")
                assertEquals(expect["code"].asLong(), m.error.code)
            }
        }
        expect["canonical"]?.asText()?.let { canonical ->
            assertEquals(canonical, jsonRpcMessageToJson(m), "written form")
            assertEquals(JsonRpcParsed.Single(m), parseJsonRpc(canonical.toByteArray(), limit), "read back")
        }
    }

    // ---------------------------------------------------------------------------------------------
    // Schema cases: rexd, sidecar, gateway, mobile

    private fun schemaCases(protocol: String): List<DynamicTest> {
        val doc = load("$protocol.json")
        assertEquals(protocol, doc["protocol"].asText())
        return dynamic(protocol, cases(doc, "cases")) { case ->
            val def = case["def"].asText()
            val text = case["json"].toString()
            if (case["valid"].asBoolean()) {
                val back = mapper.readTree(readSchemaValue(protocol, def, text))
                assertSameJson(case["canonical"] ?: case["json"], back, "written back")
            } else {
                assertThrows<DeskwireException.InvalidInput> { readSchemaValue(protocol, def, text) }
            }
            if (protocol == "mobile") typedMobile(def, case)
        }
    }

    private val serverDefs = setOf(
        "ServerMessage", "AuthResultMessage", "AgentStateUpdateMessage", "ServerChatMessage",
        "PermissionRequestMessage", "TaskUpdateMessage", "PingMessage",
    )
    private val clientDefs = setOf(
        "ClientMessage", "AuthMessage", "CommandMessage", "ClientChatMessage", "PermissionResponseMessage", "PongMessage",
    )

    /** Whole mobile messages also through the typed API the phone and the desktop use. */
    private fun typedMobile(def: String, case: JsonNode) {
        val text = case["json"].toString()
        val expected = case["canonical"] ?: case["json"]
        val valid = case["valid"].asBoolean()
        val roundTrip: ((String) -> String)? = when (def) {
            in serverDefs -> { t -> serverMessageToJson(parseServerMessage(t)) }
            in clientDefs -> { t -> clientMessageToJson(parseClientMessage(t)) }
            "AgentState" -> { t -> agentStateToJson(parseAgentState(t)) }
            else -> null
        }
        if (roundTrip == null) return
        if (valid) {
            assertSameJson(expected, mapper.readTree(roundTrip(text)), "typed round trip")
        } else if (def in setOf("ServerMessage", "ClientMessage", "AgentState")) {
            assertThrows<DeskwireException.InvalidInput> { roundTrip(text) }
        }
    }

    @TestFactory fun mobile() = schemaCases("mobile")
    @TestFactory fun rexd() = schemaCases("rexd")
    @TestFactory fun sidecar() = schemaCases("sidecar")
    @TestFactory fun gatewayCases() = schemaCases("gateway")

    // ---------------------------------------------------------------------------------------------
    // Gateway sequences through the engine

    @TestFactory
    fun gatewaySequences(): List<DynamicTest> = dynamic("gateway sequences", cases(load("gateway.json"), "sequences")) { seq ->
        val name = seq["name"].asText()
        val unixMs = Instant.parse(seq["ts"].asText()).toEpochMilli().toULong()
        val overrides = seq["config"]?.toString() ?: "{}"
        val config = gatewayConfigFromJson(overrides).copy(tokens = listOf("s3cr3t-token"))
        val gw = Gateway(config, 0uL, ByteArray(32))
        var now = 0uL
        for ((i, step) in seq["steps"].withIndex()) {
            val at = "$name step $i"
            step["now_ms"]?.let { now = it.asLong().toULong() }
            if (step.has("in")) {
                gw.handleMessage(now, 1uL, step["in"].toString().toByteArray())
            } else {
                val h = step["host"]
                val job = h["jobId"]?.asText() ?: ""
                val before = gw.jobState(job)
                val error = try {
                    now = host(gw, now, h, job)
                    null
                } catch (e: DeskwireException.Misuse) {
                    e
                }
                val expected = step["error"]
                if (expected == null) {
                    assertEquals(null, error, at)
                } else {
                    assertEquals(ErrorKind.TRANSITION, error?.kind, "$at: ${error?.detail}")
                    assertEquals(expected["from"].asText(), before?.name, at)
                    assertEquals(before, gw.jobState(job), "$at: an illegal move changes nothing")
                }
            }
            val out = json.arrayNode()
            while (true) {
                when (val o = gw.pollOutput(now, unixMs)) {
                    is GatewayOutput.Transmit -> { assertEquals(1uL, o.conn); out.add(mapper.readTree(o.text)) }
                    is GatewayOutput.Event -> {}
                    is GatewayOutput.Timeout -> break
                }
            }
            assertSameJson(step["out"], out, at)
        }
    }

    /** One executor call of a sequence; returns the clock (a `timeout` step moves it). */
    private fun host(gw: Gateway, now: ULong, h: JsonNode, job: String): ULong {
        fun s(k: String) = h[k]?.asText() ?: ""
        when (h["action"].asText()) {
            "progress" -> gw.setProgress(job, h["step"]?.takeIf { !it.isNull }?.asText(), h["progress"]?.takeIf { !it.isNull }?.asDouble())
            "log" -> gw.log(job, GatewayLevel.valueOf(s("level").uppercase()), s("msg"))
            "review_ready" -> gw.reviewReady(now, job, h["artifacts"].toString())
            "complete" -> gw.complete(now, job, h["artifacts"]?.toString())
            "fail" -> {
                val body = h["error_body"]
                gw.fail(now, job, GatewayErrorBody(body["code"].asText(), body["message"].asText(), body["details"]?.takeIf { !it.isNull }?.toString()))
            }
            "roll_back" -> gw.rollBack(now, job)
            "cancel" -> gw.cancel(now, job)
            "transition" -> gw.transition(now, job, GatewayJobState.valueOf(s("to")))
            "request_approval" -> {
                val ticket = gw.requestApproval(job, h["approvalId"]?.asText(), s("kind"), s("requested"))
                assertEquals(h["status"]?.asText()?.uppercase() ?: "PENDING", ticket.status.name)
                h["approvalId"]?.let { assertEquals(it.asText(), ticket.approvalId) }
            }
            "authenticate" -> assertEquals(h["accepted"].asBoolean(), gw.authenticateConnection(1uL, s("token")))
            "close" -> gw.closeConnection(1uL)
            "timeout" -> {
                val at = h["now_ms"].asLong().toULong()
                gw.handleTimeout(at)
                return at
            }
            else -> fail("unknown host action $h")
        }
        return now
    }

    // ---------------------------------------------------------------------------------------------
    // Tools

    @TestFactory
    fun tools(): List<DynamicTest> {
        val doc = load("tools.json")
        val policy = doc["policy"].toString()
        return dynamic("tools", cases(doc, "cases")) { case ->
            val toolbox = Toolbox(policy, 0uL)
            val got: JsonNode = when (case["kind"].asText()) {
                "authorize" -> {
                    val agent = case["agent"].asText()
                    toolbox.setContext(agent, context(case["context"]))
                    val c = case["call"]
                    val call = ToolCall(c["id"].asText(), c["name"].asText(), c["args"].toString())
                    val origin = if (case["origin"]?.asText() == "user") ToolOrigin.USER else ToolOrigin.MODEL
                    authorizationJson(toolbox.authorize(agent, call, origin))
                }
                "slash" -> try {
                    val call = toolbox.parseSlash(case["line"].asText(), 0uL)
                    json.objectNode().put("name", call.name).set("args", mapper.readTree(call.argsJson))
                } catch (e: DeskwireException.InvalidInput) {
                    json.objectNode().put("error", snake(e.kind))
                }
                "visible" -> {
                    val agent = case["agent"].asText()
                    toolbox.setContext(agent, context(case["context"]))
                    json.arrayNode().apply { toolbox.visibleTools(agent).forEach { add(it.name) } }
                }
                else -> fail("unknown kind ${case["kind"]}")
            }
            assertSameJson(case["expect"], got, case["name"].asText())
        }
    }

    private fun context(c: JsonNode?): ToolContext = ToolContext(
        boundNpcId = c?.get("bound_npc_id")?.asText(),
        target = c?.get("target")?.asText(),
        cwd = c?.get("cwd")?.asText(),
        flags = c?.get("flags")?.map { it.asText() } ?: emptyList(),
    )

    private fun authorizationJson(a: ToolAuthorization): JsonNode = json.objectNode().apply {
        when (a) {
            ToolAuthorization.Allowed -> put("kind", "allowed")
            is ToolAuthorization.NeedsApproval -> put("kind", "needs_approval").put("tier", a.tier.name.lowercase())
            is ToolAuthorization.Unknown -> put("kind", "unknown").put("observation", a.observation)
            is ToolAuthorization.Denied -> {
                put("kind", "denied").put("observation", a.observation)
                when (val r = a.reason) {
                    ToolDenyReason.NotVisible -> put("reason", "not_visible")
                    is ToolDenyReason.InvalidArguments -> put("reason", "invalid_arguments").put("message", r.detail)
                    is ToolDenyReason.Policy -> put("reason", "policy").put("message", r.reason)
                }
            }
        }
    }

    // ---------------------------------------------------------------------------------------------
    // Providers: tool fields out, responses (whole and streamed) in, the next turn out again.
    // Every case runs. The Rust runner also checks each `request` expectation against
    // providers/schemas/<provider>.request.schema.json; that checks the fixture itself, and the
    // Kotlin output is compared with the same fixture here.

    @TestFactory fun openaiChat() = providerCases(Provider.OPENAI_CHAT)
    @TestFactory fun openaiResponses() = providerCases(Provider.OPENAI_RESPONSES)
    @TestFactory fun anthropic() = providerCases(Provider.ANTHROPIC)
    @TestFactory fun gemini() = providerCases(Provider.GEMINI)

    private fun providerCases(provider: Provider): List<DynamicTest> {
        val name = provider.name.lowercase()
        val doc = load("providers/$name.json")
        assertEquals(name, doc["provider"].asText())
        return dynamic("providers/$name", cases(doc, "cases")) { case ->
            val seed = case["seed"]?.asLong()?.toULong() ?: 0uL
            val got: ObjectNode = when (val kind = case["kind"].asText()) {
                "request" -> json.objectNode().set("expect", mapper.readTree(providerRequestTools(provider, toolRequest(case))))
                "response" -> {
                    val body = case["body"].let { if (it.isTextual) it.asText() else it.toString() }
                    outcome { providerParseResponse(provider, body.toByteArray(), seed) }
                }
                "stream" -> stream(provider, case, seed)
                "echo" -> {
                    val previous = responseOf(case["response"])
                    val results = case["results"].map { ToolResult(it["callId"].asText(), it["content"].asText(), it["isError"]?.asBoolean() ?: false) }
                    val assistant = mapper.readTree(providerAssistantTurn(provider, previous))
                    val back = try {
                        mapper.readTree(providerToolResults(provider, previous, results))
                    } catch (e: DeskwireException.InvalidInput) {
                        assertEquals(ErrorKind.UNKNOWN_CALL, e.kind)
                        json.objectNode().put("error", e.detail)
                    }
                    json.objectNode().set("expect", json.objectNode().set<ObjectNode>("assistant", assistant).set("results", back))
                }
                else -> fail("unknown kind $kind")
            }
            for (key in listOf("expect", "error")) {
                assertSameJson(case[key] ?: json.nullNode(), got[key] ?: json.nullNode(), "${case["name"].asText()}: $key")
            }
        }
    }

    private fun spec(s: JsonNode) = ToolSpec(s["name"].asText(), s["description"].asText(), s["input_schema"].toString())

    private fun toolRequest(case: JsonNode) = ProviderToolRequest(
        tools = case["tools"].map(::spec),
        choice = when (val c = case["choice"]) {
            null, is com.fasterxml.jackson.databind.node.NullNode -> ToolChoice.Auto
            else -> if (c.isObject) ToolChoice.Tool(c["tool"].asText()) else when (c.asText()) {
                "auto" -> ToolChoice.Auto
                "none" -> ToolChoice.None
                "required" -> ToolChoice.Required
                else -> fail("bad choice $c")
            }
        },
        catalog = case["catalog"]?.map(::spec),
        parallelToolCalls = case["parallel_tool_calls"]?.takeIf { !it.isNull }?.asBoolean(),
        strict = case["strict"]?.asBoolean() ?: false,
    )

    /** `{"expect": response}` or `{"error": kind}` with the vectors' names (the core's variants). */
    private fun outcome(parse: () -> ProviderResponse): ObjectNode = try {
        json.objectNode().set("expect", responseJson(parse()))
    } catch (e: DeskwireException.Remote) {
        assertEquals(ErrorKind.PROVIDER, e.kind, "only the provider's own error is Remote")
        json.objectNode().put("error", variant(e.kind))
    } catch (e: DeskwireException.InvalidInput) {
        json.objectNode().put("error", variant(e.kind))
    }

    /** The events as a server-sent event stream, as the Rust runner writes them. */
    private fun sseText(provider: Provider, events: JsonNode): ByteArray = buildString {
        for (e in events) {
            val type = e["type"]?.takeIf { it.isTextual }?.asText()
            if (type != null && (provider == Provider.ANTHROPIC || provider == Provider.OPENAI_RESPONSES)) append("event: $type\n")
            append("data: $e\n\n")
        }
        if (provider == Provider.OPENAI_CHAT) append("data: [DONE]\n\n")
    }.toByteArray()

    private fun streamed(provider: Provider, seed: ULong, pieces: List<ByteArray>): ObjectNode = outcome {
        ProviderStreamParser(provider, seed).use { parser ->
            pieces.forEach(parser::feed)
            parser.finish()
        }
    }

    /** Whole, one byte at a time, and cut in two at every position: each gives the same. */
    private fun stream(provider: Provider, case: JsonNode, seed: ULong): ObjectNode {
        val bytes = sseText(provider, case["events"])
        val whole = streamed(provider, seed, listOf(bytes))
        val byByte = streamed(provider, seed, bytes.map { byteArrayOf(it) })
        assertSameJson(whole, byByte, "one byte at a time")
        for (cut in 0..bytes.size) {
            val two = streamed(provider, seed, listOf(bytes.copyOfRange(0, cut), bytes.copyOfRange(cut, bytes.size)))
            assertSameJson(whole, two, "cut at $cut")
        }
        return whole
    }

    /** A response as the protocol's JSON (`{"segments": [...], "stop_reason"?}`). */
    private fun responseJson(r: ProviderResponse): ObjectNode = json.objectNode().apply {
        val segments = putArray("segments")
        for (s in r.segments) segments.addObject().apply {
            when (s) {
                is ResponseSegment.Text -> put("type", "text").put("text", s.text)
                is ResponseSegment.ToolCall -> put("type", "tool_call").putObject("toolCall").apply {
                    val c = s.call
                    put("id", c.id).put("name", c.name).set<JsonNode>("args", mapper.readTree(c.argsJson))
                    c.itemId?.let { put("itemId", it) }
                    c.thoughtSignature?.let { put("thoughtSignature", it) }
                    if (c.idGenerated) put("idGenerated", true)
                }
                is ResponseSegment.InvalidToolCall -> put("type", "invalid_tool_call").putObject("invalidToolCall").apply {
                    val c = s.call
                    put("id", c.id).put("name", c.name).put("arguments", c.arguments).put("error", c.error)
                    c.itemId?.let { put("itemId", it) }
                }
                is ResponseSegment.Reasoning -> put("type", "reasoning").set<JsonNode>("raw", mapper.readTree(s.rawJson))
            }
        }
        r.stopReason?.let { put("stop_reason", it) }
    }

    /** The protocol's JSON as a response record (what an app keeps of the previous turn). */
    private fun responseOf(v: JsonNode) = ProviderResponse(
        segments = v["segments"].map { s ->
            when (s["type"].asText()) {
                "text" -> ResponseSegment.Text(s["text"].asText())
                "tool_call" -> s["toolCall"].let { c ->
                    ResponseSegment.ToolCall(
                        ToolCall(
                            c["id"].asText(), c["name"].asText(), c["args"].toString(),
                            itemId = c["itemId"]?.asText(), thoughtSignature = c["thoughtSignature"]?.asText(),
                            idGenerated = c["idGenerated"]?.asBoolean() ?: false,
                        ),
                    )
                }
                "invalid_tool_call" -> s["invalidToolCall"].let { c ->
                    ResponseSegment.InvalidToolCall(
                        InvalidToolCall(c["id"].asText(), c["name"].asText(), c["arguments"].asText(), c["error"].asText(), c["itemId"]?.asText()),
                    )
                }
                "reasoning" -> ResponseSegment.Reasoning(s["raw"].toString())
                else -> fail("unknown segment $s")
            }
        },
        stopReason = v["stop_reason"]?.asText(),
    )
}
