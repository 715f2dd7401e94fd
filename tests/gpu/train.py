#!/usr/bin/env python3
"""train.py: a deterministic PyTorch training run, for tests/gpu/run.sh.

usage: train.py --device cuda|cpu --steps N --status FILE [--pace SECS]

Trains a small convolutional network on synthetic images drawn from
fixed seeds, one batch a step, sleeping SECS (default 0.02) after each
so that a checkpoint can land in the middle.  After each step it appends
"step N loss=X" to FILE, and at the end
    done steps=N sha256=HEX
where HEX is the SHA-256 of the final weights' bytes, in the order of
the model's state_dict: two runs that computed the same, on the same
device, print the same.  FILE is opened for each line, so that nothing
of it is open across a checkpoint; descriptors other than 0, 1 and 2
that it inherits are closed first.

Deterministic: every seed fixed, torch.use_deterministic_algorithms,
cuDNN's benchmark off.  On CUDA, CUBLAS_WORKSPACE_CONFIG must be set
(the runner sets it) before the process starts.
"""

import argparse
import hashlib
import os
import time

# What the caller left open is not the job's (a test's log, a pipe):
# closed before anything else opens, as cudawork and gpuwork do.
os.closerange(3, os.sysconf("SC_OPEN_MAX"))

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402


def status(path, line):
    with open(path, "a") as f:
        f.write(line + "\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", required=True, choices=["cuda", "cpu"])
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--status", required=True)
    ap.add_argument("--pace", type=float, default=0.02)
    a = ap.parse_args()

    torch.manual_seed(1234)
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.benchmark = False
    dev = torch.device(a.device)

    model = nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(),
        nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.ReLU(),
        nn.Flatten(),
        nn.Linear(32 * 16 * 16, 64), nn.ReLU(),
        nn.Linear(64, 10)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    # Squared error against one-hot labels: every operation of the step
    # has a deterministic CUDA kernel (CUDA's NLLLoss and pooling
    # backward may not).
    lossf = nn.MSELoss()
    gen = torch.Generator(device="cpu").manual_seed(99)
    status(a.status, "ready")
    for step in range(1, a.steps + 1):
        x = torch.randn(64, 3, 32, 32, generator=gen).to(dev)
        y = nn.functional.one_hot(
            torch.randint(0, 10, (64,), generator=gen), 10).float().to(dev)
        opt.zero_grad()
        loss = lossf(model(x), y)
        loss.backward()
        opt.step()
        status(a.status, "step %d loss=%.6f" % (step, loss.item()))
        time.sleep(a.pace)
    h = hashlib.sha256()
    for k, v in model.state_dict().items():
        h.update(k.encode())
        h.update(v.detach().cpu().contiguous().numpy().tobytes())
    status(a.status, "done steps=%d sha256=%s" % (a.steps, h.hexdigest()))


if __name__ == "__main__":
    main()
