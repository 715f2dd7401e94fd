"""ddptrain.py DIR STEPS SLEEP: a 2-rank torch.distributed job of t-apps.sh.

Run with the python that has torch (Debian's python3-torch).  It starts
two ranks with torch.multiprocessing.spawn, joined by the gloo backend
over TCP on 127.0.0.1 (a free port, chosen here), and trains a small
model under DistributedDataParallel on data of its own, the same every
run: STEPS steps, each followed by a sleep of SLEEP seconds, so that a
test can catch it mid-run.  Rank 0 appends "step N" to DIR/steps after
each step and saves the final state_dict in DIR/final.pt (written to a
temporary name, then renamed); DIR/sems lists the names of the POSIX
semaphores of the job (in /dev/shm), one a line, for the test to remove
should the job not end; DIR/pid the PID of the job's root, the process
to checkpoint.  gloo is told to use the loopback interface, whatever
the host's name resolves to.  Each rank runs on one thread, so the sums it
computes do not depend on how they are split; the two ranks' gradients
are averaged by gloo, and a + b == b + a, so the result is the same bit
for bit whatever the order, run after run.
"""

import os
import socket
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel


def data(rank, step):
    g = torch.Generator().manual_seed(1000 * step + rank)
    x = torch.randn(32, 16, generator=g)
    y = (x[:, :4].sum(dim=1, keepdim=True) > 0).float()
    return x, y


def train(rank, port, outdir, steps, pause):
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port,
                            rank=rank, world_size=2)
    torch.manual_seed(42)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(),
                                torch.nn.Linear(32, 1))
    ddp = DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    loss_fn = torch.nn.BCEWithLogitsLoss()
    for step in range(1, steps + 1):
        x, y = data(rank, step)
        opt.zero_grad()
        loss_fn(ddp(x), y).backward()
        opt.step()
        if rank == 0:
            with open(os.path.join(outdir, "steps"), "a") as f:
                f.write("step %d\n" % step)
        if pause > 0:
            time.sleep(pause)
    dist.barrier()
    if rank == 0:
        tmp = os.path.join(outdir, ".final.pt")
        torch.save(model.state_dict(), tmp)
        os.rename(tmp, os.path.join(outdir, "final.pt"))
    dist.destroy_process_group()


def main():
    outdir, steps, pause = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    os.environ["GLOO_SOCKET_IFNAME"] = "lo"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.spawn(train, args=(port, outdir, steps, pause), nprocs=2,
                   join=False)
    with open(os.path.join(outdir, "sems"), "w") as f:
        for q in ctx.error_queues:
            for lock in (q._rlock, q._wlock):
                if lock is not None and lock._semlock.name:
                    f.write("sem.%s\n" % lock._semlock.name.lstrip("/"))
    with open(os.path.join(outdir, ".pid"), "w") as f:
        f.write("%d\n" % os.getpid())
    os.rename(os.path.join(outdir, ".pid"), os.path.join(outdir, "pid"))
    while not ctx.join():
        pass


if __name__ == "__main__":
    main()
