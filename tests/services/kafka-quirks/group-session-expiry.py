# Does the broker expire a group member that stops heartbeating (SIGKILLed worker)?
# Two members join a `connect` group (JoinGroup v2, SyncGroup v1, Heartbeat v1, stdlib
# only); member B's socket is then closed without LeaveGroup; member A keeps heartbeating
# every second. Apache Kafka answers A's heartbeat with REBALANCE_IN_PROGRESS (27) once
# B's session (6 s) expires; A then rejoins alone.
# With LEAVE_FOR_B=1, a third connection sends LeaveGroup for B's member id 7 s after B's
# socket closed (what the SIGKILL end-to-end test does in place of the broker's expiry).
#   usage: [LEAVE_FOR_B=1] python3 group-session-expiry.py HOST:PORT [SECONDS]
import os, socket, struct, sys, threading, time
host, port = sys.argv[1].split(":"); port = int(port); wait = float(sys.argv[2]) if len(sys.argv) > 2 else 30
group = "expiry-probe-%d" % int(time.time())
def s16(s): b = s.encode(); return struct.pack(">h", len(b)) + b
def b32(b): return struct.pack(">i", len(b)) + b
class Conn:
    def __init__(self): self.s = socket.create_connection((host, port)); self.cid = 0
    def call(self, key, ver, body):
        self.cid += 1
        msg = struct.pack(">hhi", key, ver, self.cid) + s16("probe") + body
        self.s.sendall(struct.pack(">i", len(msg)) + msg)
        n = struct.unpack(">i", self.recv(4))[0]; r = self.recv(n); return r[4:]
    def recv(self, n):
        out = b""
        while len(out) < n:
            c = self.s.recv(n - len(out))
            if not c: raise EOFError
            out += c
        return out
def rstr(b, i): n = struct.unpack_from(">h", b, i)[0]; return b[i+2:i+2+n].decode(), i+2+n
def coordinator():
    c = Conn(); r = c.call(10, 1, s16(group) + b"\x00")   # FindCoordinator v1
    err = struct.unpack_from(">h", r, 4)[0]; _, i = rstr(r, 6) if False else (None, 6)
    msg_len = struct.unpack_from(">h", r, 6)[0]; i = 8 + max(msg_len, 0)
    node = struct.unpack_from(">i", r, i)[0]; h, i = rstr(r, i + 4); p = struct.unpack_from(">i", r, i)[0]
    return Conn() if (h, p) == (host, port) else None
def join(c, member):
    proto = struct.pack(">i", 1) + s16("default") + b32(b"\x00\x00" + s16("http://x/") + struct.pack(">q", -1))
    body = s16(group) + struct.pack(">ii", 6000, 10000) + s16(member) + s16("connect") + proto
    r = c.call(11, 2, body)   # JoinGroup v2: throttle, error, generation, protocol, leader, member, members
    err, gen = struct.unpack_from(">hi", r, 4); proto, i = rstr(r, 10); leader, i = rstr(r, i); me, i = rstr(r, i)
    n = struct.unpack_from(">i", r, i)[0]; i += 4; members = []
    for _ in range(n):
        m, i = rstr(r, i); l = struct.unpack_from(">i", r, i)[0]; i += 4 + l; members.append(m)
    return err, gen, leader, me, members
def sync(c, gen, me, members):
    assigns = struct.pack(">i", len(members)) + b"".join(s16(m) + b32(b"x") for m in members)
    r = c.call(14, 1, s16(group) + struct.pack(">i", gen) + s16(me) + assigns)
    return struct.unpack_from(">h", r, 4)[0]
def heartbeat(c, gen, me):
    r = c.call(12, 1, s16(group) + struct.pack(">i", gen) + s16(me)); return struct.unpack_from(">h", r, 4)[0]
state = {}
def member(name):
    c = Conn(); err, gen, leader, me, members = join(c, "")
    serr = sync(c, gen, me, members if leader == me else [])
    state[name] = (c, gen, me); print(f"{name}: joined gen={gen} members={len(members)} leader={leader == me} join_err={err} sync_err={serr}", flush=True)
t = [threading.Thread(target=member, args=(n,)) for n in "AB"]; [x.start() for x in t]; [x.join(30) for x in t]
state["B"][0].s.close(); print("B: socket closed without LeaveGroup", flush=True)
if os.environ.get("LEAVE_FOR_B"):
    time.sleep(7); r = Conn().call(13, 1, s16(group) + s16(state["B"][2]))
    print("LeaveGroup for B from a third connection -> error", struct.unpack_from(">h", r, 4)[0], flush=True)
c, gen, me = state["A"]; start = time.time()
while time.time() - start < wait:
    time.sleep(1); e = heartbeat(c, gen, me); print(f"A: heartbeat after {time.time()-start:4.1f}s -> error {e}", flush=True)
    if e == 27:
        err, gen, leader, me, members = join(c, me); print(f"A: rejoined gen={gen} members={len(members)} err={err}"); break
else:
    print(f"QUIRK: the dead member was not expired within {wait:.0f}s (session.timeout.ms=6000)")
