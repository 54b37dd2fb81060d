/* Runs every conformance vector file in tests/vectors/ through the C API.
 *
 *   vectors <repository root>
 *
 * Cases this runner cannot run, with the reason:
 * - gateway.json sequences: the `ts` of each output envelope is the host's wall clock (here
 *   epoch 1771416000000 + now_ms), not the vectors' fixed instant, so `ts` is compared only for
 *   being a timestamp string and then set to the vector's before the comparison.
 * - rexd.json "request: id beyond i64": its id 9223372036854775808 does not fit jansson's
 *   json_int_t, so jansson cannot read it; the file is read with that number as 0 and the case
 *   skipped (the Rust runner refuses it, as the vector says).
 */
#include "common.h"

#include <stdint.h>

static const char *root;
static buffer buf = BUFFER_INIT;

static json_t *load(const char *rel) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    return load_json(path);
}

static char *copy_string(const char *s) {
    char *copy = malloc(strlen(s) + 1);
    strcpy(copy, s);
    return copy;
}

static const char *str(const json_t *obj, const char *key) {
    const char *s = json_string_value(json_object_get(obj, key));
    return s != NULL ? s : "";
}

/* The output JSON of a buffer call, parsed; NULL when the status is not OK. */
static json_t *buffer_json(dw_status st) {
    if (st != DW_STATUS_OK) {
        return NULL;
    }
    return parse_json(buf.data, buf.len);
}

static json_t *view_json(dw_str view) {
    return parse_json(view.ptr, view.len);
}

/* ---------------------------------------------------------------- oa1.json */

static const json_t *g_text;
static size_t g_len;
static size_t g_budget;

#define ESCAPE(o, c, l) dw_oa1_escape((const uint8_t *)json_string_value(g_text), g_len, o, c, l)
#define UNESCAPE(o, c, l) dw_oa1_unescape((const uint8_t *)json_string_value(g_text), g_len, o, c, l)
#define FRAME_PARSE(o, c, l) dw_oa1_frame_parse((const uint8_t *)json_string_value(g_text), g_len, o, c, l)
#define CHUNK(o, c, l) dw_oa1_chunk((const uint8_t *)json_string_value(g_text), g_len, g_budget, o, c, l)
#define ERR_PAYLOAD(o, c, l) dw_oa1_err_payload((const uint8_t *)json_string_value(g_text), g_len, o, c, l)
static const char *g_frame_text;
#define FRAME_FORMAT(o, c, l) dw_oa1_frame_format(g_frame_text, o, c, l)

static void oa1_codec(const json_t *doc) {
    size_t i;
    json_t *c;
    dw_status st;
    json_array_foreach(json_object_get(doc, "escape"), i, c) {
        g_text = json_object_get(c, "text");
        g_len = json_string_length(g_text);
        BUF_CALL(st, &buf, ESCAPE);
        const json_t *want = json_object_get(c, "escaped");
        CHECK(st == DW_STATUS_OK && buf.len == json_string_length(want) &&
                  memcmp(buf.data, json_string_value(want), buf.len) == 0,
              "escape %s", str(c, "name"));
    }
    json_array_foreach(json_object_get(doc, "unescape"), i, c) {
        g_text = json_object_get(c, "escaped");
        g_len = json_string_length(g_text);
        BUF_CALL(st, &buf, UNESCAPE);
        const json_t *want = json_object_get(c, "text");
        CHECK(st == DW_STATUS_OK && buf.len == json_string_length(want) &&
                  memcmp(buf.data, json_string_value(want), buf.len) == 0,
              "unescape %s", str(c, "name"));
    }
    json_array_foreach(json_object_get(doc, "frames"), i, c) {
        g_text = json_object_get(c, "text");
        g_len = json_string_length(g_text);
        BUF_CALL(st, &buf, FRAME_PARSE);
        json_t *got = buffer_json(st);
        CHECK(json_same(got, json_object_get(c, "frame")), "frame %s", str(c, "name"));
        json_decref(got);
    }
    json_array_foreach(json_object_get(doc, "format"), i, c) {
        char *frame = dump(json_object_get(c, "frame"));
        g_frame_text = frame;
        BUF_CALL(st, &buf, FRAME_FORMAT);
        CHECK(st == DW_STATUS_OK && strcmp(buf.data, str(c, "text")) == 0, "format %s: %s",
              str(c, "name"), st == DW_STATUS_OK ? buf.data : dw_last_error());
        free(frame);
    }
    json_array_foreach(json_object_get(doc, "chunks"), i, c) {
        g_text = json_object_get(c, "text");
        g_len = json_string_length(g_text);
        g_budget = (size_t)json_integer_value(json_object_get(c, "budget"));
        BUF_CALL(st, &buf, CHUNK);
        json_t *got = buffer_json(st);
        CHECK(json_same(got, json_object_get(c, "payloads")), "chunks %s", str(c, "name"));
        json_decref(got);
    }
    json_array_foreach(json_object_get(doc, "err_payloads"), i, c) {
        g_text = json_object_get(c, "payload");
        g_len = json_string_length(g_text);
        BUF_CALL(st, &buf, ERR_PAYLOAD);
        json_t *got = buffer_json(st);
        CHECK(got != NULL && strcmp(str(got, "code"), str(c, "code")) == 0 &&
                  strcmp(str(got, "message"), str(c, "message")) == 0,
              "err payload %s", str(c, "name"));
        json_decref(got);
    }
}

/* An OA1 endpoint of an exchange: a bare client or a bare server. */
typedef struct {
    dw_oa1_client *client;
    dw_oa1_server *server;
} endpoint;

static const char *endpoint_error(const endpoint *e) {
    return e->client ? dw_oa1_client_last_error(e->client) : dw_oa1_server_last_error(e->server);
}

static const char *endpoint_kind(const endpoint *e) {
    return e->client ? dw_oa1_client_last_error_kind(e->client)
                     : dw_oa1_server_last_error_kind(e->server);
}

/* An output as the vectors write it. */
static json_t *output_json(const dw_output *out, const json_t *expected) {
    switch (out->kind) {
    case DW_OUTPUT_TRANSMIT:
        return json_pack("{s:s%}", "transmit", (const char *)out->data, out->len);
    case DW_OUTPUT_TIMEOUT:
        return json_pack("{s:I}", "timeout", (json_int_t)out->deadline_ms);
    case DW_OUTPUT_EVENT: {
        json_t *event = event_json(out);
        json_t *failed = json_object_get(event, "failed");
        /* The texts for timeout and incomplete are not part of the protocol: compare the
         * message only where the vector has one. */
        if (failed != NULL &&
            json_object_get(json_object_get(json_object_get(expected, "event"), "failed"),
                            "message") == NULL) {
            json_object_del(failed, "message");
        }
        return json_pack("{s:o}", "event", event);
    }
    default:
        return json_pack("{s:i}", "unexpected", (int)out->kind);
    }
}

static void run_exchange(const json_t *exchange) {
    const char *name = str(exchange, "name");
    char *config = dump(json_object_get(exchange, "config"));
    endpoint e = {NULL, NULL};
    dw_status st;
    if (strcmp(str(exchange, "endpoint"), "client") == 0) {
        uint64_t seed = (uint64_t)json_integer_value(json_object_get(exchange, "seed"));
        st = dw_oa1_client_new(config, seed, &e.client);
    } else {
        st = dw_oa1_server_new(config, &e.server);
    }
    free(config);
    CHECK_OK(st, dw_last_error(), name);
    if (st != DW_STATUS_OK) {
        return;
    }
    json_t *ids = json_object();
    size_t index;
    json_t *raw;
    json_array_foreach(json_object_get(exchange, "steps"), index, raw) {
        /* Bind the ids seen so far into the step. */
        char *text = dump(raw);
        const char *key;
        json_t *value;
        json_object_foreach(ids, key, value) {
            char *bound = replace_all(text, key, json_string_value(value));
            free(text);
            text = bound;
        }
        json_t *step = parse_json(text, strlen(text));
        free(text);
        uint64_t now = (uint64_t)json_integer_value(json_object_get(step, "at"));
        json_t *x;
        if ((x = json_object_get(step, "line")) != NULL) {
            const uint8_t *line = (const uint8_t *)json_string_value(x);
            size_t len = json_string_length(x);
            st = e.client ? dw_oa1_client_handle_line(e.client, now, line, len)
                          : dw_oa1_server_handle_line(e.server, now, line, len);
            CHECK_OK(st, endpoint_error(&e), name);
        } else if ((x = json_object_get(step, "poll")) != NULL) {
            json_t *got = json_array();
            for (;;) {
                dw_output out;
                st = e.client ? dw_oa1_client_poll_output(e.client, now, &out)
                              : dw_oa1_server_poll_output(e.server, now, &out);
                if (st != DW_STATUS_OK) {
                    CHECK_OK(st, endpoint_error(&e), name);
                    break;
                }
                json_array_append_new(got, output_json(&out, json_array_get(x, json_array_size(got))));
                if (out.kind == DW_OUTPUT_TIMEOUT || json_array_size(got) > json_array_size(x) + 50) {
                    break;
                }
            }
            if (!json_same(got, x)) {
                char *g = dump(got), *w = dump(x);
                CHECK(0, "%s step %zu:\n  got  %s\n  want %s", name, index, g, w);
                free(g);
                free(w);
            } else {
                CHECK(1, "poll");
            }
            json_decref(got);
        } else if ((x = json_object_get(step, "stats")) != NULL) {
            dw_str view;
            st = e.client ? dw_oa1_client_stats(e.client, &view) : dw_oa1_server_stats(e.server, &view);
            CHECK_OK(st, endpoint_error(&e), name);
            json_t *stats = view_json(view);
            json_object_foreach(x, key, value) {
                CHECK(json_same(json_object_get(stats, key), value), "%s step %zu: counter %s",
                      name, index, key);
            }
            json_decref(stats);
        } else {
            json_t *a;
            if ((a = json_object_get(step, "request")) != NULL) {
                const char *payload = str(a, "payload");
                json_t *t = json_object_get(a, "timeout_ms");
                dw_str id;
                st = dw_oa1_client_request(e.client, now, (const uint8_t *)payload,
                                           strlen(payload), t ? (uint64_t)json_integer_value(t) : 0, &id);
                const char *bind = json_string_value(json_object_get(step, "bind"));
                if (st == DW_STATUS_OK && bind != NULL) {
                    json_object_set_new(ids, bind, json_stringn(id.ptr, id.len));
                }
            } else if ((a = json_object_get(step, "cancel")) != NULL) {
                st = dw_oa1_client_cancel(e.client, now, str(a, "id"), str(a, "reason"));
            } else if ((a = json_object_get(step, "send")) != NULL) {
                const char *t = str(a, "text");
                st = dw_oa1_server_send(e.server, now, str(a, "id"), (const uint8_t *)t, strlen(t));
            } else if ((a = json_object_get(step, "finish")) != NULL) {
                st = dw_oa1_server_finish(e.server, now, str(a, "id"));
            } else if ((a = json_object_get(step, "respond")) != NULL) {
                const char *t = str(a, "text");
                st = dw_oa1_server_respond(e.server, now, str(a, "id"), (const uint8_t *)t, strlen(t));
            } else if ((a = json_object_get(step, "fail")) != NULL) {
                st = dw_oa1_server_fail(e.server, now, str(a, "id"), str(a, "code"), str(a, "message"));
            } else {
                CHECK(0, "%s: unknown step %zu", name, index);
                st = DW_STATUS_OK;
            }
            const char *expect_error = json_string_value(json_object_get(step, "expect_error"));
            if (expect_error != NULL) {
                CHECK(st == DW_STATUS_REFUSED && strcmp(endpoint_kind(&e), expect_error) == 0,
                      "%s step %zu: want %s, got %s %s", name, index, expect_error,
                      dw_status_str(st), endpoint_kind(&e));
            } else {
                CHECK_OK(st, endpoint_error(&e), name);
            }
        }
        json_decref(step);
    }
    json_decref(ids);
    dw_oa1_client_free(e.client);
    dw_oa1_server_free(e.server);
}

static void oa1(void) {
    json_t *doc = load("tests/vectors/oa1.json");
    oa1_codec(doc);
    size_t i;
    json_t *exchange;
    json_array_foreach(json_object_get(doc, "exchanges"), i, exchange) {
        run_exchange(exchange);
    }
    json_decref(doc);
}

/* ---------------------------------------------------------------- irc-msg-split.json */

static const char *g_line;
#define PARSE_LINE(o, c, l) dw_irc_parse_line((const uint8_t *)g_line, strlen(g_line), o, c, l)

static void irc(void) {
    json_t *doc = load("tests/vectors/irc-msg-split.json");
    size_t i;
    json_t *c;
    int n = 0;
    json_array_foreach(json_object_get(doc, "tests"), i, c) {
        g_line = str(c, "input");
        dw_status st;
        BUF_CALL(st, &buf, PARSE_LINE);
        json_t *got = buffer_json(st);
        json_t *want = json_deep_copy(json_object_get(c, "atoms"));
        /* The vectors leave out empty params and tags. */
        if (json_object_get(want, "params") == NULL) {
            json_object_set_new(want, "params", json_array());
        }
        CHECK(json_same(got, want), "irc %s", g_line);
        json_decref(got);
        json_decref(want);
        n++;
    }
    CHECK(n == 35, "irc: %d vectors", n);
    json_decref(doc);
}

/* ---------------------------------------------------------------- jsonrpc.json */

static const uint8_t *g_frame;
static size_t g_frame_len;
static size_t g_batch_limit;
#define JSONRPC_PARSE(o, c, l) dw_jsonrpc_parse(g_frame, g_frame_len, g_batch_limit, o, c, l)

/* `want` is the vector's expectation (raw members as text), `got` the C API's reading. */
static void jsonrpc_check(const char *name, const json_t *got, const json_t *want) {
    const char *kind = str(want, "kind");
    CHECK(strcmp(str(got, "kind"), kind) == 0, "%s: kind %s, want %s", name, str(got, "kind"), kind);
    if (json_object_get(want, "id") != NULL) {
        CHECK(json_same(json_object_get(got, "id"), json_object_get(want, "id")), "%s: id", name);
    }
    if (json_object_get(want, "method") != NULL) {
        CHECK(strcmp(str(got, "method"), str(want, "method")) == 0, "%s: method", name);
    }
    /* Params and results are raw JSON text in the vectors. */
    const char *raw_members[] = {"params", "result"};
    for (size_t k = 0; k < 2; k++) {
        json_t *w = json_object_get(want, raw_members[k]);
        if (json_is_string(w)) {
            json_t *parsed = parse_json(json_string_value(w), json_string_length(w));
            CHECK(json_same(json_object_get(got, raw_members[k]), parsed), "%s: %s", name,
                  raw_members[k]);
            json_decref(parsed);
        } else if (strcmp(kind, "request") == 0 || strcmp(kind, "notification") == 0) {
            if (k == 0) {
                CHECK(json_object_get(got, "params") == NULL, "%s: no params", name);
            }
        }
    }
    if (json_object_get(want, "code") != NULL) {
        CHECK(json_same(json_object_get(got, "code"), json_object_get(want, "code")), "%s: code",
              name);
    }
    if (json_object_get(want, "canonical") != NULL) {
        CHECK(strcmp(str(got, "canonical"), str(want, "canonical")) == 0, "%s: canonical %s", name,
              str(got, "canonical"));
    }
}

static void jsonrpc(void) {
    json_t *doc = load("tests/vectors/jsonrpc.json");
    g_batch_limit = (size_t)json_integer_value(json_object_get(doc, "batch_limit"));
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(doc, "cases"), i, c) {
        const char *name = str(c, "name");
        uint8_t *bytes = NULL;
        if (json_object_get(c, "input") != NULL) {
            g_frame = (const uint8_t *)str(c, "input");
            g_frame_len = json_string_length(json_object_get(c, "input"));
        } else {
            const char *hex = str(c, "input_hex");
            g_frame_len = strlen(hex) / 2;
            bytes = malloc(g_frame_len + 1);
            for (size_t k = 0; k < g_frame_len; k++) {
                unsigned v;
                sscanf(hex + 2 * k, "%2x", &v);
                bytes[k] = (uint8_t)v;
            }
            g_frame = bytes;
        }
        dw_status st;
        BUF_CALL(st, &buf, JSONRPC_PARSE);
        json_t *got = buffer_json(st);
        json_t *want = json_object_get(c, "expect");
        if (strcmp(str(want, "kind"), "batch") == 0) {
            json_t *elements = json_object_get(want, "elements");
            json_t *items = json_object_get(got, "elements");
            CHECK(json_array_size(items) == json_array_size(elements), "%s: batch size", name);
            for (size_t k = 0; k < json_array_size(elements) && k < json_array_size(items); k++) {
                jsonrpc_check(name, json_array_get(items, k), json_array_get(elements, k));
            }
        } else {
            jsonrpc_check(name, got, want);
        }
        json_decref(got);
        free(bytes);
    }
    json_decref(doc);
}

/* ---------------------------------------------------------------- schema cases */

static const char *g_protocol, *g_def, *g_json;
#define SCHEMA_READ(o, c, l) dw_schema_read(g_protocol, g_def, g_json, o, c, l)

/* Cases jansson cannot hold (see the top of the file). */
static const char *const SKIPPED[][2] = {{"rexd", "request: id beyond i64"}};
#define N_SKIPPED (sizeof SKIPPED / sizeof SKIPPED[0])

static int skipped(const char *protocol, const char *name) {
    for (size_t k = 0; k < N_SKIPPED; k++) {
        if (strcmp(SKIPPED[k][0], protocol) == 0 && strcmp(SKIPPED[k][1], name) == 0) {
            return 1;
        }
    }
    return 0;
}

static void schema_cases(const char *protocol, const json_t *doc) {
    size_t i;
    json_t *c;
    size_t n = 0;
    json_array_foreach(json_object_get(doc, "cases"), i, c) {
        const char *name = str(c, "name");
        if (skipped(protocol, name)) {
            printf("vectors: skipped %s case \"%s\" (an integer beyond int64; see vectors.c)\n", protocol, name);
            continue;
        }
        char *text = dump(json_object_get(c, "json"));
        g_protocol = protocol;
        g_def = str(c, "def");
        g_json = text;
        dw_status st;
        BUF_CALL(st, &buf, SCHEMA_READ);
        int valid = json_is_true(json_object_get(c, "valid"));
        if (valid) {
            json_t *got = buffer_json(st);
            json_t *want = json_object_get(c, "canonical");
            if (want == NULL) {
                want = json_object_get(c, "json");
            }
            if (!json_same(got, want)) {
                char *g = got ? dump(got) : NULL;
                CHECK(0, "%s %s: %s -> %s (%s)", protocol, name, text, g ? g : "refused",
                      dw_last_error());
                free(g);
            } else {
                CHECK(1, "ok");
            }
            json_decref(got);
        } else {
            CHECK(st == DW_STATUS_INVALID_JSON && strcmp(dw_last_error_kind(), "invalid") == 0,
                  "%s %s: an invalid case was %s", protocol, name, dw_status_str(st));
        }
        free(text);
        n++;
    }
    CHECK(n >= 90, "%s: %zu cases", protocol, n);
}

/* ---------------------------------------------------------------- gateway sequences */

#define GATEWAY_EPOCH 1771416000000ULL

static void gateway_sequences(const json_t *doc) {
    size_t i;
    json_t *seq;
    json_array_foreach(json_object_get(doc, "sequences"), i, seq) {
        const char *name = str(seq, "name");
        json_t *config = json_deep_copy(json_object_get(seq, "config"));
        if (config == NULL) {
            config = json_object();
        }
        json_object_set_new(config, "tokens", json_pack("[s]", "s3cr3t-token"));
        char *config_text = dump(config);
        json_decref(config);
        uint8_t entropy[DW_ENTROPY_LEN] = {0};
        dw_gateway *gw = NULL;
        dw_status st = dw_gateway_new(config_text, 0, entropy, GATEWAY_EPOCH, &gw);
        free(config_text);
        CHECK_OK(st, dw_last_error(), name);
        if (st != DW_STATUS_OK) {
            continue;
        }
        uint64_t now = 0;
        size_t k;
        json_t *step;
        json_array_foreach(json_object_get(seq, "steps"), k, step) {
            json_t *n = json_object_get(step, "now_ms");
            if (n != NULL) {
                now = (uint64_t)json_integer_value(n);
            }
            json_t *in = json_object_get(step, "in");
            if (in != NULL) {
                char *text = dump(in);
                CHECK_OK(dw_gateway_handle_message(gw, now, 1, (const uint8_t *)text, strlen(text)),
                         dw_gateway_last_error(gw), name);
                free(text);
            } else {
                json_t *h = json_object_get(step, "host");
                const char *action = str(h, "action");
                const char *job = str(h, "jobId");
                if (strcmp(action, "progress") == 0) {
                    json_t *p = json_object_get(h, "progress");
                    st = dw_gateway_set_progress(gw, job, json_string_value(json_object_get(h, "step")),
                                                 p ? json_number_value(p) : -1.0);
                } else if (strcmp(action, "log") == 0) {
                    st = dw_gateway_log(gw, job, str(h, "level"), str(h, "msg"));
                } else if (strcmp(action, "review_ready") == 0) {
                    char *a = dump(json_object_get(h, "artifacts"));
                    st = dw_gateway_review_ready(gw, now, job, a);
                    free(a);
                } else if (strcmp(action, "complete") == 0) {
                    json_t *art = json_object_get(h, "artifacts");
                    char *a = art ? dump(art) : NULL;
                    st = dw_gateway_complete(gw, now, job, a);
                    free(a);
                } else if (strcmp(action, "fail") == 0) {
                    char *b = dump(json_object_get(h, "error_body"));
                    st = dw_gateway_fail(gw, now, job, b);
                    free(b);
                } else if (strcmp(action, "roll_back") == 0) {
                    st = dw_gateway_roll_back(gw, now, job);
                } else if (strcmp(action, "cancel") == 0) {
                    st = dw_gateway_cancel(gw, now, job);
                } else if (strcmp(action, "transition") == 0) {
                    st = dw_gateway_transition(gw, now, job, str(h, "to"));
                } else if (strcmp(action, "request_approval") == 0) {
                    dw_str ticket;
                    st = dw_gateway_request_approval(gw, job, json_string_value(json_object_get(h, "approvalId")),
                                                     str(h, "kind"), str(h, "requested"), &ticket);
                    if (st == DW_STATUS_OK) {
                        json_t *t = view_json(ticket);
                        const char *want = json_object_get(h, "status") ? str(h, "status") : "pending";
                        CHECK(strcmp(str(t, "status"), want) == 0, "%s step %zu: ticket %s", name, k,
                              str(t, "status"));
                        if (json_object_get(h, "approvalId") != NULL) {
                            CHECK(strcmp(str(t, "approval_id"), str(h, "approvalId")) == 0,
                                  "%s step %zu: approval id", name, k);
                        }
                        json_decref(t);
                    }
                } else if (strcmp(action, "authenticate") == 0) {
                    bool accepted = false;
                    st = dw_gateway_authenticate_connection(gw, 1, str(h, "token"), &accepted);
                    CHECK(accepted == json_is_true(json_object_get(h, "accepted")), "%s step %zu: accepted",
                          name, k);
                } else if (strcmp(action, "close") == 0) {
                    st = dw_gateway_close_connection(gw, 1);
                } else if (strcmp(action, "timeout") == 0) {
                    now = (uint64_t)json_integer_value(json_object_get(h, "now_ms"));
                    st = dw_gateway_handle_timeout(gw, now);
                } else {
                    CHECK(0, "%s: unknown host action %s", name, action);
                    st = DW_STATUS_OK;
                }
                json_t *error = json_object_get(step, "error");
                if (error != NULL) {
                    CHECK(st == DW_STATUS_REFUSED && strcmp(dw_gateway_last_error_kind(gw), "transition") == 0,
                          "%s step %zu: want a refused transition, got %s %s", name, k,
                          dw_status_str(st), dw_gateway_last_error_kind(gw));
                } else {
                    CHECK_OK(st, dw_gateway_last_error(gw), name);
                }
            }
            json_t *got = json_array();
            json_t *want = json_object_get(step, "out");
            for (;;) {
                dw_output out;
                st = dw_gateway_poll_output(gw, now, &out);
                CHECK_OK(st, dw_gateway_last_error(gw), name);
                if (st != DW_STATUS_OK || out.kind == DW_OUTPUT_TIMEOUT) {
                    break;
                }
                if (out.kind == DW_OUTPUT_TRANSMIT) {
                    CHECK(out.conn == 1, "%s: conn %llu", name, (unsigned long long)out.conn);
                    json_t *env = parse_json((const char *)out.data, out.len);
                    json_t *expected = json_array_get(want, json_array_size(got));
                    CHECK(json_is_string(json_object_get(env, "ts")), "%s: ts", name);
                    if (expected != NULL && json_object_get(expected, "ts") != NULL) {
                        json_object_set(env, "ts", json_object_get(expected, "ts"));
                    }
                    json_array_append_new(got, env);
                }
            }
            if (!json_same(got, want)) {
                char *g = dump(got), *w = dump(want);
                CHECK(0, "%s step %zu:\n  got  %s\n  want %s", name, k, g, w);
                free(g);
                free(w);
            } else {
                CHECK(1, "ok");
            }
            json_decref(got);
        }
        dw_gateway_free(gw);
    }
}

static void schema_files(void) {
    const char *protocols[] = {"rexd", "sidecar", "gateway", "mobile"};
    for (size_t p = 0; p < 4; p++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/tests/vectors/%s.json", root, protocols[p]);
        int replaced = 0;
        json_t *doc = load_json_big_ints(path, &replaced);
        int expected = 0;
        for (size_t k = 0; k < N_SKIPPED; k++) {
            expected += strcmp(SKIPPED[k][0], protocols[p]) == 0;
        }
        CHECK(replaced == expected, "%s: %d integers beyond int64, %d cases skipped", protocols[p],
              replaced, expected);
        schema_cases(protocols[p], doc);
        if (strcmp(protocols[p], "gateway") == 0) {
            gateway_sequences(doc);
        }
        json_decref(doc);
    }
}

/* ---------------------------------------------------------------- tools.json */

static void tools(void) {
    json_t *doc = load("tests/vectors/tools.json");
    char *policy = dump(json_object_get(doc, "policy"));
    dw_toolbox *tb = NULL;
    CHECK_OK(dw_toolbox_new(policy, NULL, true, 0, &tb), dw_last_error(), "toolbox");
    free(policy);
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(doc, "cases"), i, c) {
        const char *name = str(c, "name");
        const char *kind = str(c, "kind");
        json_t *got = NULL;
        dw_str view;
        dw_status st;
        if (strcmp(kind, "authorize") == 0 || strcmp(kind, "visible") == 0) {
            char *ctx = dump(json_object_get(c, "context"));
            CHECK_OK(dw_toolbox_set_context(tb, str(c, "agent"), ctx), dw_toolbox_last_error(tb), name);
            free(ctx);
        }
        if (strcmp(kind, "authorize") == 0) {
            char *call = dump(json_object_get(c, "call"));
            dw_origin origin = strcmp(str(c, "origin"), "user") == 0 ? DW_ORIGIN_USER : DW_ORIGIN_MODEL;
            st = dw_toolbox_authorize(tb, str(c, "agent"), call, origin, &view);
            CHECK_OK(st, dw_toolbox_last_error(tb), name);
            got = st == DW_STATUS_OK ? view_json(view) : NULL;
            free(call);
        } else if (strcmp(kind, "slash") == 0) {
            st = dw_toolbox_slash(tb, str(c, "line"), &view);
            CHECK_OK(st, dw_toolbox_last_error(tb), name);
            json_t *r = view_json(view);
            json_t *call = json_object_get(r, "call");
            if (call != NULL) {
                got = json_pack("{s:O,s:O}", "name", json_object_get(call, "name"), "args",
                                json_object_get(call, "args"));
            } else {
                /* An error's kind: a unit variant's string, or the single key. */
                json_t *e = json_object_get(r, "error");
                const char *k = json_is_string(e) ? json_string_value(e) : "";
                if (json_is_object(e)) {
                    void *it = json_object_iter(e);
                    k = it ? json_object_iter_key(it) : "";
                }
                got = json_pack("{s:s}", "error", k);
            }
            json_decref(r);
        } else if (strcmp(kind, "visible") == 0) {
            st = dw_toolbox_visible_tools(tb, str(c, "agent"), &view);
            CHECK_OK(st, dw_toolbox_last_error(tb), name);
            json_t *specs = view_json(view);
            got = json_array();
            size_t k;
            json_t *spec;
            json_array_foreach(specs, k, spec) {
                json_array_append(got, json_object_get(spec, "name"));
            }
            json_decref(specs);
        } else {
            CHECK(0, "tools: unknown kind %s", kind);
        }
        if (!json_same(got, json_object_get(c, "expect"))) {
            char *g = got ? dump(got) : NULL, *w = dump(json_object_get(c, "expect"));
            CHECK(0, "tools %s:\n  got  %s\n  want %s", name, g ? g : "(none)", w);
            free(g);
            free(w);
        } else {
            CHECK(1, "ok");
        }
        json_decref(got);
    }
    /* Drain the tools_changed events the contexts queued. */
    dw_output out;
    int events = 0;
    while (dw_toolbox_poll_output(tb, 0, &out) == DW_STATUS_OK && out.kind == DW_OUTPUT_EVENT) {
        events++;
    }
    CHECK(events > 0, "tools: no tools_changed event");
    dw_toolbox_free(tb);
    json_decref(doc);
}

/* ---------------------------------------------------------------- providers/<provider>.json */

static dw_provider g_provider;
static const char *g_request;
static const uint8_t *g_body;
static size_t g_body_len;
static uint64_t g_seed;
static const char *g_response, *g_results;
#define REQUEST_TOOLS(o, c, l) dw_provider_request_tools(g_provider, g_request, o, c, l)
#define PARSE_RESPONSE(o, c, l) dw_provider_parse_response(g_provider, g_body, g_body_len, g_seed, o, c, l)
#define ASSISTANT(o, c, l) dw_provider_assistant_message(g_provider, g_response, o, c, l)
#define RESULTS(o, c, l) dw_provider_tool_results(g_provider, g_results, g_response, o, c, l)

/* The vectors' error names for a parse error kind. */
static const char *parse_error_name(const char *kind) {
    if (strcmp(kind, "not_json") == 0) return "NotJson";
    if (strcmp(kind, "shape") == 0) return "Shape";
    if (strcmp(kind, "provider") == 0) return "Provider";
    if (strcmp(kind, "too_large") == 0) return "TooLarge";
    if (strcmp(kind, "incomplete") == 0) return "Incomplete";
    return kind;
}

/* The response or the error, as the vectors write them. */
static json_t *outcome(dw_status st, json_t *response, const char *kind) {
    if (st == DW_STATUS_OK) {
        return json_pack("{s:o}", "expect", response);
    }
    CHECK(st == DW_STATUS_MALFORMED, "a provider parse failed with %s", dw_status_str(st));
    return json_pack("{s:s}", "error", parse_error_name(kind));
}

/* Feeds the stream whole (cut == len), one byte at a time (cut == SIZE_MAX), or in two pieces
 * cut at `cut`. */
static json_t *stream(const char *sse, size_t len, size_t cut) {
    dw_stream_parser *p = NULL;
    CHECK_OK(dw_stream_parser_new(g_provider, NULL, g_seed, &p), dw_last_error(), "stream parser");
    dw_status st = DW_STATUS_OK;
    if (cut == SIZE_MAX) {
        for (size_t k = 0; k < len && st == DW_STATUS_OK; k++) {
            st = dw_stream_parser_feed(p, (const uint8_t *)sse + k, 1);
        }
    } else {
        st = dw_stream_parser_feed(p, (const uint8_t *)sse, cut);
        if (st == DW_STATUS_OK) {
            st = dw_stream_parser_feed(p, (const uint8_t *)sse + cut, len - cut);
        }
    }
    json_t *result;
    dw_str view;
    if (st == DW_STATUS_OK) {
        st = dw_stream_parser_finish(p, &view);
    }
    if (st == DW_STATUS_OK) {
        result = outcome(st, view_json(view), "");
    } else {
        result = outcome(st, NULL, dw_stream_parser_last_error_kind(p));
    }
    dw_stream_parser_free(p);
    return result;
}

static void providers(void) {
    const char *names[] = {"openai_chat", "openai_responses", "anthropic", "gemini"};
    const dw_provider ids[] = {DW_PROVIDER_OPENAI_CHAT, DW_PROVIDER_OPENAI_RESPONSES,
                               DW_PROVIDER_ANTHROPIC, DW_PROVIDER_GEMINI};
    for (size_t p = 0; p < 4; p++) {
        char rel[256];
        snprintf(rel, sizeof rel, "tests/vectors/providers/%s.json", names[p]);
        json_t *doc = load(rel);
        g_provider = ids[p];
        size_t i;
        json_t *c;
        json_array_foreach(json_object_get(doc, "cases"), i, c) {
            const char *name = str(c, "name");
            const char *kind = str(c, "kind");
            g_seed = (uint64_t)json_integer_value(json_object_get(c, "seed"));
            json_t *got = NULL;
            json_t *want = json_object_get(c, "error") != NULL
                               ? json_pack("{s:O}", "error", json_object_get(c, "error"))
                               : json_pack("{s:O}", "expect", json_object_get(c, "expect"));
            dw_status st;
            if (strcmp(kind, "request") == 0) {
                json_t *req = json_object();
                const char *keys[] = {"tools", "catalog", "choice", "parallel_tool_calls", "strict"};
                for (size_t k = 0; k < 5; k++) {
                    json_t *v = json_object_get(c, keys[k]);
                    if (v != NULL && !json_is_null(v)) {
                        json_object_set(req, keys[k], v);
                    }
                }
                char *text = dump(req);
                g_request = text;
                BUF_CALL(st, &buf, REQUEST_TOOLS);
                CHECK_OK(st, dw_last_error(), name);
                got = json_pack("{s:o}", "expect", buffer_json(st));
                free(text);
                json_decref(req);
            } else if (strcmp(kind, "response") == 0) {
                json_t *body = json_object_get(c, "body");
                char *text = json_is_string(body) ? copy_string(json_string_value(body)) : dump(body);
                g_body = (const uint8_t *)text;
                g_body_len = strlen(text);
                BUF_CALL(st, &buf, PARSE_RESPONSE);
                got = outcome(st, buffer_json(st), dw_last_error_kind());
                free(text);
            } else if (strcmp(kind, "stream") == 0) {
                /* The SSE text: `event:` lines where the provider names events, [DONE] for Chat. */
                size_t cap = 1 << 16, len = 0;
                char *sse = malloc(cap);
                size_t k;
                json_t *e;
                json_array_foreach(json_object_get(c, "events"), k, e) {
                    char *data = dump(e);
                    const char *type = json_string_value(json_object_get(e, "type"));
                    int named = (g_provider == DW_PROVIDER_ANTHROPIC || g_provider == DW_PROVIDER_OPENAI_RESPONSES) && type;
                    size_t need = strlen(data) + (named ? strlen(type) : 0) + 32;
                    while (len + need >= cap) {
                        cap *= 2;
                        sse = realloc(sse, cap);
                    }
                    if (named) {
                        len += (size_t)sprintf(sse + len, "event: %s\n", type);
                    }
                    len += (size_t)sprintf(sse + len, "data: %s\n\n", data);
                    free(data);
                }
                if (g_provider == DW_PROVIDER_OPENAI_CHAT) {
                    len += (size_t)sprintf(sse + len, "data: [DONE]\n\n");
                }
                got = stream(sse, len, len);
                json_t *by_byte = stream(sse, len, SIZE_MAX);
                CHECK(json_same(got, by_byte), "%s %s: one byte at a time differs", names[p], name);
                json_decref(by_byte);
                for (size_t cut = 0; cut < len; cut++) {
                    json_t *two = stream(sse, len, cut);
                    CHECK(json_same(got, two), "%s %s: cut at %zu differs", names[p], name, cut);
                    json_decref(two);
                }
                free(sse);
            } else if (strcmp(kind, "echo") == 0) {
                char *response = dump(json_object_get(c, "response"));
                char *results = dump(json_object_get(c, "results"));
                g_response = response;
                g_results = results;
                BUF_CALL(st, &buf, ASSISTANT);
                CHECK_OK(st, dw_last_error(), name);
                json_t *assistant = buffer_json(st);
                BUF_CALL(st, &buf, RESULTS);
                json_t *res = st == DW_STATUS_OK ? buffer_json(st)
                                                 : json_pack("{s:s}", "error", dw_last_error());
                got = json_pack("{s:{s:o,s:o}}", "expect", "assistant", assistant, "results", res);
                free(response);
                free(results);
            }
            if (!json_same(got, want)) {
                char *g = got ? dump(got) : NULL, *w = dump(want);
                CHECK(0, "%s %s:\n  got  %s\n  want %s", names[p], name, g ? g : "(none)", w);
                free(g);
                free(w);
            } else {
                CHECK(1, "ok");
            }
            json_decref(got);
            json_decref(want);
        }
        json_decref(doc);
    }
}

int main(int argc, char **argv) {
    root = argc > 1 ? argv[1] : ".";
    CHECK(strcmp(dw_version(), DW_VERSION_STRING) == 0, "version %s, header %s", dw_version(),
          DW_VERSION_STRING);
    oa1();
    irc();
    jsonrpc();
    schema_files();
    tools();
    providers();
    buffer_free(&buf);
    return finish("vectors");
}
