"""Shared test setup: keep XLA to the cores we have and make failures readable."""

import os

os.environ.setdefault('XLA_FLAGS', '--xla_cpu_multi_thread_eigen=true')
