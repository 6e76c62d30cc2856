# Which address does the broker tell clients to connect to? Sends Metadata v0 (stdlib only)
# and prints each broker's advertised host:port. noida 0.2.3 started with `--host 0.0.0.0`
# (to be reachable from other containers) prints 0.0.0.0:9092: every client then connects to
# itself. Apache Kafka advertises `advertised.listeners`, never a wildcard address.
#   usage: python3 advertised-address.py HOST:PORT
import socket, struct, sys
host, port = sys.argv[1].split(":")
s = socket.create_connection((host, int(port)), timeout=10)
body = struct.pack(">i", 0)  # no topics listed: brokers only
msg = struct.pack(">hhi", 3, 0, 1) + struct.pack(">h", 5) + b"probe" + body
s.sendall(struct.pack(">i", len(msg)) + msg)
def recv(n):
    out = b""
    while len(out) < n:
        c = s.recv(n - len(out))
        if not c: raise EOFError
        out += c
    return out
r = recv(struct.unpack(">i", recv(4))[0])[4:]
count = struct.unpack_from(">i", r, 0)[0]; i = 4
for _ in range(count):
    node = struct.unpack_from(">i", r, i)[0]; i += 4
    n = struct.unpack_from(">h", r, i)[0]; name = r[i + 2:i + 2 + n].decode(); i += 2 + n
    p = struct.unpack_from(">i", r, i)[0]; i += 4
    flag = "  QUIRK: a wildcard address" if name in ("0.0.0.0", "::") else ""
    print("broker %d advertised at %s:%d%s" % (node, name, p, flag))
