#include "common.h"

#include <math.h>

int checks = 0;
int failures = 0;

json_t *load_json(const char *path) {
    json_error_t error;
    json_t *value = json_load_file(path, JSON_DECODE_ANY | JSON_ALLOW_NUL, &error);
    if (value == NULL) {
        fprintf(stderr, "%s:%d: %s\n", path, error.line, error.text);
        exit(2);
    }
    return value;
}

json_t *load_json_big_ints(const char *path, int *replaced) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        perror(path);
        exit(2);
    }
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = malloc((size_t)size + 1);
    if (fread(text, 1, (size_t)size, f) != (size_t)size) {
        perror(path);
        exit(2);
    }
    fclose(f);
    text[size] = 0;
    *replaced = 0;
    for (;;) {
        json_error_t error;
        json_t *value = json_loadb(text, (size_t)size, JSON_DECODE_ANY | JSON_ALLOW_NUL, &error);
        if (value != NULL) {
            free(text);
            return value;
        }
        if (strstr(error.text, "too big integer") == NULL) {
            fprintf(stderr, "%s:%d: %s\n", path, error.line, error.text);
            exit(2);
        }
        /* The number ends just before `position`: blank it to 0 (same length, so positions of
         * later errors stay right). */
        size_t end = (size_t)error.position;
        while (end > 0 && !(text[end - 1] >= '0' && text[end - 1] <= '9')) {
            end--;
        }
        size_t start = end;
        while (start > 0 && ((text[start - 1] >= '0' && text[start - 1] <= '9') || text[start - 1] == '-')) {
            start--;
        }
        for (size_t k = start; k < end; k++) {
            text[k] = k == start ? '0' : ' ';
        }
        (*replaced)++;
    }
}

char *dump(const json_t *value) {
    char *text = json_dumps(value, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
    if (text == NULL) {
        fprintf(stderr, "json_dumps failed\n");
        exit(2);
    }
    return text;
}

json_t *parse_json(const char *text, size_t len) {
    json_error_t error;
    json_t *value = json_loadb(text, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &error);
    if (value == NULL) {
        fprintf(stderr, "not JSON (%s): %.*s\n", error.text, (int)(len > 400 ? 400 : len), text);
    }
    return value;
}

int json_same(const json_t *a, const json_t *b) {
    if (a == NULL || b == NULL) {
        return a == b;
    }
    if (json_is_number(a) && json_is_number(b)) {
        if (json_is_integer(a) && json_is_integer(b)) {
            return json_integer_value(a) == json_integer_value(b);
        }
        return fabs(json_number_value(a) - json_number_value(b)) <= 1e-12 * fabs(json_number_value(a));
    }
    if (json_typeof(a) != json_typeof(b)) {
        return 0;
    }
    if (json_is_array(a)) {
        size_t n = json_array_size(a);
        if (n != json_array_size(b)) {
            return 0;
        }
        for (size_t i = 0; i < n; i++) {
            if (!json_same(json_array_get(a, i), json_array_get(b, i))) {
                return 0;
            }
        }
        return 1;
    }
    if (json_is_object(a)) {
        if (json_object_size(a) != json_object_size(b)) {
            return 0;
        }
        const char *key;
        json_t *value;
        json_object_foreach((json_t *)a, key, value) {
            if (!json_same(value, json_object_get(b, key))) {
                return 0;
            }
        }
        return 1;
    }
    return json_equal((json_t *)a, (json_t *)b);
}

json_t *event_json(const dw_output *out) {
    json_t *event = parse_json((const char *)out->data, out->len);
    if (event != NULL && out->text != NULL) {
        json_t *response = json_object_get(event, "response");
        json_t *request = json_object_get(event, "request");
        json_t *text = json_stringn((const char *)out->text, out->text_len);
        if (response != NULL) {
            json_object_set_new(response, "text", text);
        } else if (request != NULL) {
            json_object_set_new(request, "payload", text);
        } else {
            json_decref(text);
        }
    }
    return event;
}

void buffer_free(buffer *b) {
    free(b->data);
    b->data = NULL;
    b->cap = 0;
    b->len = 0;
}

char *replace_all(const char *text, const char *name, const char *value) {
    size_t pattern_len = strlen(name) + 2;
    char *pattern = malloc(pattern_len + 1);
    snprintf(pattern, pattern_len + 1, "{%s}", name);
    size_t count = 0;
    for (const char *p = strstr(text, pattern); p != NULL; p = strstr(p + pattern_len, pattern)) {
        count++;
    }
    size_t value_len = strlen(value);
    char *out = malloc(strlen(text) + count * value_len + 1);
    char *w = out;
    const char *r = text;
    for (const char *p = strstr(r, pattern); p != NULL; p = strstr(r, pattern)) {
        memcpy(w, r, (size_t)(p - r));
        w += p - r;
        memcpy(w, value, value_len);
        w += value_len;
        r = p + pattern_len;
    }
    strcpy(w, r);
    free(pattern);
    return out;
}

int finish(const char *program) {
    printf("%s: %d checks, %d failures\n", program, checks, failures);
    return failures == 0 ? 0 : 1;
}
