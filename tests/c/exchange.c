/* Two parties talking in memory through the C API, on a virtual clock:
 * - OA1: a desk and a remote engine over raw IRC bytes through dw_sim_network, RemoteBash
 *   answered in streamed chunks, a failure, and a cancel;
 * - OA1: the bare client and server with a relay written here (it adds the sender's prefix);
 * - OA1: many desks on one connection (dw_multi_desk), each with its own remote, answered at
 *   once, each getting only its own answer; chat and membership from a plain IRC client in one
 *   of the channels, and long text sent to it cut at word boundaries;
 * - JSON-RPC: two peers in JSON-RPC 2.0 over NDJSON and two in the sidecar dialect over
 *   Content-Length (call, answer, error, progress, timeout, cancel);
 * - the gateway: a Commander peer in the gateway dialect driving a dw_gateway;
 * - the mobile companion: pairing a dw_mobile_client with a dw_mobile_server.
 */
#include "common.h"

#include <stdint.h>

/* ------------------------------------------------------------ desk and remote over sim */

typedef struct {
    dw_sim_network *net;
    dw_desk *desk;
    dw_remote *remote;
    uint64_t desk_conn, remote_conn;
    uint64_t now;
    json_t *desk_events, *remote_events;
} oa1_pair;

/* Moves bytes both ways and drains both engines until neither has anything due now; returns
 * the earliest deadline. */
static uint64_t pump(oa1_pair *p) {
    uint64_t deadline = UINT64_MAX;
    for (int round = 0; round < 10000; round++) {
        int moved = 0;
        dw_output out;
        deadline = UINT64_MAX;
        /* the desk */
        for (;;) {
            CHECK_OK(dw_desk_poll_output(p->desk, p->now, &out), dw_desk_last_error(p->desk), "desk poll");
            if (out.kind == DW_OUTPUT_TIMEOUT) {
                deadline = out.deadline_ms < deadline ? out.deadline_ms : deadline;
                break;
            }
            moved = 1;
            if (out.kind == DW_OUTPUT_TRANSMIT) {
                CHECK_OK(dw_sim_network_handle_bytes(p->net, p->desk_conn, out.data, out.len),
                         dw_sim_network_last_error(p->net), "net in");
            } else if (out.kind == DW_OUTPUT_EVENT) {
                json_array_append_new(p->desk_events, event_json(&out));
            }
        }
        /* the remote */
        for (;;) {
            CHECK_OK(dw_remote_poll_output(p->remote, p->now, &out), dw_remote_last_error(p->remote), "remote poll");
            if (out.kind == DW_OUTPUT_TIMEOUT) {
                deadline = out.deadline_ms < deadline ? out.deadline_ms : deadline;
                break;
            }
            moved = 1;
            if (out.kind == DW_OUTPUT_TRANSMIT) {
                CHECK_OK(dw_sim_network_handle_bytes(p->net, p->remote_conn, out.data, out.len),
                         dw_sim_network_last_error(p->net), "net in");
            } else if (out.kind == DW_OUTPUT_EVENT) {
                json_array_append_new(p->remote_events, event_json(&out));
            }
        }
        /* the server's answers */
        dw_str bytes;
        CHECK_OK(dw_sim_network_take_bytes(p->net, p->desk_conn, &bytes), dw_sim_network_last_error(p->net), "take");
        if (bytes.len > 0) {
            moved = 1;
            CHECK_OK(dw_desk_handle_bytes(p->desk, p->now, (const uint8_t *)bytes.ptr, bytes.len),
                     dw_desk_last_error(p->desk), "desk bytes");
        }
        CHECK_OK(dw_sim_network_take_bytes(p->net, p->remote_conn, &bytes), dw_sim_network_last_error(p->net), "take");
        if (bytes.len > 0) {
            moved = 1;
            CHECK_OK(dw_remote_handle_bytes(p->remote, p->now, (const uint8_t *)bytes.ptr, bytes.len),
                     dw_remote_last_error(p->remote), "remote bytes");
        }
        if (!moved) {
            return deadline;
        }
    }
    CHECK(0, "the pair does not settle");
    return deadline;
}

/* Runs the clock forward (to each deadline) until `done` holds or `limit` ms passed. */
static void run_until(oa1_pair *p, int (*done)(oa1_pair *), uint64_t limit) {
    uint64_t end = p->now + limit;
    while (!done(p) && p->now <= end) {
        uint64_t deadline = pump(p);
        if (done(p)) {
            break;
        }
        p->now = deadline > p->now ? deadline : p->now + 1;
        CHECK_OK(dw_desk_handle_timeout(p->desk, p->now), dw_desk_last_error(p->desk), "desk timeout");
        CHECK_OK(dw_remote_handle_timeout(p->remote, p->now), dw_remote_last_error(p->remote), "remote timeout");
    }
}

static json_t *find_event(json_t *events, const char *kind) {
    size_t i;
    json_t *e;
    json_array_foreach(events, i, e) {
        if (json_object_get(e, kind) != NULL) {
            return json_object_get(e, kind);
        }
    }
    return NULL;
}

static int remote_has_request(oa1_pair *p) { return find_event(p->remote_events, "request") != NULL; }
static int desk_has_answer(oa1_pair *p) {
    return find_event(p->desk_events, "response") != NULL || find_event(p->desk_events, "failed") != NULL;
}
static int remote_has_cancel(oa1_pair *p) { return find_event(p->remote_events, "cancelled") != NULL; }

static void desk_and_remote(void) {
    oa1_pair p = {0};
    p.desk_events = json_array();
    p.remote_events = json_array();
    CHECK_OK(dw_sim_network_new(7, 5, &p.net), dw_last_error(), "network");
    CHECK_OK(dw_sim_network_connect(p.net, "10.0.0.1", &p.desk_conn), dw_sim_network_last_error(p.net), "connect");
    CHECK_OK(dw_sim_network_connect(p.net, "10.0.0.2", &p.remote_conn), dw_sim_network_last_error(p.net), "connect");
    CHECK_OK(dw_desk_new("{\"nick\":\"desk\",\"channel\":\"#desk\",\"oa1\":{\"allowed_sender\":\"deskbot\"}}", 0, 42, &p.desk),
             dw_last_error(), "desk");
    CHECK_OK(dw_remote_new("{\"nick\":\"deskbot\",\"channel\":\"#desk\",\"oa1\":{\"allowed_sender\":\"desk\"}}", 0, &p.remote),
             dw_last_error(), "remote");

    /* A RemoteBash call made before anything is connected waits inside the desk. */
    dw_str id;
    CHECK_OK(dw_desk_remote_bash(p.desk, 0, "{\"command\":\"seq 1 3000\",\"timeout_sec\":300}", &id),
             dw_desk_last_error(p.desk), "remote bash");
    char request_id[80];
    snprintf(request_id, sizeof request_id, "%.*s", (int)id.len, id.ptr);

    run_until(&p, remote_has_request, 60000);
    json_t *request = find_event(p.remote_events, "request");
    CHECK(request != NULL, "the remote got no request");
    CHECK(request && strcmp(json_string_value(json_object_get(request, "payload")), "seq 1 3000") == 0,
          "payload");
    CHECK(request && strcmp(json_string_value(json_object_get(request, "id")), request_id) == 0, "id");
    CHECK(request && strcmp(json_string_value(json_object_get(request, "sender")), "desk") == 0, "sender");
    /* The whole prefix, which a remote should log: a nick alone proves nothing. */
    CHECK(request && json_string_value(json_object_get(request, "source")) &&
              strcmp(json_string_value(json_object_get(request, "source")), "desk!~desk@10.0.0.1") == 0,
          "source");
    dw_str state;
    CHECK_OK(dw_desk_state(p.desk, &state), dw_desk_last_error(p.desk), "state");
    CHECK(strcmp(state.ptr, "ready") == 0, "desk state %s", state.ptr);

    /* The answer: 3000 lines streamed in pieces, then the end. */
    size_t total = 0;
    char expected[20000];
    for (int n = 1; n <= 3000; n++) {
        total += (size_t)sprintf(expected + total, "%d\n", n);
    }
    for (size_t at = 0; at < total; at += 1000) {
        size_t len = total - at < 1000 ? total - at : 1000;
        CHECK_OK(dw_remote_send(p.remote, p.now, request_id, (const uint8_t *)expected + at, len),
                 dw_remote_last_error(p.remote), "send");
        pump(&p);
    }
    CHECK_OK(dw_remote_finish(p.remote, p.now, request_id), dw_remote_last_error(p.remote), "finish");
    /* About 60 lines at the default pace of one a second after a burst of three. */
    run_until(&p, desk_has_answer, 300000);
    json_t *response = find_event(p.desk_events, "response");
    CHECK(response != NULL, "no response");
    const char *text = json_string_value(json_object_get(response, "text"));
    CHECK(text && strlen(text) == total && memcmp(text, expected, total) == 0, "the text arrived intact");
    CHECK(json_is_false(json_object_get(response, "truncated")), "not truncated");

    /* The RemoteBash tool result of the last event is the text. Find the event again by
     * polling: the last OA1 event the desk gave out was the response. */
    dw_str call, result;
    CHECK_OK(dw_desk_tool_result(p.desk, &call, &result), dw_desk_last_error(p.desk), "tool result");
    CHECK(call.len == strlen(request_id) && memcmp(call.ptr, request_id, call.len) == 0, "tool result id");
    CHECK(result.len == total && memcmp(result.ptr, expected, total) == 0, "tool result text");

    /* A failure: the remote answers ERR; the tool result is the failure object. */
    json_array_clear(p.desk_events);
    json_array_clear(p.remote_events);
    CHECK_OK(dw_desk_request(p.desk, p.now, (const uint8_t *)"false", 5, 0, &id), dw_desk_last_error(p.desk), "request");
    snprintf(request_id, sizeof request_id, "%.*s", (int)id.len, id.ptr);
    run_until(&p, remote_has_request, 60000);
    CHECK_OK(dw_remote_fail(p.remote, p.now, request_id, "exit_status", "exit 1"), dw_remote_last_error(p.remote), "fail");
    run_until(&p, desk_has_answer, 60000);
    json_t *failed = find_event(p.desk_events, "failed");
    CHECK(failed && strcmp(json_string_value(json_object_get(failed, "error")), "exit_status") == 0, "failed");
    CHECK_OK(dw_desk_tool_result(p.desk, &call, &result), dw_desk_last_error(p.desk), "tool result");
    json_t *failure = parse_json(result.ptr, result.len);
    CHECK(json_is_false(json_object_get(failure, "ok")) &&
              strcmp(json_string_value(json_object_get(failure, "error")), "exit_status") == 0 &&
              strcmp(json_string_value(json_object_get(failure, "message")), "exit 1") == 0,
          "failure object %.*s", (int)result.len, result.ptr);
    json_decref(failure);

    /* A cancel reaches the remote; answering it afterwards is refused there. */
    json_array_clear(p.remote_events);
    CHECK_OK(dw_desk_request(p.desk, p.now, (const uint8_t *)"sleep 100", 9, 0, &id), dw_desk_last_error(p.desk), "request");
    snprintf(request_id, sizeof request_id, "%.*s", (int)id.len, id.ptr);
    run_until(&p, remote_has_request, 60000);
    CHECK_OK(dw_desk_cancel(p.desk, p.now, request_id, "user"), dw_desk_last_error(p.desk), "cancel");
    run_until(&p, remote_has_cancel, 60000);
    json_t *cancelled = find_event(p.remote_events, "cancelled");
    CHECK(cancelled && strcmp(json_string_value(json_object_get(cancelled, "reason")), "user") == 0, "cancelled");
    CHECK(dw_remote_respond(p.remote, p.now, request_id, (const uint8_t *)"x", 1) == DW_STATUS_REFUSED &&
              strcmp(dw_remote_last_error_kind(p.remote), "unknown_request") == 0,
          "answering a cancelled request: %s", dw_remote_last_error_kind(p.remote));
    /* ...and the desk refuses to cancel it twice. */
    CHECK(dw_desk_cancel(p.desk, p.now, request_id, "again") == DW_STATUS_REFUSED &&
              strcmp(dw_desk_last_error_kind(p.desk), "unknown_request") == 0,
          "cancel twice: %s", dw_desk_last_error_kind(p.desk));

    dw_str stats;
    CHECK_OK(dw_desk_stats(p.desk, &stats), dw_desk_last_error(p.desk), "stats");
    json_t *s = parse_json(stats.ptr, stats.len);
    CHECK(json_integer_value(json_object_get(json_object_get(s, "oa1"), "frames_in")) > 10, "frames counted");
    json_decref(s);
    CHECK_OK(dw_sim_network_stats(p.net, &stats), dw_sim_network_last_error(p.net), "net stats");
    s = parse_json(stats.ptr, stats.len);
    CHECK(json_integer_value(json_object_get(s, "cut_lines")) == 0, "no line was cut");
    CHECK(json_integer_value(json_object_get(s, "noise")) > 0, "the channel had noise");
    json_decref(s);

    /* The server closes the desk's connection: the engine ends. */
    CHECK_OK(dw_sim_network_disconnect(p.net, p.desk_conn), dw_sim_network_last_error(p.net), "disconnect");
    CHECK_OK(dw_desk_handle_eof(p.desk, p.now), dw_desk_last_error(p.desk), "eof");
    pump(&p);
    CHECK_OK(dw_desk_state(p.desk, &state), dw_desk_last_error(p.desk), "state");
    CHECK(strcmp(state.ptr, "closed") == 0, "state after EOF: %s", state.ptr);
    CHECK(dw_desk_request(p.desk, p.now, (const uint8_t *)"x", 1, 0, &id) == DW_STATUS_REFUSED &&
              strcmp(dw_desk_last_error_kind(p.desk), "closed") == 0,
          "a request after EOF: %s", dw_desk_last_error_kind(p.desk));

    json_decref(p.desk_events);
    json_decref(p.remote_events);
    dw_desk_free(p.desk);
    dw_remote_free(p.remote);
    dw_sim_network_free(p.net);
}

/* ------------------------------------------------------------ bare client and server */

/* What an IRC server does to a PRIVMSG line from `nick`: adds the sender's prefix. */
static char *relay(const dw_output *out, const char *nick) {
    char *line = malloc(out->len + 64);
    int n = sprintf(line, ":%s!~%s@10.0.0.9 ", nick, nick);
    memcpy(line + n, out->data, out->len);
    line[n + (int)out->len] = 0;
    return line;
}

static void bare_pair(void) {
    dw_oa1_client *client = NULL;
    dw_oa1_server *server = NULL;
    CHECK_OK(dw_oa1_client_new("{\"channel\":\"#desk\",\"nick\":\"desk\",\"pacing\":{\"burst\":1000,\"interval_ms\":1}}", 3, &client),
             dw_last_error(), "client");
    CHECK_OK(dw_oa1_server_new("{\"channel\":\"#desk\",\"nick\":\"deskbot\",\"pacing\":{\"burst\":1000,\"interval_ms\":1}}", &server),
             dw_last_error(), "server");
    /* A payload that needs escaping and several chunks. */
    char payload[3000];
    for (size_t i = 0; i < sizeof payload - 1; i++) {
        payload[i] = "ab\tc\\d\ne"[i % 8];
    }
    payload[sizeof payload - 1] = 0;
    CHECK_OK(dw_oa1_client_set_identity(client, "desk", "~desk", "10.0.0.9"), dw_oa1_client_last_error(client), "identity");
    CHECK_OK(dw_oa1_server_set_identity(server, "deskbot", "~deskbot", "10.0.0.9"), dw_oa1_server_last_error(server), "identity");
    /* Held: the request queues, nothing goes out until the host lets go. */
    CHECK_OK(dw_oa1_client_set_held(client, true), dw_oa1_client_last_error(client), "hold");
    dw_str id;
    CHECK_OK(dw_oa1_client_request(client, 0, (const uint8_t *)payload, strlen(payload), 0, &id),
             dw_oa1_client_last_error(client), "request");
    char request_id[80];
    snprintf(request_id, sizeof request_id, "%.*s", (int)id.len, id.ptr);
    dw_output held;
    CHECK_OK(dw_oa1_client_poll_output(client, 0, &held), dw_oa1_client_last_error(client), "poll");
    CHECK(held.kind == DW_OUTPUT_TIMEOUT, "nothing is sent while held");
    CHECK_OK(dw_oa1_client_set_held(client, false), dw_oa1_client_last_error(client), "let go");
    json_t *got = NULL, *response = NULL;
    for (uint64_t now = 0; now < 5000 && response == NULL; now += 10) {
        dw_output out;
        while (dw_oa1_client_poll_output(client, now, &out) == DW_STATUS_OK && out.kind != DW_OUTPUT_TIMEOUT) {
            if (out.kind == DW_OUTPUT_TRANSMIT) {
                char *line = relay(&out, "desk");
                CHECK_OK(dw_oa1_server_handle_line(server, now, (const uint8_t *)line, strlen(line)),
                         dw_oa1_server_last_error(server), "server line");
                free(line);
            } else if (out.kind == DW_OUTPUT_EVENT) {
                response = event_json(&out);
            }
        }
        while (dw_oa1_server_poll_output(server, now, &out) == DW_STATUS_OK && out.kind != DW_OUTPUT_TIMEOUT) {
            if (out.kind == DW_OUTPUT_TRANSMIT) {
                char *line = relay(&out, "deskbot");
                CHECK_OK(dw_oa1_client_handle_line(client, now, (const uint8_t *)line, strlen(line)),
                         dw_oa1_client_last_error(client), "client line");
                free(line);
            } else if (out.kind == DW_OUTPUT_EVENT && got == NULL) {
                got = event_json(&out);
                /* Echo the request back as the answer. */
                json_t *req = json_object_get(got, "request");
                const char *p = json_string_value(json_object_get(req, "payload"));
                CHECK(p && strcmp(p, payload) == 0, "the payload arrived intact");
                CHECK_OK(dw_oa1_server_respond(server, now, request_id, (const uint8_t *)p, strlen(p)),
                         dw_oa1_server_last_error(server), "respond");
            }
        }
        CHECK_OK(dw_oa1_client_handle_timeout(client, now), dw_oa1_client_last_error(client), "timeout");
        CHECK_OK(dw_oa1_server_handle_timeout(server, now), dw_oa1_server_last_error(server), "timeout");
    }
    json_t *r = json_object_get(response, "response");
    CHECK(r && strcmp(json_string_value(json_object_get(r, "text")), payload) == 0, "the echo arrived intact");
    dw_str stats;
    CHECK_OK(dw_oa1_client_stats(client, &stats), dw_oa1_client_last_error(client), "stats");
    json_t *s = parse_json(stats.ptr, stats.len);
    CHECK(json_integer_value(json_object_get(s, "frames_out")) > 10, "the request went in chunks");
    json_decref(s);
    json_decref(got);
    json_decref(response);
    dw_oa1_client_free(client);
    dw_oa1_server_free(server);
}

/* ------------------------------------------------------------ JSON-RPC peers */

/* Delivers everything `from` transmits to `to`; collects `from`'s events. */
static void deliver(dw_peer *from, dw_peer *to, uint64_t now, json_t *events) {
    dw_output out;
    for (;;) {
        CHECK_OK(dw_peer_poll_output(from, now, &out), dw_peer_last_error(from), "peer poll");
        if (out.kind == DW_OUTPUT_TIMEOUT) {
            return;
        }
        if (out.kind == DW_OUTPUT_TRANSMIT) {
            /* Feed it one byte at a time: framing must survive any split. */
            for (size_t i = 0; i < out.len; i++) {
                uint8_t byte = out.data[i];
                CHECK_OK(dw_peer_handle_bytes(to, now, &byte, 1), dw_peer_last_error(to), "peer bytes");
            }
        } else if (out.kind == DW_OUTPUT_EVENT) {
            json_array_append_new(events, event_json(&out));
        }
    }
}

/* The deadline of one call with the default config: the sidecar dialect's per-method table
 * (training.start 300 s), a flat 30 s for JSON-RPC 2.0. */
static uint64_t default_deadline(dw_dialect dialect, const char *method) {
    dw_peer *p = NULL;
    dw_str id;
    dw_output out;
    CHECK_OK(dw_peer_new(dialect, NULL, 3, &p), dw_last_error(), method);
    CHECK_OK(dw_peer_call(p, 0, method, "{}", 1, &id), dw_peer_last_error(p), method);
    do {
        CHECK_OK(dw_peer_poll_output(p, 0, &out), dw_peer_last_error(p), method);
    } while (out.kind != DW_OUTPUT_TIMEOUT);
    uint64_t deadline = out.deadline_ms;
    dw_peer_free(p);
    return deadline;
}

static void default_timeouts(void) {
    CHECK(default_deadline(DW_DIALECT_SIDECAR, "training.start") == 300000, "sidecar training.start");
    CHECK(default_deadline(DW_DIALECT_SIDECAR, "health.ping") == 10000, "sidecar health.ping");
    CHECK(default_deadline(DW_DIALECT_JSONRPC2, "training.start") == 30000, "jsonrpc2: flat 30 s");
}

static void peers(dw_dialect dialect, const char *config, const char *label) {
    dw_peer *a = NULL, *b = NULL;
    CHECK_OK(dw_peer_new(dialect, config, 1, &a), dw_last_error(), label);
    CHECK_OK(dw_peer_new(dialect, config, 2, &b), dw_last_error(), label);
    json_t *a_events = json_array(), *b_events = json_array();

    /* a calls b; b answers. */
    dw_str id;
    CHECK_OK(dw_peer_call(a, 0, "health.ping", "{\"echo\":\"h\\u00e9llo\"}", 77, &id), dw_peer_last_error(a), label);
    char call_id[128];
    snprintf(call_id, sizeof call_id, "%.*s", (int)id.len, id.ptr);
    deliver(a, b, 1, a_events);
    deliver(b, a, 1, b_events);
    json_t *req = json_object_get(json_array_get(b_events, 0), "request");
    CHECK(req != NULL, "%s: b got no request", label);
    char *req_id = req ? dump(json_object_get(req, "id")) : NULL;
    CHECK(req_id && strcmp(req_id, call_id) == 0, "%s: id %s vs %s", label, req_id, call_id);
    CHECK(req && strcmp(json_string_value(json_object_get(json_object_get(req, "params"), "echo")), "h\xc3\xa9llo") == 0,
          "%s: params", label);
    if (dialect == DW_DIALECT_SIDECAR) {
        CHECK_OK(dw_peer_progress(b, 2, req_id, "{\"step\":1,\"total\":2}"), dw_peer_last_error(b), label);
    }
    CHECK_OK(dw_peer_respond(b, 2, req_id, "{\"status\":\"ok\"}"), dw_peer_last_error(b), label);
    CHECK(dw_peer_respond(b, 2, req_id, "{}") == DW_STATUS_REFUSED &&
              strcmp(dw_peer_last_error_kind(b), "unknown_id") == 0,
          "%s: a second answer is refused (%s)", label, dw_peer_last_error_kind(b));
    deliver(b, a, 3, b_events);
    deliver(a, b, 3, a_events);
    json_t *progress = NULL, *resp = NULL;
    size_t i;
    json_t *e;
    json_array_foreach(a_events, i, e) {
        if (json_object_get(e, "progress")) progress = json_object_get(e, "progress");
        if (json_object_get(e, "response")) resp = json_object_get(e, "response");
    }
    CHECK(resp && json_integer_value(json_object_get(resp, "user")) == 77 &&
              strcmp(json_string_value(json_object_get(json_object_get(resp, "result"), "status")), "ok") == 0,
          "%s: response", label);
    CHECK((dialect == DW_DIALECT_SIDECAR) == (progress != NULL), "%s: progress", label);
    free(req_id);

    /* An error answer. */
    json_array_clear(a_events);
    json_array_clear(b_events);
    CHECK_OK(dw_peer_call(a, 10, "model.load", NULL, 5, &id), dw_peer_last_error(a), label);
    deliver(a, b, 10, a_events);
    deliver(b, a, 10, b_events);
    req = json_object_get(json_array_get(b_events, 0), "request");
    req_id = req ? dump(json_object_get(req, "id")) : NULL;
    const char *error = dialect == DW_DIALECT_SIDECAR ? "{\"code\":\"MODEL_NOT_FOUND\",\"message\":\"no such model\"}"
                                                      : "{\"code\":-32001,\"message\":\"no such model\"}";
    CHECK_OK(dw_peer_respond_error(b, 11, req_id ? req_id : "0", error), dw_peer_last_error(b), label);
    deliver(b, a, 11, b_events);
    deliver(a, b, 11, a_events);
    json_t *failed = json_object_get(json_array_get(a_events, 0), "failed");
    json_t *remote = json_object_get(json_object_get(failed, "error"), "remote");
    CHECK(remote && strcmp(json_string_value(json_object_get(remote, "message")), "no such model") == 0,
          "%s: the error came back", label);
    free(req_id);

    /* A call nobody answers times out at the configured deadline; a cancelled one is gone. */
    json_array_clear(a_events);
    /* Params are an object for the sidecar (it refuses an array), either for JSON-RPC 2.0. */
    const char *embed_params = dialect == DW_DIALECT_SIDECAR ? "{\"texts\":[1,2]}" : "[1,2]";
    CHECK_OK(dw_peer_call(a, 100, "inference.embed", embed_params, 9, &id), dw_peer_last_error(a), label);
    char timed_out[128];
    snprintf(timed_out, sizeof timed_out, "%.*s", (int)id.len, id.ptr);
    CHECK_OK(dw_peer_call(a, 100, "inference.plan", NULL, 10, &id), dw_peer_last_error(a), label);
    char cancelled[128];
    snprintf(cancelled, sizeof cancelled, "%.*s", (int)id.len, id.ptr);
    CHECK_OK(dw_peer_cancel(a, 100, cancelled), dw_peer_last_error(a), label);
    CHECK(dw_peer_cancel(a, 100, cancelled) == DW_STATUS_REFUSED, "%s: cancel twice", label);
    dw_output out;
    CHECK_OK(dw_peer_poll_output(a, 100, &out), dw_peer_last_error(a), label);
    while (out.kind != DW_OUTPUT_TIMEOUT) {
        CHECK_OK(dw_peer_poll_output(a, 100, &out), dw_peer_last_error(a), label);
    }
    uint64_t deadline = out.deadline_ms;
    CHECK(deadline == 100 + 30000, "%s: deadline %llu", label, (unsigned long long)deadline);
    CHECK_OK(dw_peer_handle_timeout(a, deadline), dw_peer_last_error(a), label);
    deliver(a, b, deadline, a_events);
    failed = json_object_get(json_array_get(a_events, 0), "failed");
    char *failed_id = failed ? dump(json_object_get(failed, "id")) : NULL;
    CHECK(failed && json_is_string(json_object_get(failed, "error")) &&
              strcmp(json_string_value(json_object_get(failed, "error")), "timeout") == 0 &&
              strcmp(failed_id, timed_out) == 0 && json_array_size(a_events) == 1,
          "%s: one timeout", label);
    free(failed_id);

    /* A call under an id of the host's choosing; the same id twice is refused. */
    const char *own_id = dialect == DW_DIALECT_SIDECAR ? "\"own-id\"" : "424242";
    CHECK_OK(dw_peer_call_with_id(a, deadline, own_id, "health.ping", NULL, 1), dw_peer_last_error(a), label);
    bool pending = false;
    CHECK_OK(dw_peer_is_pending(a, own_id, &pending), dw_peer_last_error(a), label);
    CHECK(pending, "%s: the call with our id is pending", label);
    CHECK(dw_peer_call_with_id(a, deadline, own_id, "health.ping", NULL, 1) == DW_STATUS_REFUSED &&
              strcmp(dw_peer_last_error_kind(a), "duplicate_id") == 0,
          "%s: a duplicate id: %s", label, dw_peer_last_error_kind(a));
    CHECK_OK(dw_peer_cancel(a, deadline, own_id), dw_peer_last_error(a), label);
    CHECK_OK(dw_peer_is_pending(a, own_id, &pending), dw_peer_last_error(a), label);
    CHECK(!pending, "%s: cancelled", label);

    dw_str stats;
    CHECK_OK(dw_peer_stats(a, &stats), dw_peer_last_error(a), label);
    json_t *s = parse_json(stats.ptr, stats.len);
    CHECK(json_integer_value(json_object_get(s, "timeouts")) == 1 &&
              json_integer_value(json_object_get(s, "cancelled")) == 2 &&
              json_integer_value(json_object_get(s, "pending")) == 0,
          "%s: stats", label);
    json_decref(s);

    json_decref(a_events);
    json_decref(b_events);
    dw_peer_free(a);
    dw_peer_free(b);
}

/* ------------------------------------------------------------ gateway */

static void gateway(void) {
    uint8_t entropy[DW_ENTROPY_LEN];
    for (size_t i = 0; i < sizeof entropy; i++) {
        entropy[i] = (uint8_t)(i * 7 + 1);
    }
    dw_gateway *gw = NULL;
    dw_peer *commander = NULL;
    CHECK_OK(dw_gateway_new("{\"tokens\":[\"s3cret\"],\"maxRunning\":1}", 0, entropy, 1771416000000ULL, &gw),
             dw_last_error(), "gateway");
    CHECK_OK(dw_peer_new_gateway("s3cret", 1771416000000ULL, NULL, 1, &commander), dw_last_error(), "commander");
    json_t *events = json_array();
    dw_str id;
    CHECK_OK(dw_peer_call(commander, 0, "jobs.create", "{\"job\":{\"jobId\":\"j1\",\"repo\":\"org/repo\"}}", 1, &id),
             dw_peer_last_error(commander), "create");
    CHECK_OK(dw_peer_call(commander, 0, "jobs.start", "{\"jobId\":\"j1\"}", 2, &id), dw_peer_last_error(commander),
             "start");
    json_t *gw_events = json_array();
    for (int round = 0; round < 4; round++) {
        dw_output out;
        for (;;) {
            CHECK_OK(dw_peer_poll_output(commander, 0, &out), dw_peer_last_error(commander), "poll");
            if (out.kind == DW_OUTPUT_TIMEOUT) break;
            if (out.kind == DW_OUTPUT_TRANSMIT) {
                CHECK_OK(dw_gateway_handle_message(gw, 0, 1, out.data, out.len), dw_gateway_last_error(gw), "gw in");
            } else {
                json_array_append_new(events, event_json(&out));
            }
        }
        for (;;) {
            CHECK_OK(dw_gateway_poll_output(gw, 0, &out), dw_gateway_last_error(gw), "gw poll");
            if (out.kind == DW_OUTPUT_TIMEOUT) break;
            if (out.kind == DW_OUTPUT_TRANSMIT) {
                CHECK(out.conn == 1, "conn");
                CHECK_OK(dw_peer_handle_bytes(commander, 0, out.data, out.len), dw_peer_last_error(commander), "in");
                CHECK_OK(dw_peer_handle_bytes(commander, 0, (const uint8_t *)"\n", 1), dw_peer_last_error(commander), "in");
            } else {
                json_array_append_new(gw_events, event_json(&out));
            }
        }
    }
    int responses = 0;
    size_t i;
    json_t *e;
    json_array_foreach(events, i, e) {
        json_t *r = json_object_get(e, "response");
        if (r != NULL) {
            responses++;
            CHECK(strcmp(json_string_value(json_object_get(json_object_get(r, "result"), "status")),
                         json_integer_value(json_object_get(r, "user")) == 1 ? "CREATED" : "RUNNING") == 0,
                  "job status in the answer to call %lld", (long long)json_integer_value(json_object_get(r, "user")));
        }
    }
    CHECK(responses == 2, "the commander got %d answers", responses);
    dw_str state;
    CHECK_OK(dw_gateway_job_state(gw, "j1", &state), dw_gateway_last_error(gw), "state");
    CHECK(strcmp(state.ptr, "\"RUNNING\"") == 0, "job state %s", state.ptr);
    CHECK(json_array_size(gw_events) >= 2, "gateway events");
    /* A request made safe for a log: the token is gone. */
    const char *secret = "{\"v\":\"1.0\",\"auth\":{\"token\":\"s3cret\"},\"payload\":{\"apiKey\":\"k\"}}";
    char logged[512];
    size_t n = 0;
    CHECK_OK(dw_gateway_redact((const uint8_t *)secret, strlen(secret), logged, sizeof logged, &n), dw_last_error(), "redact");
    CHECK(strstr(logged, "s3cret") == NULL && strstr(logged, "[REDACTED]") != NULL, "redacted: %s", logged);
    CHECK_OK(dw_gateway_redact((const uint8_t *)"token s3cret", 12, logged, sizeof logged, &n), dw_last_error(), "redact");
    CHECK(strstr(logged, "s3cret") == NULL, "text that is not JSON is not echoed: %s", logged);
    json_decref(events);
    json_decref(gw_events);
    dw_peer_free(commander);
    dw_gateway_free(gw);
}

/* ------------------------------------------------------------ mobile */

static void mobile(void) {
    uint8_t entropy[DW_ENTROPY_LEN] = {1, 2, 3};
    dw_mobile_server *server = NULL;
    dw_mobile_client *phone = NULL;
    CHECK_OK(dw_mobile_server_new(NULL, entropy, &server), dw_last_error(), "server");
    CHECK_OK(dw_mobile_client_new(NULL, NULL, &phone), dw_last_error(), "phone");
    dw_str code;
    CHECK_OK(dw_mobile_server_start_pairing(server, 0, &code), dw_mobile_server_last_error(server), "pairing");
    char pairing[16];
    snprintf(pairing, sizeof pairing, "%.*s", (int)code.len, code.ptr);
    CHECK(strlen(pairing) == 6, "a six-digit code");
    CHECK_OK(dw_mobile_client_pair(phone, 0, pairing), dw_mobile_client_last_error(phone), "pair");
    char *token = NULL;
    int connected = 0;
    for (int round = 0; round < 10; round++) {
        dw_output out;
        for (;;) {
            CHECK_OK(dw_mobile_client_poll_output(phone, 0, &out), dw_mobile_client_last_error(phone), "phone poll");
            if (out.kind == DW_OUTPUT_TIMEOUT) break;
            if (out.kind == DW_OUTPUT_CONNECT) {
                dw_str admission;
                CHECK(out.len == 0, "no bearer while pairing");
                CHECK_OK(dw_mobile_server_open(server, 0, 9, NULL, &admission), dw_mobile_server_last_error(server), "open");
                CHECK(strcmp(admission.ptr, "\"awaiting_pairing\"") == 0, "admission %s", admission.ptr);
                CHECK_OK(dw_mobile_client_connected(phone, 0), dw_mobile_client_last_error(phone), "connected");
            } else if (out.kind == DW_OUTPUT_TRANSMIT) {
                CHECK_OK(dw_mobile_server_handle_text(server, 0, 9, out.data, out.len), dw_mobile_server_last_error(server), "text");
            } else if (out.kind == DW_OUTPUT_EVENT) {
                json_t *ev = event_json(&out);
                json_t *paired = json_object_get(ev, "paired");
                if (paired != NULL) {
                    const char *t = json_string_value(json_object_get(paired, "token"));
                    token = malloc(strlen(t) + 1);
                    strcpy(token, t);
                }
                if (json_is_string(ev) && strcmp(json_string_value(ev), "connected") == 0) connected = 1;
                json_decref(ev);
            }
        }
        for (;;) {
            CHECK_OK(dw_mobile_server_poll_output(server, 0, &out), dw_mobile_server_last_error(server), "server poll");
            if (out.kind == DW_OUTPUT_TIMEOUT) break;
            if (out.kind == DW_OUTPUT_TRANSMIT) {
                CHECK(out.conn == 9, "conn");
                CHECK_OK(dw_mobile_client_handle_text(phone, 0, out.data, out.len), dw_mobile_client_last_error(phone), "text");
            }
        }
    }
    CHECK(token != NULL && strlen(token) == 64, "paired with a 256-bit token");
    CHECK(connected, "the phone is connected");
    dw_str stored;
    CHECK_OK(dw_mobile_client_token(phone, &stored), dw_mobile_client_last_error(phone), "token");
    CHECK(token && stored.len == strlen(token) && memcmp(stored.ptr, token, stored.len) == 0, "the token is stored");
    /* The upgrade's Authorization header gives the token back. */
    char header[128], bearer[128];
    size_t n = 0;
    snprintf(header, sizeof header, "bearer  %s", token ? token : "");
    CHECK_OK(dw_mobile_bearer_token(header, bearer, sizeof bearer, &n), dw_last_error(), "bearer");
    CHECK(token && strcmp(bearer, token) == 0, "bearer token from the header");
    CHECK(dw_mobile_bearer_token("Basic abc", bearer, sizeof bearer, &n) == DW_STATUS_MALFORMED, "Basic is not Bearer");
    /* A wrong token is refused at the upgrade. */
    dw_str admission;
    CHECK_OK(dw_mobile_server_open(server, 0, 10, "not-a-token", &admission), dw_mobile_server_last_error(server), "open");
    CHECK(strcmp(admission.ptr, "{\"refused\":\"bad_token\"}") == 0, "admission %s", admission.ptr);
    free(token);
    dw_mobile_client_free(phone);
    dw_mobile_server_free(server);
}


/* ------------------------------------------------------------ many desks on one connection */

#define N_DESKS 8

typedef struct {
    dw_sim_network *net;
    dw_multi_desk *desks;
    dw_remote *remotes[N_DESKS];
    uint64_t desks_conn, remote_conns[N_DESKS], alice_conn;
    uint64_t now;
    json_t *desk_events, *remote_events[N_DESKS];
    /* When each remote saw its request (the virtual clock, plus 1). */
    uint64_t request_at[N_DESKS];
    /* What the plain IRC client in #d0 received, all of it. */
    char *alice_got;
    size_t alice_len;
} multi_world;

static uint64_t multi_pump(multi_world *w) {
    uint64_t deadline = UINT64_MAX;
    for (int round = 0; round < 100000; round++) {
        int moved = 0;
        dw_output out;
        deadline = UINT64_MAX;
        for (;;) {
            CHECK_OK(dw_multi_desk_poll_output(w->desks, w->now, &out), dw_multi_desk_last_error(w->desks), "desks poll");
            if (out.kind == DW_OUTPUT_TIMEOUT) {
                deadline = out.deadline_ms < deadline ? out.deadline_ms : deadline;
                break;
            }
            moved = 1;
            if (out.kind == DW_OUTPUT_TRANSMIT) {
                CHECK_OK(dw_sim_network_handle_bytes(w->net, w->desks_conn, out.data, out.len),
                         dw_sim_network_last_error(w->net), "net in");
            } else if (out.kind == DW_OUTPUT_EVENT) {
                json_array_append_new(w->desk_events, event_json(&out));
            }
        }
        for (int i = 0; i < N_DESKS; i++) {
            for (;;) {
                CHECK_OK(dw_remote_poll_output(w->remotes[i], w->now, &out), dw_remote_last_error(w->remotes[i]),
                         "remote poll");
                if (out.kind == DW_OUTPUT_TIMEOUT) {
                    deadline = out.deadline_ms < deadline ? out.deadline_ms : deadline;
                    break;
                }
                moved = 1;
                if (out.kind == DW_OUTPUT_TRANSMIT) {
                    CHECK_OK(dw_sim_network_handle_bytes(w->net, w->remote_conns[i], out.data, out.len),
                             dw_sim_network_last_error(w->net), "net in");
                } else if (out.kind == DW_OUTPUT_EVENT) {
                    json_t *event = event_json(&out);
                    if (json_object_get(event, "request") != NULL && w->request_at[i] == 0) {
                        w->request_at[i] = w->now + 1;
                    }
                    json_array_append_new(w->remote_events[i], event);
                }
            }
        }
        dw_str bytes;
        CHECK_OK(dw_sim_network_take_bytes(w->net, w->desks_conn, &bytes), dw_sim_network_last_error(w->net), "take");
        if (bytes.len > 0) {
            moved = 1;
            CHECK_OK(dw_multi_desk_handle_bytes(w->desks, w->now, (const uint8_t *)bytes.ptr, bytes.len),
                     dw_multi_desk_last_error(w->desks), "desks bytes");
        }
        for (int i = 0; i < N_DESKS; i++) {
            CHECK_OK(dw_sim_network_take_bytes(w->net, w->remote_conns[i], &bytes), dw_sim_network_last_error(w->net), "take");
            if (bytes.len > 0) {
                moved = 1;
                CHECK_OK(dw_remote_handle_bytes(w->remotes[i], w->now, (const uint8_t *)bytes.ptr, bytes.len),
                         dw_remote_last_error(w->remotes[i]), "remote bytes");
            }
        }
        CHECK_OK(dw_sim_network_take_bytes(w->net, w->alice_conn, &bytes), dw_sim_network_last_error(w->net), "take");
        if (bytes.len > 0) {
            moved = 1;
            w->alice_got = realloc(w->alice_got, w->alice_len + bytes.len + 1);
            memcpy(w->alice_got + w->alice_len, bytes.ptr, bytes.len);
            w->alice_len += bytes.len;
            w->alice_got[w->alice_len] = 0;
        }
        if (!moved) {
            return deadline;
        }
    }
    CHECK(0, "the desks do not settle");
    return deadline;
}

static void multi_run_until(multi_world *w, int (*done)(multi_world *), uint64_t limit) {
    uint64_t end = w->now + limit;
    while (!done(w) && w->now <= end) {
        uint64_t deadline = multi_pump(w);
        if (done(w)) {
            break;
        }
        w->now = deadline > w->now ? deadline : w->now + 1;
        CHECK_OK(dw_multi_desk_handle_timeout(w->desks, w->now), dw_multi_desk_last_error(w->desks), "timeout");
        for (int i = 0; i < N_DESKS; i++) {
            CHECK_OK(dw_remote_handle_timeout(w->remotes[i], w->now), dw_remote_last_error(w->remotes[i]), "timeout");
        }
    }
}

/* The desk events of one kind, in channel `channel` (NULL: any). */
static size_t count_desk_events(multi_world *w, const char *kind, const char *channel) {
    size_t i, n = 0;
    json_t *e;
    json_array_foreach(w->desk_events, i, e) {
        const char *c = json_string_value(json_object_get(e, "channel"));
        if (json_object_get(e, kind) != NULL && (channel == NULL || (c != NULL && strcmp(c, channel) == 0))) {
            n++;
        }
    }
    return n;
}

static int all_requests_arrived(multi_world *w) {
    for (int i = 0; i < N_DESKS; i++) {
        if (find_event(w->remote_events[i], "request") == NULL) {
            return 0;
        }
    }
    return 1;
}

static int all_answered(multi_world *w) {
    return count_desk_events(w, "response", NULL) + count_desk_events(w, "failed", NULL) >= N_DESKS;
}

static int alice_in_a(multi_world *w) {
    return w->alice_got != NULL && strstr(w->alice_got, " 366 alice #d0 ") != NULL;
}

static int chat_arrived(multi_world *w) {
    return count_desk_events(w, "chat", "#d0") >= 3;
}

static int alice_has_text(multi_world *w) {
    return w->alice_got != NULL && strstr(w->alice_got, "the end.") != NULL;
}

static void alice_says(multi_world *w, const char *lines) {
    CHECK_OK(dw_sim_network_handle_bytes(w->net, w->alice_conn, (const uint8_t *)lines, strlen(lines)),
             dw_sim_network_last_error(w->net), "alice");
}

static void multi_desks(void) {
    multi_world w = {0};
    char channel[16], nick[16], config[256];
    w.desk_events = json_array();
    CHECK_OK(dw_sim_network_new(11, 0, &w.net), dw_last_error(), "network");
    CHECK_OK(dw_sim_network_connect(w.net, "10.0.0.1", &w.desks_conn), dw_sim_network_last_error(w.net), "connect");
    CHECK_OK(dw_sim_network_connect(w.net, "10.0.0.9", &w.alice_conn), dw_sim_network_last_error(w.net), "connect");
    CHECK_OK(dw_multi_desk_new("{\"nick\":\"npcs\",\"channel\":\"\"}", 0, 42, &w.desks), dw_last_error(), "desks");
    CHECK_OK(dw_multi_desk_set_chat(w.desks, true), dw_multi_desk_last_error(w.desks), "chat on");
    CHECK_OK(dw_multi_desk_set_membership(w.desks, true), dw_multi_desk_last_error(w.desks), "membership on");
    for (int i = 0; i < N_DESKS; i++) {
        snprintf(channel, sizeof channel, "#d%d", i);
        snprintf(nick, sizeof nick, "rex%d", i);
        w.remote_events[i] = json_array();
        CHECK_OK(dw_sim_network_connect(w.net, "10.0.0.2", &w.remote_conns[i]), dw_sim_network_last_error(w.net), "connect");
        snprintf(config, sizeof config, "{\"nick\":\"%s\",\"channel\":\"%s\",\"oa1\":{\"allowed_sender\":\"npcs\"}}", nick, channel);
        CHECK_OK(dw_remote_new(config, 0, &w.remotes[i]), dw_last_error(), "remote");
        CHECK_OK(dw_multi_desk_add_desk(w.desks, 0, channel, nick), dw_multi_desk_last_error(w.desks), "add desk");
    }
    alice_says(&w, "NICK alice\r\nUSER alice 0 * :Alice\r\n");

    /* Every desk asks at once, before anything is connected; each request waits in its desk.
     * Desk 0 sends a long request (about 40 lines), which must not hold the others' one-line
     * requests back: the connection's pacing goes round the channels in turn. */
    char ids[N_DESKS][80];
    size_t long_len = 0;
    static char long_text[12000];
    for (int n = 0; long_len < 10000; n++) {
        long_len += (size_t)sprintf(long_text + long_len, "echo line %d\n", n);
    }
    for (int i = 0; i < N_DESKS; i++) {
        snprintf(channel, sizeof channel, "#d%d", i);
        dw_str id;
        if (i == 0) {
            CHECK_OK(dw_multi_desk_request(w.desks, 0, channel, (const uint8_t *)long_text, long_len, 600000, &id),
                     dw_multi_desk_last_error(w.desks), "request");
        } else {
            char command[64];
            snprintf(command, sizeof command, "{\"command\":\"whoami in %s\",\"timeout_sec\":600}", channel);
            CHECK_OK(dw_multi_desk_remote_bash(w.desks, 0, channel, command, &id), dw_multi_desk_last_error(w.desks),
                     "remote bash");
        }
        snprintf(ids[i], sizeof ids[i], "%.*s", (int)id.len, id.ptr);
    }
    multi_run_until(&w, all_requests_arrived, 600000);
    for (int i = 1; i < N_DESKS; i++) {
        CHECK(w.request_at[i] != 0 && w.request_at[i] < w.request_at[0],
              "desk %d's short request came before desk 0's long one ended (%llu, %llu)", i,
              (unsigned long long)w.request_at[i], (unsigned long long)w.request_at[0]);
    }
    /* Each remote got its own desk's request, and answers with text of its own (remote 0 with
     * the long text back). */
    for (int i = 0; i < N_DESKS; i++) {
        json_t *request = find_event(w.remote_events[i], "request");
        char want[64];
        snprintf(want, sizeof want, "whoami in #d%d", i);
        const char *payload = request ? json_string_value(json_object_get(request, "payload")) : NULL;
        if (i == 0) {
            CHECK(payload && strlen(payload) == long_len && memcmp(payload, long_text, long_len) == 0,
                  "remote 0 got the long request whole");
        } else {
            CHECK(payload && strcmp(payload, want) == 0, "remote %d got %s", i, payload ? payload : "nothing");
        }
        CHECK(request && strcmp(json_string_value(json_object_get(request, "id")), ids[i]) == 0, "remote %d: the id", i);
        size_t requests = 0, k;
        json_t *e;
        json_array_foreach(w.remote_events[i], k, e) {
            requests += json_object_get(e, "request") != NULL;
        }
        CHECK(requests == 1, "remote %d got only its own request, not %zu", i, requests);
        char answer[64];
        snprintf(answer, sizeof answer, "I am rex%d", i);
        const char *text = i == 0 ? long_text : answer;
        size_t len = i == 0 ? long_len : strlen(answer);
        CHECK_OK(dw_remote_respond(w.remotes[i], w.now, ids[i], (const uint8_t *)text, len),
                 dw_remote_last_error(w.remotes[i]), "respond");
    }
    multi_run_until(&w, all_answered, 600000);
    for (int i = 0; i < N_DESKS; i++) {
        snprintf(channel, sizeof channel, "#d%d", i);
        CHECK(count_desk_events(&w, "response", channel) == 1, "one response in %s", channel);
        size_t k;
        json_t *e;
        json_array_foreach(w.desk_events, k, e) {
            json_t *response = json_object_get(e, "response");
            const char *c = json_string_value(json_object_get(e, "channel"));
            if (response == NULL || c == NULL || strcmp(c, channel) != 0) {
                continue;
            }
            CHECK(strcmp(json_string_value(json_object_get(response, "id")), ids[i]) == 0, "%s: its own id", channel);
            const char *text = json_string_value(json_object_get(response, "text"));
            char answer[64];
            snprintf(answer, sizeof answer, "I am rex%d", i);
            if (i == 0) {
                CHECK(text && strlen(text) == long_len && memcmp(text, long_text, long_len) == 0, "#d0: the long answer whole");
            } else {
                CHECK(text && strcmp(text, answer) == 0, "%s: its own answer, got %.40s", channel, text ? text : "");
            }
        }
    }
    /* The tool result follows the last OA1 event. */
    dw_str call, result;
    CHECK_OK(dw_multi_desk_tool_result(w.desks, &call, &result), dw_multi_desk_last_error(w.desks), "tool result");
    CHECK(call.len == strlen(ids[0]) && memcmp(call.ptr, ids[0], call.len) == 0, "the tool result's id");
    CHECK(result.len == long_len && memcmp(result.ptr, long_text, long_len) == 0, "the tool result's text");

    dw_str view;
    CHECK_OK(dw_multi_desk_channel_info(w.desks, "#d3", &view), dw_multi_desk_last_error(w.desks), "info");
    json_t *info = parse_json(view.ptr, view.len);
    CHECK(strcmp(json_string_value(json_object_get(info, "state")), "ready") == 0, "#d3 ready");
    CHECK(json_integer_value(json_object_get(info, "in_flight")) == 0, "#d3 has nothing in flight");
    CHECK(json_string_value(json_array_get(json_object_get(info, "members"), 0)) != NULL &&
              strcmp(json_string_value(json_array_get(json_object_get(info, "members"), 0)), "rex3") == 0,
          "#d3's members: rex3");
    CHECK(json_integer_value(json_object_get(json_object_get(info, "stats"), "frames_in")) >= 1, "#d3 counted its frames");
    json_decref(info);

    /* Chat: a plain IRC client in #d0 talks; OA1 frames are not chat. */
    alice_says(&w, "JOIN #d0\r\n");
    multi_run_until(&w, alice_in_a, 60000);
    alice_says(&w, "PRIVMSG #d0 :hello desks\r\nPRIVMSG #d0 :OA1 REQ zzzzzz 1 0 ls\r\nNOTICE #d0 :a notice\r\n"
                   "PRIVMSG #d0 :\001ACTION waves\001\r\n");
    multi_run_until(&w, chat_arrived, 60000);
    const char *want_kind[3] = {"privmsg", "notice", "action"};
    const char *want_text[3] = {"hello desks", "a notice", "waves"};
    size_t k, seen = 0;
    json_t *e;
    json_array_foreach(w.desk_events, k, e) {
        json_t *chat = json_object_get(e, "chat");
        if (chat == NULL) {
            continue;
        }
        CHECK(seen < 3, "only three chat messages");
        if (seen < 3) {
            CHECK(strcmp(json_string_value(json_object_get(e, "channel")), "#d0") == 0, "chat in #d0");
            CHECK(strncmp(json_string_value(json_object_get(chat, "sender")), "alice!", 6) == 0, "chat sender %s",
                  json_string_value(json_object_get(chat, "sender")));
            CHECK(strcmp(json_string_value(json_object_get(chat, "kind")), want_kind[seen]) == 0, "chat kind %s",
                  json_string_value(json_object_get(chat, "kind")));
            CHECK(strcmp(json_string_value(json_object_get(chat, "text")), want_text[seen]) == 0, "chat text %s",
                  json_string_value(json_object_get(chat, "text")));
            CHECK(json_is_array(json_object_get(chat, "tags")), "chat tags");
        }
        seen++;
    }
    CHECK(seen == 3, "three chat messages, not %zu", seen);
    /* Membership: alice's join, and each channel's member list. */
    int alice_joined = 0, names = 0;
    json_array_foreach(w.desk_events, k, e) {
        json_t *m = json_object_get(e, "membership");
        if (m == NULL) {
            continue;
        }
        const char *kind = json_string_value(json_object_get(m, "kind"));
        const char *nick_ = json_string_value(json_object_get(m, "nick"));
        if (strcmp(kind, "joined") == 0 && nick_ && strcmp(nick_, "alice") == 0 &&
            strcmp(json_string_value(json_object_get(e, "channel")), "#d0") == 0) {
            alice_joined++;
        }
        if (strcmp(kind, "names") == 0) {
            names++;
        }
    }
    CHECK(alice_joined == 1, "alice's join into #d0: %d", alice_joined);
    if (alice_joined != 1) {
        json_array_foreach(w.desk_events, k, e) {
            if (json_object_get(e, "membership") != NULL) {
                char *d = dump(e);
                fprintf(stderr, "  %s\n", d);
                free(d);
            }
        }
    }
    CHECK(names == N_DESKS, "a member list per channel: %d", names);

    /* Long text to #d0, cut at word boundaries, none starting "OA1 ". */
    static char words[3000];
    size_t wl = 0;
    for (int n = 0; wl < 2500; n++) {
        wl += (size_t)sprintf(words + wl, "%sword%d", n ? " " : "", n);
    }
    wl += (size_t)sprintf(words + wl, " OA1 inside is fine; the end.");
    size_t lines = 0;
    CHECK_OK(dw_multi_desk_send_text(w.desks, "#d0", (const uint8_t *)words, wl, false, &lines),
             dw_multi_desk_last_error(w.desks), "send text");
    CHECK(lines >= 5, "cut into %zu lines", lines);
    free(w.alice_got);
    w.alice_got = NULL;
    w.alice_len = 0;
    multi_run_until(&w, alice_has_text, 600000);
    /* Reassemble what alice read: each line ":npcs!... PRIVMSG #d0 :<part>". */
    char *joined = calloc(1, w.alice_len + 1);
    size_t jl = 0, got_lines = 0;
    for (char *line = w.alice_got; line && *line;) {
        char *end = strstr(line, "\r\n");
        if (end == NULL) {
            break;
        }
        *end = 0;
        const char *mark = strstr(line, " PRIVMSG #d0 :");
        if (strncmp(line, ":npcs!", 6) == 0 && mark != NULL) {
            const char *part = mark + strlen(" PRIVMSG #d0 :");
            CHECK(strlen(line) + 2 <= 512, "a line fits: %zu", strlen(line) + 2);
            CHECK(strncmp(part, "OA1 ", 4) != 0, "no line starts with OA1");
            CHECK(part[0] != ' ' && part[strlen(part) - 1] != ' ', "cut at a space, not beside it");
            jl += (size_t)sprintf(joined + jl, "%s%s", got_lines ? " " : "", part);
            got_lines++;
        }
        line = end + 2;
    }
    CHECK(got_lines == lines, "alice read %zu lines of %zu", got_lines, lines);
    CHECK(jl == wl && memcmp(joined, words, wl) == 0, "the words arrived whole and in order");
    free(joined);

    /* A removed desk's channel is unknown; the others still work. */
    CHECK_OK(dw_multi_desk_remove_desk(w.desks, w.now, "#d7"), dw_multi_desk_last_error(w.desks), "remove");
    dw_str id;
    CHECK(dw_multi_desk_request(w.desks, w.now, "#d7", (const uint8_t *)"x", 1, 0, &id) == DW_STATUS_REFUSED &&
              strcmp(dw_multi_desk_last_error_kind(w.desks), "unknown_channel") == 0,
          "#d7 after removal: %s", dw_multi_desk_last_error_kind(w.desks));
    CHECK_OK(dw_multi_desk_channels(w.desks, &view), dw_multi_desk_last_error(w.desks), "channels");
    CHECK(strstr(view.ptr, "#d7") == NULL && strstr(view.ptr, "#d6") != NULL, "channels %s", view.ptr);
    CHECK_OK(dw_multi_desk_stats(w.desks, &view), dw_multi_desk_last_error(w.desks), "stats");
    json_t *stats = parse_json(view.ptr, view.len);
    CHECK(json_integer_value(json_object_get(stats, "chat_dropped")) == 0, "no chat dropped");
    json_decref(stats);

    free(w.alice_got);
    json_decref(w.desk_events);
    for (int i = 0; i < N_DESKS; i++) {
        json_decref(w.remote_events[i]);
        dw_remote_free(w.remotes[i]);
    }
    dw_multi_desk_free(w.desks);
    dw_sim_network_free(w.net);
}

int main(void) {
    desk_and_remote();
    multi_desks();
    bare_pair();
    peers(DW_DIALECT_JSONRPC2, NULL, "jsonrpc2/ndjson");
    peers(DW_DIALECT_SIDECAR, "{\"framing\":\"content_length\"}", "sidecar/content-length");
    default_timeouts();
    gateway();
    mobile();
    return finish("exchange");
}
