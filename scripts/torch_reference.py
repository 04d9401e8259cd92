"""A plain PyTorch FedBuff loop: the reference that scripts/benchmark.py times its tasks against.

  python scripts/torch_reference.py --model=cnn --clients=100 --concurrency=20 --buffer=10 \
      --local_steps=5 --steps=6 --rows=600 --image=28,28,1

The loop a federated-learning paper's code typically is: one ``torch.nn.Module``, the
clients of a FedBuff run (Nguyen et al., AISTATS 2022, Alg. 1) trained one after another
with ``torch.optim.SGD`` and ``loss.backward()``. ``--concurrency`` jobs are in flight;
each arrival trains ``--local_steps`` SGD steps (lr 0.01, ``--batch`` rows drawn from its
client's ``--rows``) from the global model it was dispatched with (the server keeps those
snapshots), and every ``--buffer`` arrivals the server subtracts their mean update. The
work is what benchmark.py gives the engine: the same model, batch, K, concurrency and
number of jobs; data are random like the engine's.

Models: ``mlp`` (ReLU layers ``--hidden``, 10 logits), ``cnn`` (afl_jax/models/cnn.py:
3x3 convs 32-64-64, 2x2 max-pools after the first two, FC 128, FC 10) and ``resnet18``
(afl_jax/models/resnet.py: CIFAR ResNet-18, GroupNorm of 2 groups). PyTorch is not a
dependency of afl_jax: run this with the Python of a venv of its own. Prints one JSON
line: the jobs of one run and the seconds of each timed run (after one warm-up job); with
``--time_step``, instead the best process CPU time of one local step of one client over
``--runs`` steps (after one warm-up step): what a step costs on this CPU however loaded.
"""

import argparse
import json
import time

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F


def mlp(hidden, image):
  sizes = [int(np.prod(image)), *hidden]
  layers = [nn.Flatten()]
  for a, b in zip(sizes[:-1], sizes[1:]):
    layers += [nn.Linear(a, b), nn.ReLU()]
  return nn.Sequential(*layers, nn.Linear(sizes[-1], 10))


def cnn(hidden, image):
  del hidden
  h, w, c = image
  conv = lambda i, o: [nn.Conv2d(i, o, 3, padding=1), nn.ReLU()]
  return nn.Sequential(
    *conv(c, 32), nn.MaxPool2d(2), *conv(32, 64), nn.MaxPool2d(2), *conv(64, 64),
    nn.Flatten(), nn.Linear(64 * (h // 4) * (w // 4), 128), nn.ReLU(), nn.Linear(128, 10),
  )  # fmt: skip


class Block(nn.Module):
  """Two 3x3 convs, GroupNorm(2), a residual (1x1 projection when the shape changes)."""

  def __init__(self, i, o, stride):
    super().__init__()
    norm = lambda: nn.GroupNorm(2, o)
    self.body = nn.Sequential(
      nn.Conv2d(i, o, 3, stride, 1, bias=False), norm(), nn.ReLU(),
      nn.Conv2d(o, o, 3, 1, 1, bias=False), norm(),
    )  # fmt: skip
    project = stride != 1 or i != o
    self.skip = nn.Sequential(nn.Conv2d(i, o, 1, stride, bias=False), norm()) if project else None

  def forward(self, x):
    return F.relu(self.body(x) + (x if self.skip is None else self.skip(x)))


def resnet18(hidden, image):
  del hidden
  layers = [nn.Conv2d(image[2], 64, 3, 1, 1, bias=False), nn.GroupNorm(2, 64), nn.ReLU()]
  i = 64
  for stage, o in enumerate((64, 128, 256, 512)):
    for j in range(2):
      layers.append(Block(i, o, 2 if stage and not j else 1))
      i = o
  return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, 10))


MODELS = {'mlp': mlp, 'cnn': cnn, 'resnet18': resnet18}


def main():
  ap = argparse.ArgumentParser()
  ap.add_argument('--model', choices=sorted(MODELS), required=True)
  ap.add_argument('--hidden', default='200,200', help='the MLP widths')
  ap.add_argument('--image', default='28,28,1', help='height,width,channels')
  for name, default in (('clients', 100), ('concurrency', 20), ('buffer', 10), ('rows', 600)):
    ap.add_argument(f'--{name}', type=int, default=default)
  for name, default in (('local_steps', 10), ('steps', 50), ('batch', 32), ('runs', 3)):
    ap.add_argument(f'--{name}', type=int, default=default)
  ap.add_argument('--threads', type=int, default=2)
  ap.add_argument('--time_step', action='store_true', help='time one local step (CPU time)')
  args = ap.parse_args()
  torch.set_num_threads(args.threads)
  h, w, c = (int(v) for v in args.image.split(','))
  hidden = [int(v) for v in args.hidden.split(',')]
  rng = np.random.default_rng(0)
  x = torch.from_numpy(rng.normal(size=(args.clients, args.rows, c, h, w)).astype(np.float32))
  y = torch.from_numpy(rng.integers(0, 10, (args.clients, args.rows)))
  model = MODELS[args.model](hidden, (h, w, c))
  params = list(model.parameters())

  def job(start, client):
    """K local SGD steps from ``start``; the update ``start - end``."""
    with torch.no_grad():
      for p, s in zip(params, start):
        p.copy_(s)
    opt = torch.optim.SGD(params, lr=0.01)
    for _ in range(args.local_steps):
      rows = torch.from_numpy(rng.integers(0, args.rows, args.batch))
      loss = F.cross_entropy(model(x[client, rows]), y[client, rows])
      opt.zero_grad()
      loss.backward()
      opt.step()
    with torch.no_grad():
      return [s - p for s, p in zip(start, params)]

  def run():
    snapshots = {0: [p.detach().clone() for p in params]}
    in_flight = [(int(i), 0) for i in rng.choice(args.clients, args.concurrency, replace=False)]
    for t in range(args.steps):
      updates = []
      for _ in range(args.buffer):
        client, version = in_flight.pop(0)
        updates.append(job(snapshots[version], client))
        in_flight.append((int(rng.integers(args.clients)), t))
      with torch.no_grad():
        mean = [torch.stack(u).mean(0) for u in zip(*updates)]
        snapshots[t + 1] = [p - u for p, u in zip(snapshots[t], mean)]
      oldest = min(v for _, v in in_flight)
      snapshots = {v: s for v, s in snapshots.items() if v >= oldest}
    return snapshots

  if args.time_step:
    opt = torch.optim.SGD(params, lr=0.01)
    times = []
    for _ in range(args.runs + 1):  # the first: warm-up
      rows = torch.from_numpy(rng.integers(0, args.rows, args.batch))
      t0 = time.process_time()
      loss = F.cross_entropy(model(x[0, rows]), y[0, rows])
      opt.zero_grad()
      loss.backward()
      opt.step()
      times.append(time.process_time() - t0)
    out = dict(model=args.model, step_cpu_s=min(times[1:]), torch=torch.__version__)
    print(json.dumps(out | dict(threads=torch.get_num_threads())))
    return

  job([p.detach().clone() for p in params], 0)  # warm-up: one job
  times = []
  for _ in range(args.runs):
    t0 = time.perf_counter()
    run()
    times.append(time.perf_counter() - t0)
  jobs = args.steps * args.buffer
  print(
    json.dumps(
      dict(model=args.model, jobs=jobs, run_s=times, updates_per_s=jobs / min(times),
           torch=torch.__version__, threads=torch.get_num_threads())
    )
  )  # fmt: skip


if __name__ == '__main__':
  main()
