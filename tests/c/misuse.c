/* Misuse and bad input through the C API: nothing may crash, every call answers its status.
 *
 * - generated_misuse() (target/c/misuse_generated.c, from tests/c/gen_misuse.py): NULL for every
 *   pointer parameter, invalid UTF-8 in every string, malformed JSON in every JSON input,
 *   too-small buffers that report the size needed, for every function of the header;
 * - by hand: many desks on one connection (unknown channels, chat text refused, "OA1 "),
 *   values outside their domain, JSON of the wrong shape, a call after the stream
 *   parser finished, calls on a desk or remote after _quit or EOF (refused, kind "closed"),
 *   dw_last_error() cleared by a success, a misaligned float buffer, and panics: a call that
 *   panics answers DW_STATUS_PANIC and poisons its handle (every later call answers
 *   DW_STATUS_POISONED, _free still works); a panic in a call without a handle leaves nothing
 *   poisoned.
 *
 * Built with the library's `testing` feature (dw_testing_panic, not in the header).
 */
#include "common.h"

#include <math.h>
#include <stdint.h>

void dw_testing_panic(void);

#define BAD_UTF8 "\xff\xfe"
#define BAD_JSON "{\"a\":"
#define FRAME "{\"jsonrpc\":\"2.0\",\"method\":\"m\"}"
#define BODY "{\"choices\":[{\"message\":{\"role\":\"assistant\",\"content\":\"hi\"}}]}"
#define SPECS "[{\"name\":\"read\",\"description\":\"Read a file\",\"input_schema\":{\"type\":\"object\"}}]"

static uint8_t entropy[DW_ENTROPY_LEN];
static const float floats[2] = {0.5f, 0.25f};

static dw_desk *h_desk, *tmp_desk;
static dw_remote *h_remote, *tmp_remote;
static dw_oa1_client *h_oa1_client, *tmp_oa1_client;
static dw_oa1_server *h_oa1_server, *tmp_oa1_server;
static dw_irc_session *h_irc_session, *tmp_irc_session;
static dw_peer *h_peer, *tmp_peer;
static dw_gateway *h_gateway, *tmp_gateway;
static dw_mobile_client *h_mobile_client, *tmp_mobile_client;
static dw_mobile_server *h_mobile_server, *tmp_mobile_server;
static dw_toolbox *h_toolbox, *tmp_toolbox;
static dw_stream_parser *h_stream_parser, *tmp_stream_parser;
static dw_tool_index *h_tool_index, *tmp_tool_index;
static dw_sim_network *h_sim_network, *tmp_sim_network;
static dw_multi_desk *h_multi_desk, *tmp_multi_desk;

static dw_output o_output;
static dw_str o_str;
static bool o_bool;
static uint64_t o_u64;
static dw_ending o_ending;
static size_t o_len;
static char o_buf[4096];

#include "misuse_generated.c"

static void setup(void) {
    for (size_t i = 0; i < sizeof entropy; i++) {
        entropy[i] = (uint8_t)(255 - i);
    }
    CHECK_OK(dw_desk_new("{\"nick\":\"d\",\"channel\":\"#d\",\"oa1\":{\"allowed_sender\":\"r\"}}", 0, 1, &h_desk), dw_last_error(), "desk");
    CHECK_OK(dw_remote_new("{\"nick\":\"r\",\"channel\":\"#d\"}", 0, &h_remote), dw_last_error(), "remote");
    CHECK_OK(dw_oa1_client_new("{\"channel\":\"#d\",\"nick\":\"c\"}", 1, &h_oa1_client), dw_last_error(), "client");
    CHECK_OK(dw_oa1_server_new("{\"channel\":\"#d\",\"nick\":\"s\"}", &h_oa1_server), dw_last_error(), "server");
    CHECK_OK(dw_irc_session_new("{\"nick\":\"n\",\"channels\":[\"#d\"]}", 0, &h_irc_session), dw_last_error(), "irc");
    CHECK_OK(dw_peer_new(DW_DIALECT_JSONRPC2, NULL, 1, &h_peer), dw_last_error(), "peer");
    CHECK_OK(dw_gateway_new("{\"tokens\":[\"t\"]}", 0, entropy, 0, &h_gateway), dw_last_error(), "gateway");
    CHECK_OK(dw_mobile_client_new(NULL, NULL, &h_mobile_client), dw_last_error(), "phone");
    CHECK_OK(dw_mobile_server_new(NULL, entropy, &h_mobile_server), dw_last_error(), "mobile server");
    CHECK_OK(dw_toolbox_new(NULL, NULL, true, 1, &h_toolbox), dw_last_error(), "toolbox");
    CHECK_OK(dw_stream_parser_new(DW_PROVIDER_ANTHROPIC, NULL, 1, &h_stream_parser), dw_last_error(), "stream");
    CHECK_OK(dw_tool_index_new(SPECS, &h_tool_index), dw_last_error(), "index");
    CHECK_OK(dw_sim_network_new(1, 0, &h_sim_network), dw_last_error(), "network");
    uint64_t client;
    CHECK_OK(dw_sim_network_connect(h_sim_network, "h", &client), dw_sim_network_last_error(h_sim_network), "client");
    CHECK(client == 0, "the first client is 0");
    CHECK_OK(dw_multi_desk_new("{\"nick\":\"m\",\"channel\":\"\"}", 0, 1, &h_multi_desk), dw_last_error(), "multi desk");
    CHECK_OK(dw_multi_desk_add_desk(h_multi_desk, 0, "#x", "r"), dw_multi_desk_last_error(h_multi_desk), "desk #x");
}

static void teardown(void) {
    dw_desk_free(h_desk);
    dw_remote_free(h_remote);
    dw_oa1_client_free(h_oa1_client);
    dw_oa1_server_free(h_oa1_server);
    dw_irc_session_free(h_irc_session);
    dw_peer_free(h_peer);
    dw_gateway_free(h_gateway);
    dw_mobile_client_free(h_mobile_client);
    dw_mobile_server_free(h_mobile_server);
    dw_toolbox_free(h_toolbox);
    dw_stream_parser_free(h_stream_parser);
    dw_tool_index_free(h_tool_index);
    dw_sim_network_free(h_sim_network);
    dw_multi_desk_free(h_multi_desk);
}

/* Values outside their domain, and JSON that parses but has the wrong shape. */
static void domain(void) {
    dw_peer *peer = NULL;
    CHECK(dw_peer_new(99, NULL, 1, &peer) == DW_STATUS_INVALID_ARGUMENT && peer == NULL, "unknown dialect");
    CHECK(strcmp(dw_last_error_kind(), "invalid_argument") == 0, "kind %s", dw_last_error_kind());
    CHECK(dw_peer_new(DW_DIALECT_SIDECAR, "{\"framing\":\"carrier-pigeon\"}", 1, &peer) == DW_STATUS_INVALID_JSON,
          "unknown framing");
    CHECK(dw_peer_new(DW_DIALECT_SIDECAR, "[]", 1, &peer) == DW_STATUS_INVALID_JSON, "a config array");
    CHECK(dw_peer_new(DW_DIALECT_SIDECAR, "{\"max_pending\":-1}", 1, &peer) == DW_STATUS_INVALID_JSON, "negative");
    CHECK(peer == NULL, "nothing written on failure");

    size_t n = 0;
    CHECK(dw_provider_request_tools(0, "{\"tools\":[]}", o_buf, sizeof o_buf, &n) == DW_STATUS_INVALID_ARGUMENT,
          "provider 0");
    CHECK(dw_provider_request_tools(5, "{\"tools\":[]}", o_buf, sizeof o_buf, &n) == DW_STATUS_INVALID_ARGUMENT,
          "provider 5");
    dw_str view = {NULL, 0};
    CHECK(dw_toolbox_authorize(h_toolbox, "npc", "{\"id\":\"c\",\"name\":\"read\",\"args\":{}}", 7, &view) ==
              DW_STATUS_INVALID_ARGUMENT && view.ptr == NULL,
          "origin 7");
    CHECK(dw_toolbox_register(h_toolbox, "{\"name\":\"bad name!\",\"description\":\"d\",\"input_schema\":{\"type\":\"object\"}}", NULL) ==
              DW_STATUS_INVALID_ARGUMENT,
          "a tool name providers refuse");
    CHECK(dw_toolbox_register(h_toolbox, "{\"name\":\"x\",\"description\":\"d\",\"input_schema\":{\"type\":\"string\"}}", NULL) ==
              DW_STATUS_INVALID_ARGUMENT,
          "a schema that is not an object");
    CHECK(dw_toolbox_set_context(h_toolbox, "npc", "{\"bound_npc\":\"x\"}") == DW_STATUS_INVALID_JSON,
          "an unknown context member");
    CHECK(dw_toolbox_add_rule(h_toolbox, "{\"tool\":\"*\",\"when\":{\"outside\":[\"relative\"]},\"action\":\"allow\"}") ==
              DW_STATUS_INVALID_ARGUMENT,
          "a relative root");
    CHECK(dw_tool_index_top_n_hybrid(h_tool_index, "read", 3, "\"none\"", NAN, &view) == DW_STATUS_INVALID_ARGUMENT,
          "a NaN weight");
    CHECK(dw_gateway_transition(h_gateway, 0, "j1", "SLEEPING") == DW_STATUS_INVALID_ARGUMENT, "an unknown state");
    CHECK(dw_gateway_log(h_gateway, "j1", "loud", "x") == DW_STATUS_INVALID_ARGUMENT, "an unknown level");
    CHECK(dw_gateway_set_progress(h_gateway, "j1", NULL, 2.0) == DW_STATUS_REFUSED, "progress 2");
    CHECK(dw_sim_network_handle_bytes(h_sim_network, 99, (const uint8_t *)"x", 1) == DW_STATUS_INVALID_ARGUMENT,
          "an unknown client");
    CHECK(dw_schema_read("smtp", "Mail", "{}", o_buf, sizeof o_buf, &n) == DW_STATUS_INVALID_ARGUMENT, "unknown protocol");
    CHECK(dw_schema_read("mobile", "Mail", "{}", o_buf, sizeof o_buf, &n) == DW_STATUS_INVALID_ARGUMENT, "unknown def");
    CHECK(dw_oa1_frame_format("{\"type\":\"NOPE\",\"id\":\"a\",\"seq\":1,\"more\":false,\"payload\":\"\"}", o_buf,
                              sizeof o_buf, &n) == DW_STATUS_INVALID_JSON,
          "an unknown frame type");
    CHECK(dw_desk_remote_bash(h_desk, 0, "{\"command\":\"ls\",\"timeout_sec\":0}", &view) == DW_STATUS_INVALID_ARGUMENT,
          "timeout_sec 0");
    CHECK(dw_desk_remote_bash(h_desk, 0, "{\"cmd\":\"ls\"}", &view) == DW_STATUS_INVALID_JSON, "no command");
    CHECK(dw_desk_remote_bash(h_desk, 0, "{\"command\":\" \\n\"}", &view) == DW_STATUS_INVALID_ARGUMENT &&
              strstr(dw_desk_last_error(h_desk), "the command is empty") != NULL,
          "an empty command");
    CHECK(dw_desk_remote_bash(h_desk, 0, "{\"command\":\"ls\\u0000\"}", &view) == DW_STATUS_INVALID_ARGUMENT &&
              strstr(dw_desk_last_error(h_desk), "NUL byte at byte 2") != NULL,
          "a command with a NUL byte");

    /* The IRC session names its refusals as the desks do: the caller's values, or its state. */
    CHECK(dw_irc_session_join(h_irc_session, "nochan") == DW_STATUS_INVALID_ARGUMENT &&
              strcmp(dw_irc_session_last_error_kind(h_irc_session), "invalid_channel") == 0,
          "a channel name without #: %s", dw_irc_session_last_error_kind(h_irc_session));
    CHECK(dw_irc_session_privmsg(h_irc_session, "#d", "hi") == DW_STATUS_REFUSED &&
              strcmp(dw_irc_session_last_error_kind(h_irc_session), "not_registered") == 0,
          "a message before registration: %s", dw_irc_session_last_error_kind(h_irc_session));

    /* A finished stream takes no more input. */
    dw_stream_parser *p = NULL;
    CHECK_OK(dw_stream_parser_new(DW_PROVIDER_OPENAI_CHAT, NULL, 1, &p), dw_last_error(), "parser");
    const char *done = "data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n";
    CHECK_OK(dw_stream_parser_feed(p, (const uint8_t *)done, strlen(done)), dw_stream_parser_last_error(p), "feed");
    CHECK_OK(dw_stream_parser_finish(p, &view), dw_stream_parser_last_error(p), "finish");
    CHECK(dw_stream_parser_feed(p, (const uint8_t *)"data: {}\n\n", 10) == DW_STATUS_REFUSED, "feed after finish");
    CHECK(dw_stream_parser_finish(p, &view) == DW_STATUS_REFUSED, "finish twice");
    dw_stream_parser_free(p);

    /* Garbage bytes are input, not misuse: they are taken and counted. */
    uint8_t garbage[4096];
    for (size_t i = 0; i < sizeof garbage; i++) {
        garbage[i] = (uint8_t)(i * 131 + 7);
    }
    CHECK_OK(dw_desk_handle_bytes(h_desk, 0, garbage, sizeof garbage), dw_desk_last_error(h_desk), "garbage");
    CHECK_OK(dw_peer_handle_bytes(h_peer, 0, garbage, sizeof garbage), dw_peer_last_error(h_peer), "garbage");
    CHECK_OK(dw_gateway_handle_message(h_gateway, 0, 1, garbage, sizeof garbage), dw_gateway_last_error(h_gateway), "garbage");
    CHECK(dw_irc_parse_line(garbage, sizeof garbage, o_buf, sizeof o_buf, &n) == DW_STATUS_MALFORMED ||
              dw_irc_parse_line(garbage, sizeof garbage, o_buf, sizeof o_buf, &n) == DW_STATUS_OK,
          "a garbage line is an answer, not a crash");
    CHECK(dw_provider_parse_response(DW_PROVIDER_GEMINI, garbage, sizeof garbage, 1, o_buf, sizeof o_buf, &n) ==
              DW_STATUS_MALFORMED,
          "a garbage body");
    CHECK(strcmp(dw_last_error_kind(), "not_json") == 0, "kind %s", dw_last_error_kind());
}

/* dw_last_error() describes the last call without a handle: a success clears it, as a
 * handle's last error is cleared. */
static void last_error_clears(void) {
    size_t n;
    dw_peer *peer = NULL;
    CHECK(dw_peer_new(99, NULL, 1, &peer) == DW_STATUS_INVALID_ARGUMENT, "unknown dialect");
    CHECK(dw_last_error()[0] != 0 && strcmp(dw_last_error_kind(), "invalid_argument") == 0, "the failure is kept");
    CHECK_OK(dw_oa1_escape((const uint8_t *)"a", 1, o_buf, sizeof o_buf, &n), dw_last_error(), "escape");
    CHECK(strcmp(dw_last_error(), "") == 0 && strcmp(dw_last_error_kind(), "") == 0,
          "a success clears dw_last_error: \"%s\" (%s)", dw_last_error(), dw_last_error_kind());
    CHECK(dw_peer_new(99, NULL, 1, &peer) == DW_STATUS_INVALID_ARGUMENT, "unknown dialect");
    CHECK_OK(dw_peer_new(DW_DIALECT_JSONRPC2, NULL, 1, &peer), dw_last_error(), "peer");
    CHECK(strcmp(dw_last_error(), "") == 0 && strcmp(dw_last_error_kind(), "") == 0,
          "a constructor's success clears dw_last_error: \"%s\"", dw_last_error());
    dw_peer_free(peer);
}

/* A float buffer at an address floats cannot have is refused, not read. */
static void misaligned(void) {
    float values[3] = {0.5f, 0.25f, 0.125f};
    const float *odd = (const float *)(const void *)((const char *)values + 1);
    CHECK(dw_tool_index_set_embedding(h_tool_index, "read", odd, 1) == DW_STATUS_INVALID_ARGUMENT &&
              strstr(dw_tool_index_last_error(h_tool_index), "aligned") != NULL,
          "a misaligned float buffer: %s", dw_tool_index_last_error(h_tool_index));
    CHECK_OK(dw_tool_index_set_embedding(h_tool_index, "read", values, 3), dw_tool_index_last_error(h_tool_index),
             "an aligned one");
}

/* Embeddings the index could not compare are refused, not scored 0 in silence. */
static void embeddings(void) {
    dw_tool_index *ix = NULL;
    CHECK_OK(dw_tool_index_new("[{\"name\":\"read\",\"description\":\"Read a file\",\"input_schema\":{\"type\":\"object\"}},"
                               "{\"name\":\"write\",\"description\":\"Write a file\",\"input_schema\":{\"type\":\"object\"}}]",
                               &ix),
             dw_last_error(), "index");
    const float three[3] = {1.0f, 0.0f, 0.0f}, nan[2] = {1.0f, NAN};
    dw_str view = {NULL, 0};
    CHECK(dw_tool_index_top_n_hybrid(ix, "file", 2, "{\"query_embedding\":[1,0]}", 0.0, &view) == DW_STATUS_INVALID_ARGUMENT &&
              strstr(dw_tool_index_last_error(ix), "no tool has an embedding") != NULL,
          "a query embedding with none stored: %s", dw_tool_index_last_error(ix));
    CHECK(dw_tool_index_set_embedding(ix, "zz", floats, 2) == DW_STATUS_INVALID_ARGUMENT &&
              strstr(dw_tool_index_last_error(ix), "no tool named \"zz\"") != NULL,
          "a tool the index does not hold: %s", dw_tool_index_last_error(ix));
    CHECK(dw_tool_index_set_embedding(ix, "read", nan, 2) == DW_STATUS_INVALID_ARGUMENT &&
              strstr(dw_tool_index_last_error(ix), "value 1") != NULL,
          "a NaN: %s", dw_tool_index_last_error(ix));
    CHECK(dw_tool_index_set_embedding(ix, "read", floats, 0) == DW_STATUS_INVALID_ARGUMENT, "no values");
    CHECK_OK(dw_tool_index_set_embedding(ix, "read", floats, 2), dw_tool_index_last_error(ix), "read");
    CHECK(dw_tool_index_set_embedding(ix, "write", three, 3) == DW_STATUS_INVALID_ARGUMENT &&
              strstr(dw_tool_index_last_error(ix), "has 3 values; this index's embeddings have 2") != NULL,
          "another dimension: %s", dw_tool_index_last_error(ix));
    CHECK(dw_tool_index_top_n_hybrid(ix, "file", 2, "{\"query_embedding\":[1,2,3]}", 0.0, &view) == DW_STATUS_INVALID_ARGUMENT &&
              strstr(dw_tool_index_last_error(ix), "has 3 values") != NULL,
          "a query of another dimension: %s", dw_tool_index_last_error(ix));
    CHECK_OK(dw_tool_index_top_n_hybrid(ix, "file", 2, "{\"query_embedding\":[1,0.5]}", 0.0, &view),
             dw_tool_index_last_error(ix), "a query of the same dimension");
    CHECK(view.len > 0 && strstr(view.ptr, "\"read\"") != NULL, "ranked: %.*s", (int)view.len, view.ptr);
    dw_tool_index_free(ix);
}

#define CLOSED(type, h, call)                                                                      \
    do {                                                                                           \
        dw_status st_ = (call);                                                                    \
        CHECK(st_ == DW_STATUS_REFUSED && strcmp(dw_##type##_last_error_kind(h), "closed") == 0,    \
              #call ": %s, kind \"%s\"", dw_status_str(st_), dw_##type##_last_error_kind(h));      \
    } while (0)

/* Drains `desk` at `now`: the bytes it transmits into `sent` (NUL-terminated), and the failure
 * event of request `id`, if one came, into *failed (decref it). */
static void drain_desk(dw_desk *desk, uint64_t now, char *sent, size_t cap, const char *id, json_t **failed) {
    size_t used = 0;
    dw_output out;
    for (;;) {
        CHECK_OK(dw_desk_poll_output(desk, now, &out), dw_desk_last_error(desk), "poll after quit");
        if (out.kind == DW_OUTPUT_TIMEOUT) {
            break;
        }
        if (out.kind == DW_OUTPUT_TRANSMIT && used + out.len < cap) {
            memcpy(sent + used, out.data, out.len);
            used += out.len;
        }
        if (out.kind == DW_OUTPUT_EVENT) {
            json_t *event = event_json(&out);
            json_t *f = json_object_get(event, "failed");
            if (f != NULL && strcmp(json_string_value(json_object_get(f, "id")), id) == 0) {
                *failed = json_incref(f);
            }
            json_decref(event);
        }
    }
    sent[used] = 0;
}

/* After _quit, and after EOF, the calls that start or answer work are refused with kind
 * "closed" (they returned OK, and the request waited for a connection that was gone); the
 * drain still sends the QUIT, and input, state and stats still work. */
static void closed(void) {
    char sent[1024];
    dw_str id, view;
    json_t *failed = NULL;

    dw_desk *desk = NULL;
    CHECK_OK(dw_desk_new("{\"nick\":\"d\",\"channel\":\"#d\",\"oa1\":{\"allowed_sender\":\"r\"}}", 0, 1, &desk),
             dw_last_error(), "desk");
    CHECK_OK(dw_desk_remote_bash(desk, 0, "{\"command\":\"ls\"}", &id), dw_desk_last_error(desk), "before quit");
    char before[80];
    snprintf(before, sizeof before, "%.*s", (int)id.len, id.ptr);
    CHECK_OK(dw_desk_quit(desk, 1, "bye"), dw_desk_last_error(desk), "quit");
    CLOSED(desk, desk, dw_desk_request(desk, 2, (const uint8_t *)"ls", 2, 0, &id));
    CLOSED(desk, desk, dw_desk_remote_bash(desk, 2, "{\"command\":\"ls\"}", &id));
    CLOSED(desk, desk, dw_desk_cancel(desk, 2, before, "r"));
    CLOSED(desk, desk, dw_desk_quit(desk, 2, "again"));
    CHECK(strstr(dw_desk_last_error(desk), "ended") != NULL, "the message says why: %s", dw_desk_last_error(desk));
    drain_desk(desk, 3, sent, sizeof sent, before, &failed);
    CHECK(strstr(sent, "QUIT bye\r\n") != NULL, "the QUIT still leaves: %s", sent);
    CHECK(failed != NULL && strcmp(json_string_value(json_object_get(failed, "error")), "disconnected") == 0,
          "the request made before the quit fails with disconnected");
    json_decref(failed);
    CHECK_OK(dw_desk_handle_bytes(desk, 4, (const uint8_t *)"ERROR :Closing link\r\n", 21), dw_desk_last_error(desk),
             "input after the quit");
    CHECK_OK(dw_desk_state(desk, &view), dw_desk_last_error(desk), "state");
    CHECK(strcmp(view.ptr, "closed") == 0, "state %s", view.ptr);
    CHECK_OK(dw_desk_stats(desk, &view), dw_desk_last_error(desk), "stats");
    dw_desk_free(desk);

    /* EOF ends the connection too: even a cancel is refused as closed, not unknown_request. */
    CHECK_OK(dw_desk_new("{\"nick\":\"d\",\"channel\":\"#d\",\"oa1\":{\"allowed_sender\":\"r\"}}", 0, 1, &desk), dw_last_error(), "desk");
    CHECK_OK(dw_desk_request(desk, 0, (const uint8_t *)"ls", 2, 0, &id), dw_desk_last_error(desk), "request");
    snprintf(before, sizeof before, "%.*s", (int)id.len, id.ptr);
    CHECK_OK(dw_desk_handle_eof(desk, 1), dw_desk_last_error(desk), "eof");
    CLOSED(desk, desk, dw_desk_cancel(desk, 2, before, "r"));
    CLOSED(desk, desk, dw_desk_quit(desk, 2, "late"));
    dw_desk_free(desk);

    dw_remote *remote = NULL;
    CHECK_OK(dw_remote_new("{\"nick\":\"r\",\"channel\":\"#d\"}", 0, &remote), dw_last_error(), "remote");
    CHECK_OK(dw_remote_quit(remote, 1, "bye"), dw_remote_last_error(remote), "quit");
    CLOSED(remote, remote, dw_remote_send(remote, 2, "abc", (const uint8_t *)"x", 1));
    CLOSED(remote, remote, dw_remote_finish(remote, 2, "abc"));
    CLOSED(remote, remote, dw_remote_respond(remote, 2, "abc", (const uint8_t *)"x", 1));
    CLOSED(remote, remote, dw_remote_fail(remote, 2, "abc", "code", "m"));
    CLOSED(remote, remote, dw_remote_quit(remote, 2, "again"));
    size_t used = 0;
    dw_output out;
    for (;;) {
        CHECK_OK(dw_remote_poll_output(remote, 3, &out), dw_remote_last_error(remote), "poll after quit");
        if (out.kind == DW_OUTPUT_TIMEOUT) {
            break;
        }
        if (out.kind == DW_OUTPUT_TRANSMIT && used + out.len < sizeof sent) {
            memcpy(sent + used, out.data, out.len);
            used += out.len;
        }
    }
    sent[used] = 0;
    CHECK(strstr(sent, "QUIT bye\r\n") != NULL, "the remote's QUIT still leaves: %s", sent);
    dw_remote_free(remote);
}

/* Configurations that cannot work are refused when the engine is built, with the reason: a
 * desk that does not name its remote (it would send into a channel nobody may hear), a nick the
 * server would rename, a channel without its prefix. */
static void bad_configs(void) {
    dw_desk *desk = NULL;
    const char *bad[] = {
        "{\"nick\":\"d\",\"channel\":\"#d\"}",
        "{\"nick\":\"a b\",\"channel\":\"#d\",\"oa1\":{\"allowed_sender\":\"r\"}}",
        "{\"nick\":\"\",\"channel\":\"#d\",\"oa1\":{\"allowed_sender\":\"r\"}}",
        "{\"nick\":\"d\",\"channel\":\"desk\",\"oa1\":{\"allowed_sender\":\"r\"}}",
        "{\"nick\":\"d\",\"channel\":\"#d\",\"oa1\":{\"allowed_sender\":\"r x\"}}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK(dw_desk_new(bad[i], 0, 1, &desk) == DW_STATUS_INVALID_ARGUMENT, "refused: %s", bad[i]);
        CHECK(strcmp(dw_last_error_kind(), "invalid_config") == 0, "kind %s", dw_last_error_kind());
    }
    CHECK(desk == NULL, "nothing written on failure");
    CHECK(dw_desk_new(bad[0], 0, 1, &desk) == DW_STATUS_INVALID_ARGUMENT, "no remote");
    CHECK(strstr(dw_last_error(), "oa1.allowed_sender") != NULL, "says what to set: %s", dw_last_error());
    dw_remote *remote = NULL;
    CHECK(dw_remote_new("{\"nick\":\"r\",\"channel\":\"d\"}", 0, &remote) == DW_STATUS_INVALID_ARGUMENT,
          "a remote's bad channel");
    CHECK(strstr(dw_last_error(), "starts with #") != NULL, "says what is wrong: %s", dw_last_error());
}

/* The panic boundary, for one handle: `call` panics, then the handle is poisoned. */
#define PANICS(type, h, call)                                                                      \
    do {                                                                                           \
        dw_testing_panic();                                                                        \
        dw_status st_ = (call);                                                                    \
        CHECK(st_ == DW_STATUS_PANIC, #type ": a panic answers %s", dw_status_str(st_));          \
        CHECK(strstr(dw_##type##_last_error(h), "panicked") != NULL, #type ": message %s",          \
              dw_##type##_last_error(h));                                                          \
        CHECK(strcmp(dw_##type##_last_error_kind(h), "panic") == 0, #type ": kind");               \
        st_ = (call);                                                                              \
        CHECK(st_ == DW_STATUS_POISONED, #type ": after a panic %s", dw_status_str(st_));         \
        CHECK(strcmp(dw_##type##_last_error_kind(h), "poisoned") == 0, #type ": kind poisoned");   \
        CHECK(strstr(dw_##type##_last_error(h), "panicked") != NULL, #type ": the panic's message stays"); \
    } while (0)

static void panics(void) {
    dw_output out;
    dw_str view;
    PANICS(desk, h_desk, dw_desk_poll_output(h_desk, 0, &out));
    CHECK(dw_desk_handle_bytes(h_desk, 0, (const uint8_t *)"x", 1) == DW_STATUS_POISONED, "every call refused");
    CHECK(dw_desk_stats(h_desk, &view) == DW_STATUS_POISONED, "every call refused");
    PANICS(remote, h_remote, dw_remote_handle_timeout(h_remote, 0));
    PANICS(oa1_client, h_oa1_client, dw_oa1_client_stats(h_oa1_client, &view));
    PANICS(oa1_server, h_oa1_server, dw_oa1_server_poll_output(h_oa1_server, 0, &out));
    PANICS(irc_session, h_irc_session, dw_irc_session_poll_output(h_irc_session, 0, &out));
    PANICS(peer, h_peer, dw_peer_call(h_peer, 0, "m", NULL, 0, &view));
    PANICS(gateway, h_gateway, dw_gateway_poll_output(h_gateway, 0, &out));
    PANICS(mobile_client, h_mobile_client, dw_mobile_client_poll_output(h_mobile_client, 0, &out));
    PANICS(mobile_server, h_mobile_server, dw_mobile_server_poll_output(h_mobile_server, 0, &out));
    PANICS(toolbox, h_toolbox, dw_toolbox_poll_output(h_toolbox, 0, &out));
    PANICS(stream_parser, h_stream_parser, dw_stream_parser_feed(h_stream_parser, (const uint8_t *)"x", 1));
    PANICS(tool_index, h_tool_index, dw_tool_index_top_n(h_tool_index, "read", 1, &view));
    PANICS(sim_network, h_sim_network, dw_sim_network_stats(h_sim_network, &view));
    PANICS(multi_desk, h_multi_desk, dw_multi_desk_poll_output(h_multi_desk, 0, &out));
    CHECK(dw_multi_desk_send_text(h_multi_desk, "#x", (const uint8_t *)"hi", 2, false, &o_len) == DW_STATUS_POISONED,
          "every call refused");

    /* A call without a handle: the panic is reported, and the next call works. */
    size_t n;
    dw_testing_panic();
    CHECK(dw_oa1_escape((const uint8_t *)"a\n", 2, o_buf, sizeof o_buf, &n) == DW_STATUS_PANIC, "free function panic");
    CHECK(strcmp(dw_last_error_kind(), "panic") == 0, "thread kind %s", dw_last_error_kind());
    CHECK(dw_oa1_escape((const uint8_t *)"a\n", 2, o_buf, sizeof o_buf, &n) == DW_STATUS_OK && strcmp(o_buf, "a\\n") == 0,
          "the next call works");

    /* A constructor that panics writes no handle. */
    dw_peer *peer = NULL;
    dw_testing_panic();
    CHECK(dw_peer_new(DW_DIALECT_JSONRPC2, NULL, 1, &peer) == DW_STATUS_PANIC && peer == NULL, "constructor panic");
}

#define REFUSED_AS(h, status, kind_, call)                                                          \
    do {                                                                                           \
        dw_status st_ = (call);                                                                    \
        CHECK(st_ == (status) && strcmp(dw_multi_desk_last_error_kind(h), (kind_)) == 0,            \
              #call ": %s, kind \"%s\" (%s)", dw_status_str(st_), dw_multi_desk_last_error_kind(h),  \
              dw_multi_desk_last_error(h));                                                        \
    } while (0)

/* Many desks on one connection: unknown channels, duplicate and bad ones, chat text the
 * connection cannot send (empty, CR/LF, the reserved "OA1 " prefix), a handle whose connection
 * ended. Each refusal names its kind, and nothing is written on failure. */
static void multi_desk(void) {
    dw_multi_desk *m = NULL;
    dw_str view = {NULL, 0};
    size_t lines = 99;
    /* A first channel needs its remote; a bad nick is refused as for dw_desk_new. */
    CHECK(dw_multi_desk_new("{\"nick\":\"m\",\"channel\":\"#a\"}", 0, 1, &m) == DW_STATUS_INVALID_ARGUMENT &&
              m == NULL && strcmp(dw_last_error_kind(), "invalid_config") == 0,
          "a first channel without its remote: %s", dw_last_error_kind());
    CHECK(dw_multi_desk_new("{\"nick\":\"a b\"}", 0, 1, &m) == DW_STATUS_INVALID_ARGUMENT && m == NULL,
          "a bad nick");
    CHECK(dw_multi_desk_new("[]", 0, 1, &m) == DW_STATUS_INVALID_JSON && m == NULL, "a config array");
    CHECK_OK(dw_multi_desk_new("{\"nick\":\"m\"}", 0, 1, &m), dw_last_error(), "no channel yet");

    dw_str channels;
    CHECK_OK(dw_multi_desk_channels(m, &channels), dw_multi_desk_last_error(m), "channels");
    CHECK(strcmp(channels.ptr, "[]") == 0, "no desk yet: %s", channels.ptr);
    CHECK_OK(dw_multi_desk_add_desk(m, 0, "#a", "ra"), dw_multi_desk_last_error(m), "add #a");
    REFUSED_AS(m, DW_STATUS_INVALID_ARGUMENT, "duplicate_channel", dw_multi_desk_add_desk(m, 0, "#a", "rb"));
    REFUSED_AS(m, DW_STATUS_INVALID_ARGUMENT, "invalid_config", dw_multi_desk_add_desk(m, 0, "nohash", "ra"));
    REFUSED_AS(m, DW_STATUS_INVALID_ARGUMENT, "invalid_config", dw_multi_desk_add_desk(m, 0, "#b", "r x"));
    REFUSED_AS(m, DW_STATUS_INVALID_ARGUMENT, "invalid_config",
               dw_multi_desk_add_desk_with(m, 0, "{\"channel\":\"#b\",\"nick\":\"m\"}"));
    CHECK_OK(dw_multi_desk_add_desk_with(m, 0, "{\"channel\":\"#b\",\"nick\":\"m\",\"allowed_sender\":\"rb\"}"),
             dw_multi_desk_last_error(m), "add #b with its own config");
    CHECK_OK(dw_multi_desk_channels(m, &channels), dw_multi_desk_last_error(m), "channels");
    CHECK(strcmp(channels.ptr, "[\"#a\",\"#b\"]") == 0, "channels in order: %s", channels.ptr);

    /* A channel the connection does not carry. */
    view.ptr = NULL;
    REFUSED_AS(m, DW_STATUS_REFUSED, "unknown_channel", dw_multi_desk_request(m, 0, "#zz", (const uint8_t *)"ls", 2, 0, &view));
    CHECK(view.ptr == NULL, "no id written on failure");
    CHECK(strstr(dw_multi_desk_last_error(m), "#zz") != NULL, "the message names it: %s", dw_multi_desk_last_error(m));
    REFUSED_AS(m, DW_STATUS_REFUSED, "unknown_channel", dw_multi_desk_remote_bash(m, 0, "#zz", "{\"command\":\"ls\"}", &view));
    REFUSED_AS(m, DW_STATUS_REFUSED, "unknown_channel", dw_multi_desk_cancel(m, 0, "#zz", "abc", "r"));
    REFUSED_AS(m, DW_STATUS_REFUSED, "unknown_channel", dw_multi_desk_remove_desk(m, 0, "#zz"));
    REFUSED_AS(m, DW_STATUS_REFUSED, "unknown_channel", dw_multi_desk_channel_state(m, "#zz", &view));
    REFUSED_AS(m, DW_STATUS_REFUSED, "unknown_channel", dw_multi_desk_channel_info(m, "#zz", &view));
    REFUSED_AS(m, DW_STATUS_REFUSED, "unknown_channel", dw_multi_desk_tool_description(m, "#zz", &view));
    REFUSED_AS(m, DW_STATUS_REFUSED, "unknown_channel",
               dw_multi_desk_send_text(m, "#zz", (const uint8_t *)"hi", 2, false, &lines));
    CHECK(lines == 99, "no line count written on failure");
    REFUSED_AS(m, DW_STATUS_REFUSED, "unknown_request", dw_multi_desk_cancel(m, 0, "#a", "abc", "r"));
    REFUSED_AS(m, DW_STATUS_INVALID_JSON, "invalid_json", dw_multi_desk_remote_bash(m, 0, "#a", "{\"cmd\":\"ls\"}", &view));
    REFUSED_AS(m, DW_STATUS_INVALID_ARGUMENT, "invalid_argument",
               dw_multi_desk_remote_bash(m, 0, "#a", "{\"command\":\"ls\",\"timeout_sec\":0}", &view));
    REFUSED_AS(m, DW_STATUS_INVALID_ARGUMENT, "invalid_argument",
               dw_multi_desk_remote_bash(m, 0, "#a", "{\"command\":\"\"}", &view));

    /* Chat text the connection cannot send as it is. */
    REFUSED_AS(m, DW_STATUS_INVALID_ARGUMENT, "reserved_prefix",
               dw_multi_desk_send_text(m, "#a", (const uint8_t *)"OA1 REQ abc 1 0 ls", 18, false, &lines));
    REFUSED_AS(m, DW_STATUS_INVALID_ARGUMENT, "reserved_prefix",
               dw_multi_desk_send_text(m, "#a", (const uint8_t *)"OA1 ", 4, true, &lines));
    REFUSED_AS(m, DW_STATUS_INVALID_ARGUMENT, "empty", dw_multi_desk_send_text(m, "#a", (const uint8_t *)"", 0, false, &lines));
    REFUSED_AS(m, DW_STATUS_INVALID_ARGUMENT, "forbidden_byte",
               dw_multi_desk_send_text(m, "#a", (const uint8_t *)"a\r\nQUIT", 7, false, &lines));
    REFUSED_AS(m, DW_STATUS_INVALID_ARGUMENT, "forbidden_byte",
               dw_multi_desk_send_text(m, "#a", (const uint8_t *)"a\0b", 3, false, &lines));
    REFUSED_AS(m, DW_STATUS_INVALID_UTF8, "invalid_utf8",
               dw_multi_desk_send_text(m, "#a", (const uint8_t *)BAD_UTF8, 2, false, &lines));
    CHECK(lines == 99, "no line count written on failure");
    /* "OA1" not followed by a space is chat. */
    CHECK_OK(dw_multi_desk_send_text(m, "#a", (const uint8_t *)"OA1X is fine", 12, false, &lines),
             dw_multi_desk_last_error(m), "OA1X");
    CHECK(lines == 1, "one line: %zu", lines);
    /* 64 KiB wait per channel at most: the queue fills (nothing is joined, nothing leaves). */
    static char big[60000];
    memset(big, 'w', sizeof big);
    for (size_t i = 7; i < sizeof big; i += 8) {
        big[i] = ' ';
    }
    CHECK_OK(dw_multi_desk_send_text(m, "#b", (const uint8_t *)big, sizeof big, false, &lines),
             dw_multi_desk_last_error(m), "60000 bytes");
    CHECK(lines > 100, "cut into many lines: %zu", lines);
    REFUSED_AS(m, DW_STATUS_REFUSED, "queue_full",
               dw_multi_desk_send_text(m, "#b", (const uint8_t *)big, sizeof big, false, &lines));

    /* Removing a desk: its channel is unknown afterwards, the others stay. */
    CHECK_OK(dw_multi_desk_remove_desk(m, 0, "#b"), dw_multi_desk_last_error(m), "remove #b");
    REFUSED_AS(m, DW_STATUS_REFUSED, "unknown_channel", dw_multi_desk_remove_desk(m, 0, "#b"));
    REFUSED_AS(m, DW_STATUS_REFUSED, "unknown_channel", dw_multi_desk_request(m, 0, "#b", (const uint8_t *)"ls", 2, 0, &view));
    CHECK_OK(dw_multi_desk_channel_state(m, "#a", &view), dw_multi_desk_last_error(m), "state #a");
    CHECK(strcmp(view.ptr, "registering") == 0 || strcmp(view.ptr, "joining") == 0, "#a before registration: %s", view.ptr);
    REFUSED_AS(m, DW_STATUS_REFUSED, "refused", dw_multi_desk_tool_result(m, &view, &view));

    /* After QUIT: work is refused as closed, the QUIT still drains, state and stats answer. */
    dw_str id;
    CHECK_OK(dw_multi_desk_request(m, 0, "#a", (const uint8_t *)"ls", 2, 0, &id), dw_multi_desk_last_error(m), "request");
    char before[80];
    snprintf(before, sizeof before, "%.*s", (int)id.len, id.ptr);
    CHECK_OK(dw_multi_desk_quit(m, 1, "bye"), dw_multi_desk_last_error(m), "quit");
    REFUSED_AS(m, DW_STATUS_REFUSED, "closed", dw_multi_desk_request(m, 2, "#a", (const uint8_t *)"ls", 2, 0, &view));
    REFUSED_AS(m, DW_STATUS_REFUSED, "closed", dw_multi_desk_send_text(m, "#a", (const uint8_t *)"hi", 2, false, &lines));
    REFUSED_AS(m, DW_STATUS_REFUSED, "closed", dw_multi_desk_add_desk(m, 2, "#c", "rc"));
    REFUSED_AS(m, DW_STATUS_REFUSED, "closed", dw_multi_desk_quit(m, 2, "again"));
    char sent[2048];
    size_t used = 0;
    int failed = 0;
    dw_output out;
    for (;;) {
        CHECK_OK(dw_multi_desk_poll_output(m, 3, &out), dw_multi_desk_last_error(m), "poll after quit");
        if (out.kind == DW_OUTPUT_TIMEOUT) {
            break;
        }
        if (out.kind == DW_OUTPUT_TRANSMIT && used + out.len < sizeof sent) {
            memcpy(sent + used, out.data, out.len);
            used += out.len;
        }
        if (out.kind == DW_OUTPUT_EVENT) {
            json_t *e = event_json(&out);
            json_t *f = json_object_get(e, "failed");
            if (f != NULL && strcmp(json_string_value(json_object_get(f, "id")), before) == 0) {
                failed = strcmp(json_string_value(json_object_get(f, "error")), "disconnected") == 0 &&
                         strcmp(json_string_value(json_object_get(e, "channel")), "#a") == 0;
            }
            json_decref(e);
        }
    }
    sent[used] = 0;
    CHECK(strstr(sent, "QUIT bye\r\n") != NULL, "the QUIT still leaves: %s", sent);
    CHECK(failed, "the request made before the quit fails with disconnected, in #a");
    CHECK_OK(dw_multi_desk_state(m, &view), dw_multi_desk_last_error(m), "state");
    CHECK(strcmp(view.ptr, "closed") == 0, "state %s", view.ptr);
    CHECK_OK(dw_multi_desk_stats(m, &view), dw_multi_desk_last_error(m), "stats");
    dw_multi_desk_free(m);
}

/* Findings of the C trial (notes/trial-c.md 1, 4-8): frames the parser would not read back,
 * chunk budgets below the floor, zero timeouts, a channel or nick given twice, params that are
 * neither an object nor an array, and an error kind that is a name. */
static void trial_findings(void) {
    size_t n = 0;
    static const struct {
        const char *frame, *kind, *says;
    } frames[] = {
        {"{\"type\":\"REQ\",\"id\":\"ab\",\"seq\":1,\"more\":false,\"payload\":\"x\\r\\nQUIT\"}", "forbidden_byte", "raw CR"},
        {"{\"type\":\"REQ\",\"id\":\"ab\",\"seq\":1,\"more\":false,\"payload\":\"x\\nQUIT\"}", "forbidden_byte", "raw LF"},
        {"{\"type\":\"RES\",\"id\":\"ab\",\"seq\":1,\"more\":false,\"payload\":\"\\u0000\"}", "forbidden_byte", "raw NUL"},
        {"{\"type\":\"REQ\",\"id\":\"ab\",\"seq\":0,\"more\":false,\"payload\":\"x\"}", "zero_seq", "seq is 0"},
        {"{\"type\":\"REQ\",\"id\":\"a b\",\"seq\":1,\"more\":false,\"payload\":\"x\"}", "invalid_id", "\"a b\""},
        {"{\"type\":\"REQ\",\"id\":\"\",\"seq\":1,\"more\":false,\"payload\":\"x\"}", "invalid_id", "frame id"},
    };
    for (size_t i = 0; i < sizeof frames / sizeof frames[0]; i++) {
        n = 12345;
        CHECK(dw_oa1_frame_format(frames[i].frame, o_buf, sizeof o_buf, &n) == DW_STATUS_INVALID_ARGUMENT && n == 12345,
              "frame refused: %s", frames[i].frame);
        CHECK(strcmp(dw_last_error_kind(), frames[i].kind) == 0, "kind %s for %s", dw_last_error_kind(), frames[i].frame);
        CHECK(strstr(dw_last_error(), frames[i].says) != NULL && strstr(dw_last_error(), "frame_json") != NULL,
              "message: %s", dw_last_error());
    }
    /* The escaped payload is fine, and reads back. */
    CHECK_OK(dw_oa1_frame_format("{\"type\":\"REQ\",\"id\":\"ab\",\"seq\":1,\"more\":false,\"payload\":\"x\\\\r\\\\nQUIT\"}",
                                 o_buf, sizeof o_buf, &n),
             dw_last_error(), "an escaped payload");
    CHECK(strcmp(o_buf, "OA1 REQ ab 1 0 x\\r\\nQUIT") == 0, "frame %s", o_buf);
    char parsed[256];
    CHECK_OK(dw_oa1_frame_parse((const uint8_t *)o_buf, n, parsed, sizeof parsed, &n), dw_last_error(), "parse back");
    CHECK(strstr(parsed, "\"id\":\"ab\"") != NULL, "parsed back: %s", parsed);

    /* A budget below 4 is refused, not raised. */
    for (size_t budget = 0; budget < 4; budget++) {
        CHECK(dw_oa1_chunk((const uint8_t *)"hello", 5, budget, o_buf, sizeof o_buf, &n) == DW_STATUS_INVALID_ARGUMENT,
              "budget %zu", budget);
        CHECK(strcmp(dw_last_error_kind(), "budget_too_small") == 0, "kind %s", dw_last_error_kind());
    }
    CHECK_OK(dw_oa1_chunk((const uint8_t *)"hello", 5, 4, o_buf, sizeof o_buf, &n), dw_last_error(), "budget 4");
    CHECK(strcmp(o_buf, "[\"hell\",\"o\"]") == 0, "chunks %s", o_buf);

    /* Zero timeouts, and the channel or nick given twice. */
    dw_desk *desk = NULL;
    static const struct {
        const char *config, *field;
        dw_status status;
    } configs[] = {
        {"{\"nick\":\"desk\",\"channel\":\"#desk\",\"oa1\":{\"allowed_sender\":\"rexd\",\"request_timeout_ms\":0}}",
         "oa1.request_timeout_ms is 0", DW_STATUS_INVALID_ARGUMENT},
        {"{\"nick\":\"desk\",\"channel\":\"#desk\",\"oa1\":{\"allowed_sender\":\"rexd\",\"ready_timeout_ms\":0}}",
         "oa1.ready_timeout_ms is 0", DW_STATUS_INVALID_ARGUMENT},
        {"{\"nick\":\"desk\",\"channel\":\"#desk\",\"oa1\":{\"allowed_sender\":\"rexd\",\"partial_timeout_ms\":0}}",
         "oa1.partial_timeout_ms is 0", DW_STATUS_INVALID_ARGUMENT},
        {"{\"nick\":\"desk\",\"channel\":\"#desk\",\"oa1\":{\"allowed_sender\":\"rexd\",\"channel\":\"#other\"}}",
         "oa1.channel is \"#other\"", DW_STATUS_INVALID_JSON},
        {"{\"nick\":\"desk\",\"channel\":\"#desk\",\"oa1\":{\"allowed_sender\":\"rexd\",\"nick\":\"x\"}}",
         "oa1.nick is \"x\"", DW_STATUS_INVALID_JSON},
        {"{\"nick\":\"desk\",\"channel\":\"#desk\",\"session\":{\"nick\":\"other\"},\"oa1\":{\"allowed_sender\":\"rexd\"}}",
         "session.nick is \"other\"", DW_STATUS_INVALID_JSON},
        {"{\"nick\":\"desk\",\"channel\":\"#desk\",\"session\":{\"channels\":[\"#x\"]},\"oa1\":{\"allowed_sender\":\"rexd\"}}",
         "session.channels is [\"#x\"]", DW_STATUS_INVALID_JSON},
    };
    for (size_t i = 0; i < sizeof configs / sizeof configs[0]; i++) {
        dw_status st = dw_desk_new(configs[i].config, 0, 1, &desk);
        CHECK(st == configs[i].status && desk == NULL, "%s: %s", configs[i].config, dw_status_str(st));
        CHECK(strstr(dw_last_error(), configs[i].field) != NULL, "names the field: %s", dw_last_error());
        if (configs[i].status == DW_STATUS_INVALID_ARGUMENT) {
            CHECK(strcmp(dw_last_error_kind(), "invalid_config") == 0, "kind %s", dw_last_error_kind());
        }
    }
    CHECK_OK(dw_desk_new("{\"nick\":\"desk\",\"channel\":\"#desk\",\"session\":{\"nick\":\"desk\",\"channels\":[\"#desk\"]},"
                         "\"oa1\":{\"allowed_sender\":\"rexd\",\"channel\":\"#desk\",\"request_timeout_ms\":1}}",
                         0, 1, &desk),
             dw_last_error(), "the same values repeated");
    dw_desk_free(desk);

    /* Params are an object or an array (JSON-RPC 2.0), an object (sidecar). */
    dw_peer *peer = NULL;
    dw_str id = {NULL, 0};
    CHECK_OK(dw_peer_new(DW_DIALECT_JSONRPC2, NULL, 1, &peer), dw_last_error(), "peer");
    const char *bad_params[] = {"\"str\"", "5", "true", "null"};
    for (size_t i = 0; i < sizeof bad_params / sizeof bad_params[0]; i++) {
        CHECK(dw_peer_call(peer, 0, "m", bad_params[i], 0, &id) == DW_STATUS_INVALID_JSON && id.ptr == NULL,
              "params %s", bad_params[i]);
        CHECK(strcmp(dw_peer_last_error_kind(peer), "invalid_params") == 0, "kind %s", dw_peer_last_error_kind(peer));
        CHECK(strstr(dw_peer_last_error(peer), "an object or an array") != NULL, "%s", dw_peer_last_error(peer));
        CHECK(dw_peer_call_with_id(peer, 0, "7", "m", bad_params[i], 0) == DW_STATUS_INVALID_JSON, "with id");
        CHECK(dw_peer_notify(peer, 0, "m", bad_params[i]) == DW_STATUS_INVALID_JSON, "notify");
    }
    /* Names and ids the peer could not take as a call. */
    CHECK(dw_peer_call(peer, 0, "", NULL, 0, &id) != DW_STATUS_OK && strstr(dw_peer_last_error(peer), "empty method") != NULL,
          "an empty method: %s", dw_peer_last_error(peer));
    CHECK(dw_peer_notify(peer, 0, "rpc.discover", NULL) != DW_STATUS_OK && strstr(dw_peer_last_error(peer), "reserved") != NULL,
          "an rpc. method: %s", dw_peer_last_error(peer));
    CHECK(dw_peer_call_with_id(peer, 0, "null", "m", NULL, 0) != DW_STATUS_OK && strstr(dw_peer_last_error(peer), "null id") != NULL,
          "a null id: %s", dw_peer_last_error(peer));
    dw_output out;
    CHECK_OK(dw_peer_poll_output(peer, 0, &out), dw_peer_last_error(peer), "poll");
    CHECK(out.kind == DW_OUTPUT_TIMEOUT, "nothing was written for the refused calls");
    CHECK_OK(dw_peer_call(peer, 0, "m", "[1]", 0, &id), dw_peer_last_error(peer), "array params");
    CHECK(id.len == 1 && id.ptr[0] == '1', "the refused calls used no id: %.*s", (int)id.len, id.ptr);
    CHECK_OK(dw_peer_call(peer, 0, "m", "{}", 0, &id), dw_peer_last_error(peer), "object params");
    dw_peer_free(peer);
    CHECK_OK(dw_peer_new(DW_DIALECT_SIDECAR, NULL, 1, &peer), dw_last_error(), "sidecar peer");
    CHECK(dw_peer_call(peer, 0, "m", "[1]", 0, &id) == DW_STATUS_INVALID_JSON, "sidecar array params");
    CHECK(strstr(dw_peer_last_error(peer), "an object") != NULL, "%s", dw_peer_last_error(peer));
    dw_peer_free(peer);

    /* A kind is a name, never the message. */
    dw_stream_parser *p = NULL;
    dw_str view = {NULL, 0};
    const char *done = "data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n";
    CHECK_OK(dw_stream_parser_new(DW_PROVIDER_OPENAI_CHAT, NULL, 1, &p), dw_last_error(), "parser");
    CHECK_OK(dw_stream_parser_feed(p, (const uint8_t *)done, strlen(done)), dw_stream_parser_last_error(p), "feed");
    CHECK_OK(dw_stream_parser_finish(p, &view), dw_stream_parser_last_error(p), "finish");
    CHECK(dw_stream_parser_feed(p, (const uint8_t *)"x", 1) == DW_STATUS_REFUSED, "feed after finish");
    CHECK(strcmp(dw_stream_parser_last_error_kind(p), "finished") == 0, "kind %s", dw_stream_parser_last_error_kind(p));
    CHECK(strcmp(dw_stream_parser_last_error(p), "the stream is finished") == 0, "%s", dw_stream_parser_last_error(p));
    dw_stream_parser_free(p);
}

static void status_strings(void) {
    for (uint32_t s = 0; s <= 9; s++) {
        CHECK(strcmp(dw_status_str(s), "unknown status") != 0, "status %u has a description", s);
    }
    CHECK(strcmp(dw_status_str(10), "unknown status") == 0, "status 10");
    CHECK(strcmp(dw_status_str(UINT32_MAX), "unknown status") == 0, "status max");
    CHECK(strcmp(dw_version(), DW_VERSION_STRING) == 0, "version");
}

int main(void) {
    setup();
    generated_misuse();
    domain();
    last_error_clears();
    misaligned();
    embeddings();
    closed();
    bad_configs();
    trial_findings();
    multi_desk();
    status_strings();
    panics();
    teardown();
    return finish("misuse");
}
