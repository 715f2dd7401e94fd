"""remap.py -- trees that hold files whose name is gone while another
name of them remains, which criu dumps only by linking them back
(--link-remap), for t-remap.sh.

    remap.py spawn DIR N     Python's multiprocessing with the "spawn"
                             start method: a parent and two children
                             each add 1 to a shared counter N times,
                             under a shared lock, reading and writing it
                             apart (a lock that stops being shared loses
                             additions); the parent writes "ok TOTAL" or
                             "fail ..." to DIR/result
    remap.py linked DIR      a file opened under a name then linked to
                             DIR/final and unlinked from the first: the
                             parent keeps that descriptor, its child
                             opens DIR/final; on DIR/go the parent writes
                             through its own and the child must read it
                             through its own
    remap.py big DIR SIZE    a file of SIZE bytes opened, linked to
                             DIR/final, its first name unlinked; on DIR/go
                             its bytes are read back through the
                             descriptor and checked

Each writes its PID (the root's) to DIR/ready once set up, and "ok" or
"fail WHY" to DIR/result.
"""
import hashlib
import multiprocessing
import os
import sys
import time


def put(path, text):
    with open(path + ".tmp", "w") as f:
        f.write(text + "\n")
    os.rename(path + ".tmp", path)


def wait_go(d, seconds=60):
    end = time.time() + seconds
    while not os.path.exists(os.path.join(d, "go")):
        if time.time() > end:
            return False
        time.sleep(0.05)
    return True


def adder(lock, counter, n, pause):
    for _ in range(n):
        with lock:
            v = counter.value
            time.sleep(pause)
            counter.value = v + 1


def spawn(d, n):
    ctx = multiprocessing.get_context("spawn")
    lock = ctx.Lock()
    counter = ctx.Value("i", 0, lock=False)
    kids = [ctx.Process(target=adder, args=(lock, counter, n, 0.002))
            for _ in range(2)]
    for k in kids:
        k.start()
    # ready once every child adds too, well before the end
    while counter.value < 3:
        time.sleep(0.01)
    put(os.path.join(d, "ready"), str(os.getpid()))
    adder(lock, counter, n, 0.002)
    for k in kids:
        k.join()
    total = counter.value
    put(os.path.join(d, "result"), "ok %d" % total if total == 3 * n
        else "fail %d of %d" % (total, 3 * n))


def relinked(d, size):
    """a file under DIR/final, open here by a name now gone"""
    first = os.path.join(d, "first")
    fd = os.open(first, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    if size:
        block = hashlib.sha256(b"remap").digest() * 2048
        left = size
        while left > 0:
            left -= os.write(fd, block[:min(left, len(block))])
    else:
        os.write(fd, b"before")
    os.link(first, os.path.join(d, "final"))
    os.unlink(first)
    return fd


def linked(d):
    fd = relinked(d, 0)
    pid = os.fork()
    if pid == 0:
        os.close(fd)
        mine = os.open(os.path.join(d, "final"), os.O_RDONLY)
        if not wait_go(d):
            os._exit(1)
        end = time.time() + 10
        while os.pread(mine, 5, 0) != b"after":
            if time.time() > end:
                put(os.path.join(d, "result"), "fail the child reads %r" %
                    os.pread(mine, 6, 0))
                os._exit(1)
            time.sleep(0.05)
        put(os.path.join(d, "result"), "ok")
        os._exit(0)
    put(os.path.join(d, "ready"), str(os.getpid()))
    if wait_go(d):
        os.pwrite(fd, b"after", 0)
    os.waitpid(pid, 0)


def big(d, size):
    fd = relinked(d, size)
    want = hashlib.sha256(os.pread(fd, size, 0)).hexdigest()
    put(os.path.join(d, "ready"), str(os.getpid()))
    if not wait_go(d):
        return
    got = os.pread(fd, size + 1, 0)
    put(os.path.join(d, "result"), "ok" if len(got) == size and
        hashlib.sha256(got).hexdigest() == want else
        "fail %d bytes read back" % len(got))


def main():
    # Nothing of the test's (its log, make's jobserver) in the tree.
    os.closerange(3, 1024)
    what, d = sys.argv[1], sys.argv[2]
    if what == "spawn":
        spawn(d, int(sys.argv[3]))
    elif what == "linked":
        linked(d)
    elif what == "big":
        big(d, int(sys.argv[3]))
    else:
        sys.exit("remap.py: unknown case '%s'" % what)


if __name__ == "__main__":
    main()
