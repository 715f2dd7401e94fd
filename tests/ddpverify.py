"""ddpverify.py REFERENCE RESULT: the weights ddptrain.py saved in RESULT
are those of REFERENCE, bit for bit (torch.equal, tensor by tensor, the
same names), and no tensor of them is as the model started: exit 0,
else 1 with what differs on stderr.  Run with the python that has torch.
"""

import sys

import torch


def main():
    ref = torch.load(sys.argv[1])
    res = torch.load(sys.argv[2])
    # The model as ddptrain.py builds it, before any step.
    torch.manual_seed(42)
    start = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(),
                                torch.nn.Linear(32, 1)).state_dict()
    bad = []
    if sorted(ref) != sorted(res) or sorted(ref) != sorted(start):
        bad.append("names: %s, %s" % (sorted(ref), sorted(res)))
    else:
        for name in sorted(ref):
            if not torch.equal(ref[name], res[name]):
                d = (ref[name] - res[name]).abs().max().item()
                bad.append("%s differs (by up to %g)" % (name, d))
        if any(torch.equal(ref[n], start[n]) for n in ref):
            bad.append("a tensor of the reference is as the model started")
    for b in bad:
        print("ddpverify: %s" % b, file=sys.stderr)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
