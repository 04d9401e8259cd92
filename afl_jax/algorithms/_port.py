"""Port: staleness- and similarity-aware buffered aggregation with bounded staleness.

Su and Li, "How Asynchronous can Federated Learning Be?", IEEE/ACM IWQoS 2022 -- a
baseline of FedFa (paper 001, Table 2: Port-Urgent, Port-Non-Urgent). Server
:mod:`afl_jax.servers.port`; clients run local SGD (``clients.local_sgd``). The
staleness bound's scheduling part (waiting for / urgently requesting stale clients)
lives in the schedule: (docs/algorithms/port.md, "The staleness bound: a scheduling
mechanism").

Symbols: eta_l -> ``client_lr`` (0.1, the authors' CIFAR-10 configuration),
eta -> ``server_lr`` (1: weighted model average), lambda_sim -> ``similarity_weight``
(1), lambda_st -> ``staleness_weight`` (3), B -> ``staleness_bound`` (10): the
authors' Plato configuration ``examples/port/port_cifar10.yml``. n_i: the number of
training examples of client i (``weighting='examples'``, default, as in the authors'
code; the counts travel with the messages), or 1 (``'uniform'``).
"""

from __future__ import annotations

from afl_jax.algorithms.registry import register
from afl_jax.clients.sgd import local_sgd
from afl_jax.core import checks
from afl_jax.core.types import Algorithm
from afl_jax.servers.port import REFERENCES, port_server


@register(
  'port',
  similarity_weight=checks.NON_NEGATIVE,
  staleness_weight=checks.NON_NEGATIVE,
  staleness_bound=checks.POSITIVE,
  reference=checks.choice(REFERENCES),
)
def port(
  client_lr: float = 0.1,
  server_lr: float = 1.0,
  similarity_weight: float = 1.0,
  staleness_weight: float = 3.0,
  staleness_bound: float = 10.0,
  reference: str = 'last_step',
  weighting: str = 'examples',
) -> Algorithm:
  """Port; ``weighting='examples'`` multiplies each raw weight by n_i (the authors' code)."""
  server = port_server(
    server_lr,
    similarity_weight,
    staleness_weight,
    staleness_bound,
    reference=reference,
    weighting=weighting,
  )
  return Algorithm('port', local_sgd(client_lr), server)
