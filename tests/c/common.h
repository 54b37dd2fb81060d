/* Shared by the C tests: checks that count, JSON helpers (jansson), and calls into the
 * caller-buffer functions. */
#ifndef DESKWIRE_TESTS_COMMON_H
#define DESKWIRE_TESTS_COMMON_H

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "deskwire.h"

extern int checks;
extern int failures;

#define CHECK(cond, ...)                                                                      \
    do {                                                                                      \
        checks++;                                                                             \
        if (!(cond)) {                                                                        \
            failures++;                                                                       \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                              \
            fprintf(stderr, __VA_ARGS__);                                                     \
            fputc('\n', stderr);                                                              \
        }                                                                                     \
    } while (0)

/* A call that must succeed; on failure prints the status and the handle's last error. */
#define CHECK_OK(status, last_error, what)                                                    \
    do {                                                                                      \
        dw_status s_ = (status);                                                              \
        CHECK(s_ == DW_STATUS_OK, "%s: %s (%s)", (what), dw_status_str(s_), (last_error));    \
    } while (0)

/* The whole file as JSON, or exit. */
json_t *load_json(const char *path);

/* Like load_json, for a file with integers beyond int64 (jansson's json_int_t): each is read as
 * 0 and counted in *replaced, so the runner can skip the cases it names. */
json_t *load_json_big_ints(const char *path, int *replaced);

/* `value` as compact JSON with sorted keys (what serde_json writes for a map); free() it. */
char *dump(const json_t *value);

/* Parses `len` bytes of JSON text; NULL and a message on stderr when it is not JSON. */
json_t *parse_json(const char *text, size_t len);

/* Deep equality where an integer equals a real of the same value (serde writes 1.0 for an f64
 * that jansson may hold as an integer, and the reverse). */
int json_same(const json_t *a, const json_t *b);

/* An event output as the core's JSON shape: the OA1 events' bulk text, which travels raw in
 * `out->text`, put back in (response "text", request "payload"). */
json_t *event_json(const dw_output *out);

/* A caller-buffer call's result grows here. */
typedef struct {
    char *data;
    size_t cap;
    size_t len;
} buffer;

#define BUFFER_INIT {NULL, 0, 0}

void buffer_free(buffer *b);

/* Calls `fn` with the buffer, growing it on DW_STATUS_BUFFER_TOO_SMALL (checking that the
 * reported length is then exactly what the second call writes). */
#define BUF_CALL(status, b, call_with)                                                        \
    do {                                                                                      \
        size_t need_;                                                                         \
        (status) = call_with((b)->data, (b)->cap, &need_);                                    \
        if ((status) == DW_STATUS_BUFFER_TOO_SMALL) {                                         \
            (b)->data = realloc((b)->data, need_ + 1);                                        \
            (b)->cap = need_ + 1;                                                             \
            (status) = call_with((b)->data, (b)->cap, &(b)->len);                             \
            CHECK((status) != DW_STATUS_OK || (b)->len == need_, "reported %zu, wrote %zu",   \
                  need_, (b)->len);                                                           \
        } else {                                                                              \
            (b)->len = need_;                                                                 \
        }                                                                                     \
    } while (0)

/* Replaces every "{name}" in `text` with `value`; returns a new string to free(). */
char *replace_all(const char *text, const char *name, const char *value);

/* The test program's summary line and exit status. */
int finish(const char *program);

#endif
