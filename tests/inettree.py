"""inettree.py DIR [ADDR] -- a process with TCP and UDP sockets open, for
gpuinspect's tests.

It closes every descriptor above 2, then opens, in this order: a TCP
socket listening on 127.0.0.1 (with ADDR, on 0.0.0.0), a TCP
connection from 127.0.0.1 to it (with ADDR, from ADDR to ADDR: both
ends in this process, the one connect() made and the one accept()
gave), a UDP socket bound to 127.0.0.1, a UDP socket never bound, and,
where ::1 can be bound here, a TCP socket listening on ::1 (IPv6 only).
The ports are the kernel's choice.  The listening socket and the
connecting one have SO_REUSEADDR set, as servers have it (the accepted
one takes it from the listening one): once the process is killed, the
end that closed first waits in TIME_WAIT on its port, and a socket with
SO_REUSEADDR, as criu restore binds one, may bind that port all the
same.  It writes "pid=P listen=FD lport=N client=FD cport=N server=FD
udp=FD uport=N unbound=FD listen6=FD l6port=N" (listen6 and l6port 0
without ::1) to DIR/ready, then sleeps until killed."""
import os, socket, sys, time

d = sys.argv[1]
addr = sys.argv[2] if len(sys.argv) > 2 else "127.0.0.1"
os.closerange(3, 65536)
ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(("0.0.0.0" if len(sys.argv) > 2 else addr, 0))
ls.listen(4)
cl = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
cl.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
cl.bind((addr, 0))
cl.connect((addr, ls.getsockname()[1]))
sv, _ = ls.accept()
us = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
us.bind(("127.0.0.1", 0))
ub = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
l6, l6port = None, 0
try:
    l6 = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    l6.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
    l6.bind(("::1", 0))
    l6.listen(4)
    l6port = l6.getsockname()[1]
except OSError:
    if l6 is not None:
        l6.close()
    l6 = None
with open(d + "/ready.tmp", "w") as f:
    f.write("pid=%d listen=%d lport=%d client=%d cport=%d server=%d "
        "udp=%d uport=%d unbound=%d listen6=%d l6port=%d\n" % (os.getpid(),
        ls.fileno(), ls.getsockname()[1], cl.fileno(), cl.getsockname()[1],
        sv.fileno(), us.fileno(), us.getsockname()[1], ub.fileno(),
        l6.fileno() if l6 is not None else 0, l6port))
os.rename(d + "/ready.tmp", d + "/ready")
while True:
    time.sleep(1)
