"""Port (Su & Li, IWQoS 2022), a baseline of FedFa (paper 001, Table 2), on non-IID FMNIST.

FedFa's shared setting (``fedfa_fmnist()`` in configs/paper_settings.py: long-tailed
log-normal job durations, target accuracy 0.75, MLP) with FedBuff's event clock:
concurrency Mc = 10 and a buffer of M = 5 arrivals per aggregation (Port's
``minimum_clients_aggregated``; the authors' CIFAR-10 configuration aggregates 15 of
30). Port's weights use the authors' CIFAR-10 configuration (Plato
``examples/port/port_cifar10.yml``): similarity weight 1, staleness weight 3,
staleness bound B = 10; server_lr = 1 (a weighted model average) and client_lr =
0.05 (our FedBuff config's local rate; the authors use 0.1 with momentum 0.9).

The staleness bound's scheduling (waiting for, or urgently requesting, clients
staler than B: Port-Non-Urgent / Port-Urgent) is the schedule kind ``port``
(``schedule.staleness_bound``, ``schedule.urgent``); this config runs Port's
aggregation on FedBuff's clock (``--config.schedule.kind=port`` for both; see
docs/algorithms/port.md).
"""

from afl_jax.pipeline.config import import_beside

paper_settings = import_beside(__file__, 'paper_settings')


def get_config():
  c = paper_settings.fedfa_fmnist()
  c.algorithm = 'port'
  c.hparams = {
    'client_lr': 0.05,
    'server_lr': 1.0,
    'similarity_weight': 1.0,
    'staleness_weight': 3.0,
    'staleness_bound': 10.0,
    'reference': 'last_step',
  }
  c.schedule.kind = 'fedbuff'
  c.schedule.concurrency = 10
  c.schedule.buffer_size = 5
  c.num_rounds = 300
  c.eval_every = 25
  return c
