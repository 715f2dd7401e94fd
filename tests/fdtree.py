"""fdtree.py DIR -- a tree of two processes with files, sockets and a
pipe open, for gpuinspect's tests.

It closes every descriptor above 2, then opens, in this order:
DIR/data for reading at offset 1000, DIR/log for appending (and writes
10 bytes to it), DIR/rw for reading and writing at offset 7, a unix
stream socket listening on DIR/sock, a connected pair of unix stream
sockets and a pipe.  It moves to DIR/wd and forks: the child keeps the
pipe's read end, the parent its write end.  The parent writes
"pid=P child=C data=N log=N rw=N listen=N a=N b=N pw=N pr=N" (the
descriptors' numbers) to DIR/ready, then both sleep until killed."""
import os, socket, sys, time

d = sys.argv[1]
os.closerange(3, 65536)
data = os.open(d + "/data", os.O_RDONLY)
os.lseek(data, 1000, os.SEEK_SET)
log = os.open(d + "/log", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
os.write(log, b"0123456789")
rw = os.open(d + "/rw", os.O_RDWR)
os.lseek(rw, 7, os.SEEK_SET)
ls = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
ls.bind(d + "/sock")
ls.listen(4)
a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
pr, pw = os.pipe()
os.chdir(d + "/wd")
child = os.fork()
if child == 0:
    os.close(pw)
    while True:
        time.sleep(1)
os.close(pr)
with open(d + "/ready.tmp", "w") as f:
    f.write("pid=%d child=%d data=%d log=%d rw=%d listen=%d a=%d b=%d "
        "pw=%d pr=%d\n" % (os.getpid(), child, data, log, rw, ls.fileno(),
        a.fileno(), b.fileno(), pw, pr))
os.rename(d + "/ready.tmp", d + "/ready")
while True:
    time.sleep(1)
