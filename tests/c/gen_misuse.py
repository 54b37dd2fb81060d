#!/usr/bin/env python3
"""Writes the generated part of the C misuse test from include/deskwire.h.

    gen_misuse.py include/deskwire.h OUT.c

For every function of the header it emits calls that break one argument at a time, every other
argument valid (the valid values are in VALID / CONFIG below):
- NULL for every pointer parameter: DW_STATUS_NULL_ARGUMENT (or, for a parameter documented as
  optional, anything but that status; `_free(NULL)` and `_last_error(NULL)` must not crash);
- invalid UTF-8 (0xFF 0xFE) in every string parameter and every text given as bytes and length:
  DW_STATUS_INVALID_UTF8;
- malformed JSON in every JSON parameter: DW_STATUS_INVALID_JSON;
- lengths no buffer can have for every buffer given as pointer and length (one element over
  PTRDIFF_MAX bytes, SIZE_MAX, and a range that runs past the end of the address space):
  DW_STATUS_INVALID_ARGUMENT, refused before anything is read;
- for the functions that write into the caller's buffer: a 1-byte buffer answers
  DW_STATUS_BUFFER_TOO_SMALL with the length needed and leaves the buffer alone; a NULL buffer
  with capacity 0 asks for the length; a buffer of exactly that length plus the NUL succeeds.
A new function in the header without valid values here fails the generator, so the test keeps
up with the API.
"""
import re
import sys

# Valid values by parameter name (C expressions).
VALID = {
    "agent": '"npc"',
    "approval_id": '"appr_1"',
    "args_json": r'"{\"command\":\"ls\"}"',
    "artifacts_json": '"{}"',
    "bearer": '"tok"',
    "body": None,  # a byte buffer, see BYTES
    "call_json": r'"{\"id\":\"c\",\"name\":\"read\",\"args\":{\"path\":\"a\"}}"',
    "channel": '"#x"',
    "code": '"123456"',
    "command_json": r'"{\"action\":\"start\"}"',
    "config_json": '"{}"',
    "context_json": '"{}"',
    "def": '"StopReason"',
    "error_json": r'"{\"code\":\"E_INTERNAL\",\"message\":\"x\"}"',
    "external_id": '"ext"',
    "frame_json": r'"{\"type\":\"REQ\",\"id\":\"abc\",\"seq\":1,\"more\":false,\"payload\":\"x\"}"',
    "host": '"h"',
    "header": '"Bearer abc"',
    "nick": '"n"',
    "user": '"u"',
    "host_scores_json": r'"\"none\""',
    "id": '"abc"',
    "id_json": '"1"',
    "job_id": '"j1"',
    "json": r'"\"Completed\""',
    "kind": '"shell"',
    "level": '"info"',
    "limits_json": '"{}"',
    "line": '"/read a.txt"',
    "message": '"m"',
    "message_json": r'"{\"role\":\"agent\",\"content\":\"c\",\"timestamp\":\"t\"}"',
    "method": '"m"',
    "name": '"read"',
    "options_json": '"{}"',
    "params_json": '"{}"',
    "permission_json": r'"{\"tool_name\":\"t\",\"command\":\"c\",\"description\":\"d\",\"tier\":\"low\"}"',
    "policy_json": r'"{\"default\":\"allow\"}"',
    "previous_json": r'"{\"segments\":[]}"',
    "progress_json": '"{}"',
    "protocol": '"mobile"',
    "query": '"read"',
    "reason": '"r"',
    "reason_json": r'"\"closed\""',
    "request_json": r'"{\"tools\":[]}"',
    "requested": '"ls"',
    "response_json": r'"{\"segments\":[]}"',
    "result_json": '"{}"',
    "results_json": r'"[{\"callId\":\"c\",\"content\":\"x\"}]"',
    "rule_json": r'"{\"tool\":\"*\",\"when\":\"always\",\"action\":\"allow\"}"',
    "session_id": '"s"',
    "spec_json": r'"{\"name\":\"t1\",\"description\":\"d\",\"input_schema\":{\"type\":\"object\"}}"',
    "specs_json": "SPECS",
    "state": '"RUNNING"',
    "state_json": r'"{\"status\":\"Idle\"}"',
    "step": '"s"',
    "target": '"#x"',
    "text": '"hi"',
    "token": '"tok"',
    "tokens_json": r'"[\"tok\"]"',
    "update_json": r'"{\"task_id\":\"t\",\"iteration\":1,\"status\":\"s\"}"',
    "visibility_json": r'"\"always\""',
    "reason_text": '"r"',
    "remote": '"r"',
}

# Per-function overrides.
OVERRIDE = {
    ("dw_desk_new", "config_json"): r'"{\"nick\":\"d\",\"channel\":\"#d\",\"oa1\":{\"allowed_sender\":\"r\"}}"',
    ("dw_remote_new", "config_json"): r'"{\"nick\":\"r\",\"channel\":\"#d\"}"',
    ("dw_gateway_new", "config_json"): r'"{\"tokens\":[\"t\"]}"',
    ("dw_irc_session_new", "config_json"): r'"{\"nick\":\"n\"}"',
    ("dw_oa1_client_new", "config_json"): r'"{\"channel\":\"#d\",\"nick\":\"n\"}"',
    ("dw_oa1_server_new", "config_json"): r'"{\"channel\":\"#d\",\"nick\":\"n\"}"',
    ("dw_toolbox_respond", "response_json"): r'"{\"id\":\"a\",\"approved\":true}"',
    ("dw_irc_session_privmsg", "text"): '"hi"',
    ("dw_multi_desk_new", "config_json"): r'"{\"nick\":\"m\",\"channel\":\"\"}"',
    ("dw_multi_desk_add_desk_with", "config_json"): r'"{\"channel\":\"#y\",\"nick\":\"m\",\"allowed_sender\":\"r\"}"',
}

# Byte buffers (pointer, length) by name: (pointer expression, length).
BYTES = {
    "data": ('(const uint8_t *)"abc"', "3"),
    "line": ('(const uint8_t *)"PING :x"', "7"),
    "payload": ('(const uint8_t *)"code: message"', "13"),
    "text": ('(const uint8_t *)"hello"', "5"),
    "escaped": ('(const uint8_t *)"a\\\\nb"', "4"),
    "frame": ("(const uint8_t *)FRAME", "sizeof FRAME - 1"),
    "body": ("(const uint8_t *)BODY", "sizeof BODY - 1"),
    "entropy": ("entropy", None),
    "values": ("floats", "2"),
}

# Byte buffers that must be UTF-8 (the function refuses other bytes).
UTF8_BYTES = {"payload", "text"}

# Parameters that may be NULL (documented as optional).
OPTIONAL = {
    ("dw_peer_new", "config_json"), ("dw_peer_new_gateway", "config_json"),
    ("dw_toolbox_new", "config_json"), ("dw_toolbox_new", "policy_json"),
    ("dw_mobile_client_new", "config_json"), ("dw_mobile_client_new", "token"),
    ("dw_mobile_server_new", "config_json"), ("dw_peer_call", "params_json"),
    ("dw_peer_notify", "params_json"), ("dw_peer_call_with_id", "params_json"), ("dw_mobile_server_open", "bearer"),
    ("dw_gateway_request_approval", "approval_id"), ("dw_gateway_set_progress", "step"),
    ("dw_gateway_complete", "artifacts_json"), ("dw_toolbox_register", "visibility_json"),
    ("dw_toolbox_request_tools", "options_json"), ("dw_stream_parser_new", "limits_json"),
    ("dw_provider_tool_results", "previous_json"),
}

INTS = {
    "now_ms": "1000", "seed": "1", "conn": "1", "epoch_unix_ms": "0", "timeout_ms": "0",
    "user": "0", "client": "0", "noise_every": "0", "status": "0", "n": "3", "budget": "240",
    "batch_limit": "16", "dialect": "DW_DIALECT_JSONRPC2", "provider": "DW_PROVIDER_OPENAI_CHAT",
    "origin": "DW_ORIGIN_MODEL", "progress": "0.5", "lexical_weight": "0.5", "builtins": "true",
    "approved": "true", "remember": "false", "held": "false", "on": "true", "notice": "false",
}


def parse(header):
    text = re.sub(r"/\*.*?\*/", "", open(header).read(), flags=re.S)
    out = []
    for ret, name, args in re.findall(r"\n([a-z_ ]+[ *]+)(dw_\w+)\(([^;]*?)\);", text):
        args = " ".join(args.split())
        params = []
        if args != "void":
            for p in args.split(","):
                m = re.match(r"(.*?)(\w+)$", p.strip())
                params.append((" ".join(m.group(1).split()), m.group(2)))
        out.append((" ".join(ret.split()), name, params))
    return out


def handle_type(t):
    m = re.match(r"(?:const )?struct (dw_\w+) \*$", t)
    if m and m.group(1) not in ("dw_str", "dw_output", "dw_ending"):
        return m.group(1)
    return None


def valid_args(fn, params):
    """C expressions for a call with every argument valid; None where unsupported."""
    args = []
    skip_len = False
    for i, (t, n) in enumerate(params):
        if skip_len:
            skip_len = False
            continue
        h = handle_type(t)
        if h:
            args.append(("handle", n, f"h_{h[3:]}"))
        elif re.match(r"struct dw_\w+ \*\*$", t):
            args.append(("out_handle", n, f"&tmp_{t.split()[1][3:]}"))
        elif t == "struct dw_output *":
            args.append(("out", n, "&o_output"))
        elif t == "struct dw_str *":
            args.append(("out", n, "&o_str"))
        elif t == "bool *":
            args.append(("out", n, "&o_bool"))
        elif t == "struct dw_ending *":
            args.append(("out", n, "&o_ending"))
        elif t == "uint64_t *":
            args.append(("out", n, "&o_u64"))
        elif t == "size_t *":
            args.append(("out", n, "&o_len"))
        elif t == "char *":
            args.append(("buffer", n, "o_buf"))
        elif t == "const char *":
            v = OVERRIDE.get((fn, n), VALID.get(n))
            if v is None:
                raise SystemExit(f"gen_misuse.py: no valid value for {fn}({n})")
            kind = "json" if n.endswith("_json") or n == "json" else "string"
            args.append((kind, n, v))
        elif t in ("const uint8_t *", "const float *"):
            if n not in BYTES:
                raise SystemExit(f"gen_misuse.py: no valid bytes for {fn}({n})")
            ptr, length = BYTES[n]
            kind = "utf8_bytes" if n in UTF8_BYTES else "bytes"
            args.append((kind, n, ptr))
            if length is not None:
                args.append(("len", params[i + 1][1], length))
                skip_len = True
        elif t == "size_t" and n == "cap":
            args.append(("cap", n, "sizeof o_buf"))
        elif t in ("uint64_t", "uint32_t", "size_t", "double", "bool", "dw_dialect", "dw_provider",
                   "dw_origin") and n in INTS:
            args.append(("int", n, INTS[n]))
        else:
            raise SystemExit(f"gen_misuse.py: no valid value for {fn}({t} {n})")
    return args


def call(fn, args, replace=None):
    exprs = []
    for i, (kind, n, v) in enumerate(args):
        exprs.append(replace[1] if replace and replace[0] == i else v)
    return f"{fn}({', '.join(exprs)})"


def main():
    header, out_path = sys.argv[1], sys.argv[2]
    lines = ["/* Generated by tests/c/gen_misuse.py from include/deskwire.h: do not edit. */", ""]
    body = []
    count = 0
    for ret, fn, params in parse(header):
        if fn == "dw_testing_panic":
            continue
        args = valid_args(fn, params)
        body.append(f"    /* {fn} */")
        if ret == "void":
            # _free: NULL is a no-op.
            body.append(f"    {call(fn, args, (0, 'NULL'))};")
            body.append("    CHECK(1, \"free(NULL)\");")
            count += 1
            continue
        if ret == "const char *":
            if args and args[0][0] == "handle":
                # A NULL handle's last error is the thread's, where a call with a NULL handle
                # leaves it; anything else of a NULL handle is "".
                want = {"_last_error": "dw_last_error()", "_last_error_kind": "dw_last_error_kind()"}
                same = next((w for suffix, w in want.items() if fn.endswith(suffix)), '""')
                body.append(f"    CHECK(strcmp({call(fn, args, (0, 'NULL'))}, {same}) == 0, \"{fn}(NULL)\");")
            else:
                body.append(f"    CHECK({call(fn, args)} != NULL, \"{fn}\");")
            count += 1
            continue
        types = dict((n, t) for t, n in params)
        has_buffer = any(k == "buffer" for k, _, _ in args)
        for i, (kind, n, v) in enumerate(args):
            if kind in ("handle", "out_handle", "out", "json", "string", "bytes", "utf8_bytes",
                        "buffer"):
                if kind == "buffer":
                    continue  # a NULL buffer with capacity > 0: below
                expect = "!=" if (fn, n) in OPTIONAL else "=="
                body.append(f"    st = {call(fn, args, (i, 'NULL'))};")
                body.append(f"    CHECK(st {expect} DW_STATUS_NULL_ARGUMENT, \"{fn}: NULL {n}: %s\", dw_status_str(st));")
                if kind == "handle" and i == 0:
                    # What a host prints with the handle it has (NULL) says why.
                    said = f"dw_{v[2:]}_last_error(NULL)"
                    body.append(f"    CHECK(strcmp({said}, \"the handle is NULL\") == 0, \"{fn}: NULL {n}: {said} is '%s'\", {said});")
                free_tmp(body, args)
                count += 1
            if kind in ("json", "string"):
                body.append(f"    st = {call(fn, args, (i, 'BAD_UTF8'))};")
                body.append(f"    CHECK(st == DW_STATUS_INVALID_UTF8, \"{fn}: bad UTF-8 in {n}: %s\", dw_status_str(st));")
                free_tmp(body, args)
                count += 1
            if kind == "utf8_bytes":
                j = i + 1
                bad = [(i, "(const uint8_t *)BAD_UTF8")]
                exprs = [v2 for _, _, v2 in args]
                exprs[i] = "(const uint8_t *)BAD_UTF8"
                exprs[j] = "2"
                body.append(f"    st = {fn}({', '.join(exprs)});")
                body.append(f"    CHECK(st == DW_STATUS_INVALID_UTF8, \"{fn}: bad UTF-8 in {n}: %s\", dw_status_str(st));")
                free_tmp(body, args)
                count += 1
            if kind in ("bytes", "utf8_bytes") and i + 1 < len(args) and args[i + 1][0] == "len":
                elem = types[n].replace("const ", "").rstrip(" *")
                last = last_error(fn, args)
                for ptr, bad in (
                    (v, f"(size_t)PTRDIFF_MAX / sizeof({elem}) + 1"),
                    (v, "SIZE_MAX"),
                    (f"(const {elem} *)(UINTPTR_MAX - 15)", f"32 / sizeof({elem})"),
                ):
                    exprs = [v2 for _, _, v2 in args]
                    exprs[i], exprs[i + 1] = ptr, bad
                    body.append(f"    st = {fn}({', '.join(exprs)});")
                    body.append(f"    CHECK(st == DW_STATUS_INVALID_ARGUMENT && strstr({last}, \"cannot exist\") != NULL, \"{fn}: {n} with length {bad}: %s (%s)\", dw_status_str(st), {last});")
                    free_tmp(body, args)
                    count += 1
            if kind == "json":
                body.append(f"    st = {call(fn, args, (i, 'BAD_JSON'))};")
                body.append(f"    CHECK(st == DW_STATUS_INVALID_JSON, \"{fn}: malformed {n}: %s\", dw_status_str(st));")
                free_tmp(body, args)
                count += 1
        if has_buffer:
            bi = next(i for i, a in enumerate(args) if a[0] == "buffer")
            ci = next(i for i, a in enumerate(args) if a[0] == "cap")
            exprs = [v for _, _, v in args]
            # A NULL buffer with capacity > 0.
            e = list(exprs); e[bi] = "NULL"
            body.append(f"    st = {fn}({', '.join(e)});")
            body.append(f"    CHECK(st == DW_STATUS_NULL_ARGUMENT, \"{fn}: NULL out: %s\", dw_status_str(st));")
            # A 1-byte buffer.
            e = list(exprs); e[ci] = "1"
            body.append("    memset(o_buf, 0x5a, sizeof o_buf); o_len = 0;")
            body.append(f"    st = {fn}({', '.join(e)});")
            body.append(f"    CHECK(st == DW_STATUS_BUFFER_TOO_SMALL && o_len > 0 && o_buf[0] == 0x5a, \"{fn}: small buffer: %s %zu\", dw_status_str(st), o_len);")
            body.append("    need = o_len;")
            # A size query.
            e = list(exprs); e[bi] = "NULL"; e[ci] = "0"
            body.append(f"    st = {fn}({', '.join(e)});")
            body.append(f"    CHECK(st == DW_STATUS_BUFFER_TOO_SMALL && o_len == need, \"{fn}: size query: %s\", dw_status_str(st));")
            # Exactly enough.
            e = list(exprs); e[ci] = "need + 1"
            body.append(f"    st = {fn}({', '.join(e)});")
            body.append(f"    CHECK(st == DW_STATUS_OK && o_len == need && o_buf[need] == 0, \"{fn}: exact buffer: %s (%s)\", dw_status_str(st), dw_last_error());")
            # One byte short: the NUL does not fit.
            e = list(exprs); e[ci] = "need"
            body.append(f"    st = {fn}({', '.join(e)});")
            body.append(f"    CHECK(st == DW_STATUS_BUFFER_TOO_SMALL, \"{fn}: no room for the NUL: %s\", dw_status_str(st));")
            count += 4
    lines.append(f"/* {count} misuse checks over the header's functions. */")
    lines.append("static void generated_misuse(void) {")
    lines.append("    dw_status st;")
    lines.append("    size_t need;")
    lines.append("    (void)need;")
    lines.extend(body)
    lines.append("}")
    open(out_path, "w").write("\n".join(lines) + "\n")


def last_error(fn, args):
    """The C expression for the last error message of a call to `fn` with `args`."""
    if args and args[0][0] == "handle":
        h = args[0][2]
        return f"dw_{h[2:]}_last_error({h})"
    return "dw_last_error()"


def free_tmp(body, args):
    """A constructor that succeeded despite an optional NULL: free what it made."""
    for kind, n, v in args:
        if kind == "out_handle":
            t = v[len("&tmp_"):]
            body.append(f"    if (st == DW_STATUS_OK) {{ dw_{t}_free(tmp_{t}); }} tmp_{t} = NULL;")


if __name__ == "__main__":
    main()
