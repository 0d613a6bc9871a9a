#!/usr/bin/env python3
"""A Pyroscope ingest endpoint for the agent's tests: the contract of grafana/pyroscope's
/ingest handler (pkg/ingester/pyroscope/ingest_handler.go, pkg/og/convert/pprof,
api/model/labelset, pkg/validation), applied strictly, recording what it accepts.

  POST /ingest only (other paths 404, other methods 405).
  Query: name, from, until required, each once; only the documented parameters (name,
  from, until, format, sampleRate, spyName, units, aggregationType).
  name: the labelset grammar SERVICE{k=v,...}: SERVICE of [A-Za-z0-9_.-/], label names
  of [A-Za-z_][A-Za-z0-9_]* not starting with "__" (what survives pkg/validation
  unchanged), values without ',' or '}' and not padded with spaces (the parser would
  trim them), valid UTF-8, at most 2048 bytes, at most 30 labels, no name twice.
  from, until: Unix seconds, from <= until, within a day of now.
  Body: with format=pprof the body itself is the pprof (the server never parses it as a
  form then); otherwise Content-Type multipart/form-data with a boundary, one file field
  "profile" (no "prev_profile": the server refuses it), optional "sample_type_config".
  The pprof: gzip, then a perftools.profiles.Profile decoded field by field:
  string_table[0] == "", every sample has one value per sample type, every location id a
  sample names exists, time_nanos and duration_nanos set, sample type names without '-'.
  With --token, "Authorization: Bearer TOKEN" or 401.

Accepted uploads: one JSON line each in --log, the pprof in --store/NNNNNN.pb.gz.
Refusals: one JSON line each in --rejects (status and reason). --port 0 picks a port and
writes it to --port-file. --tls CERT KEY serves https.
"""
import argparse
import gzip
import json
import os
import re
import signal
import ssl
import sys
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, HTTPServer

DOCUMENTED = {"name", "from", "until", "format", "sampleRate", "spyName", "units", "aggregationType"}
LABEL_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
SERVICE_RUNE = re.compile(r"^[A-Za-z0-9_.\-/]+$")


class Reject(Exception):
    def __init__(self, status, reason):
        super().__init__(reason)
        self.status = status
        self.reason = reason


def parse_name(name):
    """labelset.Parse + ValidateServiceName/ValidateLabelName, then what pkg/validation
    would change or refuse; returns (service, {labels})."""
    if "{" not in name:
        raise Reject(400, "name has no {labels} part")
    service, rest = name.split("{", 1)
    if service != service.strip() or not SERVICE_RUNE.match(service):
        raise Reject(400, f"invalid service name {service!r}")
    if not rest.endswith("}") or "}" in rest[:-1]:
        raise Reject(400, f"labels not closed by one final '}}': {name!r}")
    body = rest[:-1]
    labels = {}
    if body:
        for pair in body.split(","):
            if "=" not in pair:
                raise Reject(400, f"label {pair!r} is not key=value")
            k, v = pair.split("=", 1)
            if k != k.strip() or v != v.strip():
                raise Reject(400, f"label {pair!r} has spaces the parser would trim")
            if not LABEL_NAME.match(k) or k.startswith("__"):
                raise Reject(400, f"label name {k!r} would be refused or renamed")
            if k in labels:
                raise Reject(400, f"label {k!r} twice")
            if v == "":
                raise Reject(400, f"label {k!r} is empty (the server drops it)")
            if len(v.encode()) > 2048:
                raise Reject(400, f"label {k!r} longer than 2048")
            labels[k] = v
    if len(labels) + 4 > 30:  # + __name__, __delta__, pyroscope_spy, service_name
        raise Reject(400, "more than 30 labels in the series")
    return service, labels


def varint(b, i):
    shift = result = 0
    while True:
        if i >= len(b):
            raise ValueError("truncated varint")
        c = b[i]
        i += 1
        result |= (c & 0x7F) << shift
        if not c & 0x80:
            return result, i
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def fields(b):
    """(field number, wire type, value) of one protobuf message."""
    i = 0
    while i < len(b):
        key, i = varint(b, i)
        f, w = key >> 3, key & 7
        if w == 0:
            v, i = varint(b, i)
        elif w == 2:
            n, i = varint(b, i)
            if i + n > len(b):
                raise ValueError("truncated field")
            v = b[i:i + n]
            i += n
        elif w == 1:
            v = int.from_bytes(b[i:i + 8], "little")
            i += 8
        elif w == 5:
            v = int.from_bytes(b[i:i + 4], "little")
            i += 4
        else:
            raise ValueError(f"wire type {w}")
        yield f, w, v


def packed(w, v):
    if w == 0:
        return [v]
    out, i = [], 0
    while i < len(v):
        x, i = varint(v, i)
        out.append(x)
    return out


def signed(x):
    return x - (1 << 64) if x >= 1 << 63 else x


def decode_pprof(raw):
    if raw[:2] != b"\x1f\x8b":
        raise Reject(400, "the profile is not gzipped")
    try:
        data = gzip.decompress(raw)
    except Exception as e:
        raise Reject(400, f"gzip: {e}")
    st, samples, locs, strings, comments = [], [], set(), [], []
    tn = dn = 0
    try:
        for f, w, v in fields(data):
            if f == 1:
                vt = {ff: vv for ff, _, vv in fields(v)}
                st.append((vt.get(1, 0), vt.get(2, 0)))
            elif f == 2:
                s = {"locs": [], "vals": [], "labels": []}
                for ff, ww, vv in fields(v):
                    if ff == 1:
                        s["locs"] += packed(ww, vv)
                    elif ff == 2:
                        s["vals"] += [signed(x) for x in packed(ww, vv)]
                    elif ff == 3:
                        s["labels"].append({fff: vvv for fff, _, vvv in fields(vv)})
                samples.append(s)
            elif f == 4:
                locs.add({ff: vv for ff, _, vv in fields(v)}.get(1, 0))
            elif f == 6:
                strings.append(v.decode("utf-8"))
            elif f == 9:
                tn = v
            elif f == 10:
                dn = v
            elif f == 13:
                comments += packed(w, v)
    except (ValueError, UnicodeDecodeError) as e:
        raise Reject(400, f"not a pprof profile: {e}")
    if not strings or strings[0] != "":
        raise Reject(400, "string_table[0] is not empty")

    def s_(i):
        if i >= len(strings):
            raise Reject(400, f"string index {i} out of range")
        return strings[i]

    types = [s_(t) for t, _ in st]
    if not types or any("-" in t for t in types):
        raise Reject(400, f"bad sample types {types}")
    if not tn or not dn:
        raise Reject(400, "time_nanos or duration_nanos missing")
    totals = dict.fromkeys(types, 0)
    threads = set()
    for s in samples:
        if len(s["vals"]) != len(types):
            raise Reject(400, "a sample's values do not match the sample types")
        for l in s["locs"]:
            if l not in locs:
                raise Reject(400, f"sample names location {l} that does not exist")
        for t, v in zip(types, s["vals"]):
            totals[t] += v
        for lab in s["labels"]:
            if s_(lab.get(1, 0)) == "thread_name":
                threads.add(s_(lab.get(2, 0)))
    if locs and sorted(locs) != list(range(1, len(locs) + 1)):
        raise Reject(400, "location ids are not 1..N")
    return {"time_nanos": signed(tn), "duration_nanos": signed(dn), "samples": len(samples), "totals": totals,
            "threads": sorted(threads), "comments": [s_(c) for c in comments]}


def parse_multipart(ctype, body):
    m = re.match(r'^multipart/form-data;\s*boundary="?([^";]+)"?$', ctype)
    if not m:
        raise Reject(400, f"Content-Type {ctype!r} is not multipart/form-data with a boundary")
    delim = b"--" + m.group(1).encode()
    if not body.startswith(delim):
        raise Reject(400, "body does not start with the boundary")
    parts = {}
    for chunk in body.split(delim)[1:]:
        if chunk.startswith(b"--"):
            break
        if not chunk.startswith(b"\r\n") or not chunk.endswith(b"\r\n"):
            raise Reject(400, "malformed multipart part")
        head, sep, content = chunk[2:-2].partition(b"\r\n\r\n")
        if not sep:
            raise Reject(400, "multipart part without headers")
        disp = [h for h in head.decode("latin-1").split("\r\n") if h.lower().startswith("content-disposition:")]
        nm = re.search(r'\bname="([^"]*)"', disp[0]) if disp else None
        if not disp or "form-data" not in disp[0] or not nm:
            raise Reject(400, "multipart part without Content-Disposition: form-data; name=")
        if nm.group(1) in parts:
            raise Reject(400, f"field {nm.group(1)!r} twice")
        parts[nm.group(1)] = content
    else:
        raise Reject(400, "multipart body without its closing boundary")
    if "prev_profile" in parts:
        raise Reject(400, "prev_profile: the server refuses it (unsupported client version)")
    if "profile" not in parts:
        raise Reject(400, "no 'profile' field")
    if "sample_type_config" in parts:
        json.loads(parts["sample_type_config"])
    return parts["profile"]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def answer(self, status, obj):
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def refuse(self, status, reason):
        srv = self.server
        with open(srv.opts.rejects, "a") as f:
            f.write(json.dumps({"t": time.time(), "status": status, "reason": reason, "path": self.path}) + "\n")
        self.answer(status, {"code": "invalid_argument" if status == 400 else "unauthenticated",
                             "message": reason})

    def do_GET(self):
        self.body()
        self.refuse(405, "only POST /ingest")

    def body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def do_POST(self):
        srv = self.server
        body = self.body()
        try:
            u = urllib.parse.urlsplit(self.path)
            if u.path != "/ingest":
                raise Reject(404, f"no such path {u.path}")
            if srv.opts.token and self.headers.get("Authorization") != "Bearer " + srv.opts.token:
                raise Reject(401, "unauthorized: a bearer token is required")
            try:
                q = urllib.parse.parse_qs(u.query, keep_blank_values=True, strict_parsing=True)
            except ValueError as e:
                raise Reject(400, f"query: {e}")
            extra = set(q) - DOCUMENTED
            if extra:
                raise Reject(400, f"undocumented query parameters {sorted(extra)}")
            for k in ("name", "from", "until"):
                if len(q.get(k, [])) != 1:
                    raise Reject(400, f"{k} missing or given twice")
            service, labels = parse_name(q["name"][0])
            t = {}
            for k in ("from", "until"):
                if not re.fullmatch(r"[0-9]{10}", q[k][0]):
                    raise Reject(400, f"{k}={q[k][0]!r} is not Unix seconds")
                t[k] = int(q[k][0])
                if abs(t[k] - time.time()) > 86400:
                    raise Reject(400, f"{k} is not within a day of now")
            if t["from"] > t["until"]:
                raise Reject(400, "from is after until")
            fmt = q.get("format", [""])[0]
            if fmt == "pprof":
                raw = body
            elif fmt in ("", "folded") and "multipart/form-data" in self.headers.get("Content-Type", ""):
                raw = parse_multipart(self.headers["Content-Type"], body)
            else:
                raise Reject(400, f"format={fmt!r} with Content-Type {self.headers.get('Content-Type')!r}: "
                             "not a pprof upload")
            prof = decode_pprof(raw)
        except Reject as r:
            self.refuse(r.status, r.reason)
            return
        STATE["recording"] = True
        try:
            srv.seq += 1
            path = os.path.join(srv.opts.store, f"{srv.seq:06d}.pb.gz")
            with open(path, "wb") as f:
                f.write(raw)
            rec = {"seq": srv.seq, "recv": time.time(), "service": service, "labels": labels,
                   "from": t["from"], "until": t["until"], "spy": q.get("spyName", [""])[0], "file": path}
            rec.update(prof)
            with open(srv.opts.log, "a") as f:
                f.write(json.dumps(rec) + "\n")
            self.answer(200, {})
        finally:
            STATE["recording"] = False
            if STATE["stop"]:
                os._exit(0)


# SIGTERM (the tests' outage) stops the receiver as a server going down does: an upload
# it has recorded is answered first. Killed between the two, the agent took the upload
# for lost and sent it again (e2e 75: "arrived twice"), as any client that resends what it
# was not told arrived must. Anywhere else (idle, or reading a request), at once.
STATE = {"recording": False, "stop": False}


def on_term(*_):
    if not STATE["recording"]:
        os._exit(0)
    STATE["stop"] = True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file")
    ap.add_argument("--log", required=True)
    ap.add_argument("--rejects", required=True)
    ap.add_argument("--store", required=True)
    ap.add_argument("--token")
    ap.add_argument("--tls", nargs=2, metavar=("CERT", "KEY"))
    opts = ap.parse_args()
    os.makedirs(opts.store, exist_ok=True)
    HTTPServer.allow_reuse_address = True
    srv = HTTPServer(("127.0.0.1", opts.port), Handler)
    srv.opts = opts
    # numbering goes on across restarts of the receiver
    srv.seq = len(os.listdir(opts.store))
    if opts.tls:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(*opts.tls)
        srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    if opts.port_file:
        with open(opts.port_file + ".tmp", "w") as f:
            f.write(str(srv.server_address[1]))
        os.rename(opts.port_file + ".tmp", opts.port_file)
    signal.signal(signal.SIGTERM, on_term)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
