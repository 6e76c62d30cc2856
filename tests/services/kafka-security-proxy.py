#!/usr/bin/env python3
# Started by tests/services/kafka.sh (KAFKA_SECURITY). TLS and/or SASL (PLAIN, SCRAM-SHA-256,
# SCRAM-SHA-512) in front of a plaintext Kafka-protocol broker on 127.0.0.1: before
# authentication ApiVersions is relayed and SaslHandshake v0/v1 + SaslAuthenticate v0-v2 are
# answered here (any other request closes the connection); afterwards bytes are relayed as they are.
#   kafka-security-proxy.py LISTEN_PORT UPSTREAM_PORT [--tls CERT KEY] [--sasl USER PASSWORD] [--ready FILE]
import asyncio, base64, hashlib, hmac, os, signal, ssl, struct, sys
args = sys.argv[1:]; listen_port, upstream_port = int(args[0]), int(args[1]); tls = sasl = ready = None
i = 2
while i < len(args):
    if args[i] == "--tls": tls = (args[i+1], args[i+2]); i += 3
    elif args[i] == "--sasl": sasl = (args[i+1], args[i+2]); i += 3
    elif args[i] == "--ready": ready = args[i+1]; i += 2
    else: sys.exit("unknown argument " + args[i])
MECHS = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
HASH = {"SCRAM-SHA-256": hashlib.sha256, "SCRAM-SHA-512": hashlib.sha512}
ITER = 4096
def log(*a): print(*a, flush=True)

class AuthFailed(Exception): pass

class Scram:
    def __init__(self, mech): self.h = HASH[mech]; self.mech = mech; self.step = 0
    def hm(self, k, m): return hmac.new(k, m, self.h).digest()
    def next(self, token):
        msg = token.decode()
        if self.step == 0:
            self.step = 1
            cbind, authz, self.bare = msg.split(",", 2)
            if cbind not in ("n", "y"): raise AuthFailed("channel binding not supported")
            self.gs2 = cbind + "," + authz + ","
            attrs = dict(a.split("=", 1) for a in self.bare.split(","))
            self.user = attrs["n"].replace("=2C", ",").replace("=3D", "=")
            self.nonce = attrs["r"] + base64.b64encode(os.urandom(18)).decode()
            self.salt = os.urandom(16)
            self.first = "r=%s,s=%s,i=%d" % (self.nonce, base64.b64encode(self.salt).decode(), ITER)
            return self.first.encode()
        if self.step == 1:
            self.step = 2
            without_proof, proof = msg.rsplit(",p=", 1)
            attrs = dict(a.split("=", 1) for a in without_proof.split(","))
            if attrs.get("r") != self.nonce or base64.b64decode(attrs.get("c", "")) != self.gs2.encode():
                raise AuthFailed("bad nonce or channel binding")
            password = sasl[1] if self.user == sasl[0] else os.urandom(16).hex()
            salted = hashlib.pbkdf2_hmac(self.h().name, password.encode(), self.salt, ITER)
            client_key = self.hm(salted, b"Client Key")
            auth_message = ("%s,%s,%s" % (self.bare, self.first, without_proof)).encode()
            signature = self.hm(self.h(client_key).digest(), auth_message)
            if not hmac.compare_digest(bytes(a ^ b for a, b in zip(client_key, signature)), base64.b64decode(proof)):
                raise AuthFailed("Authentication failed during authentication due to invalid credentials with SASL mechanism " + self.mech)
            self.done = True
            server_sig = self.hm(self.hm(salted, b"Server Key"), auth_message)
            return b"v=" + base64.b64encode(server_sig)
        raise AuthFailed("unexpected SCRAM message")

class Plain:
    def next(self, token):
        parts = token.split(b"\0")
        if len(parts) != 3 or (parts[1].decode(), parts[2].decode()) != sasl:
            raise AuthFailed("Authentication failed: Invalid username or password")
        self.user = parts[1].decode(); self.done = True
        return b""

def uvarint(b, i):
    n = shift = 0
    while True:
        c = b[i]; i += 1; n |= (c & 0x7f) << shift; shift += 7
        if not c & 0x80: return n, i

def skip_tags(b, i):
    count, i = uvarint(b, i)
    for _ in range(count):
        _, i = uvarint(b, i); size, i = uvarint(b, i); i += size
    return i

def uvarint_enc(n):
    out = b""
    while True:
        if n < 0x80: return out + bytes([n])
        out += bytes([n & 0x7f | 0x80]); n >>= 7

async def read_frame(r):
    n = struct.unpack(">i", await r.readexactly(4))[0]
    return await r.readexactly(n)

async def pipe(r, w):
    try:
        while True:
            b = await r.read(65536)
            if not b: break
            w.write(b); await w.drain()
    except (ConnectionError, asyncio.IncompleteReadError, ssl.SSLError, OSError): pass
    finally:
        try: w.close()
        except Exception: pass

async def handle(cr, cw):
    peer = cw.get_extra_info("peername")
    try:
        ur, uw = await asyncio.open_connection("127.0.0.1", upstream_port)
    except OSError as e:
        log(peer, "upstream not reachable:", e); cw.close(); return
    try:
        if sasl: await authenticate(cr, cw, ur, uw, peer)
    except (AuthFailed, asyncio.IncompleteReadError, ConnectionError, ssl.SSLError, ValueError, KeyError, IndexError, UnicodeError) as e:
        log(peer, "closed before authentication:", type(e).__name__, e)
        cw.close(); uw.close(); return
    await asyncio.gather(pipe(cr, uw), pipe(ur, cw))

async def authenticate(cr, cw, ur, uw, peer):
    mech = session = None; raw = False
    while True:
        frame = await read_frame(cr)
        if raw:   # after SaslHandshake v0: bare SASL tokens, no Kafka header
            try: out = session.next(frame)
            except AuthFailed as e: raise AuthFailed("%s (SaslHandshake v0)" % e)
            cw.write(struct.pack(">i", len(out)) + out); await cw.drain()
            if getattr(session, "done", False): log(peer, "authenticated", session.user, mech, "(v0)"); return
            continue
        key, ver, cid = struct.unpack_from(">hhi", frame, 0)
        if key == 18:   # ApiVersions: relay
            uw.write(struct.pack(">i", len(frame)) + frame); await uw.drain()
            resp = await read_frame(ur)
            cw.write(struct.pack(">i", len(resp)) + resp); await cw.drain()
            continue
        n = struct.unpack_from(">h", frame, 8)[0]; body = 10 + max(n, 0)
        if key == 17 and ver in (0, 1) and mech is None:
            n = struct.unpack_from(">h", frame, body)[0]; want = frame[body+2:body+2+n].decode()
            ok = want in MECHS
            resp = struct.pack(">ihi", cid, 0 if ok else 33, len(MECHS)) + b"".join(struct.pack(">h", len(m)) + m.encode() for m in MECHS)
            cw.write(struct.pack(">i", len(resp)) + resp); await cw.drain()
            if not ok: raise AuthFailed("unsupported mechanism " + want)
            mech = want; session = Plain() if want == "PLAIN" else Scram(want); raw = ver == 0
            continue
        if key == 36 and ver in (0, 1, 2) and session is not None:
            if ver == 2:
                body = skip_tags(frame, body)   # request header tagged fields
                n, i = uvarint(frame, body); token = frame[i:i+n-1]
            else:
                n = struct.unpack_from(">i", frame, body)[0]; token = frame[body+4:body+4+n]
            err, msg, out = 0, None, b""
            try: out = session.next(token)
            except AuthFailed as e: err, msg = 58, str(e)
            if ver == 2:
                resp = struct.pack(">i", cid) + b"\0" + struct.pack(">h", err)
                resp += uvarint_enc(0) if msg is None else uvarint_enc(len(msg.encode()) + 1) + msg.encode()
                resp += uvarint_enc(len(out) + 1) + out + struct.pack(">q", 0) + b"\0"
            else:
                resp = struct.pack(">ih", cid, err)
                resp += struct.pack(">h", -1) if msg is None else struct.pack(">h", len(msg.encode())) + msg.encode()
                resp += struct.pack(">i", len(out)) + out + (struct.pack(">q", 0) if ver >= 1 else b"")
            cw.write(struct.pack(">i", len(resp)) + resp); await cw.drain()
            if err: raise AuthFailed(msg)
            if getattr(session, "done", False): log(peer, "authenticated", session.user, mech); return
            continue
        raise AuthFailed("unexpected request api_key=%d v%d before authentication" % (key, ver))

async def main():
    ctx = None
    if tls:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER); ctx.load_cert_chain(*tls)
    try: server = await asyncio.start_server(handle, "127.0.0.1", listen_port, ssl=ctx)
    except OSError as e: sys.exit("cannot listen on 127.0.0.1:%d: %s" % (listen_port, e))
    log("listening on 127.0.0.1:%d (tls=%s, sasl=%s) -> 127.0.0.1:%d" % (listen_port, bool(tls), MECHS if sasl else None, upstream_port))
    if ready: open(ready, "w").close()
    stop = asyncio.Event()
    for s in (signal.SIGINT, signal.SIGTERM): asyncio.get_running_loop().add_signal_handler(s, stop.set)
    async with server: await stop.wait()

asyncio.run(main())
