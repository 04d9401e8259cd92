"""Training curves against server steps and simulated wall-clock, and methods over seeds with
interval bands (:func:`plot_methods`)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import matplotlib

matplotlib.use('Agg')
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.backend_bases import FigureCanvasBase  # noqa: E402

from afl_jax.pipeline.workdir import write_text  # noqa: E402


def plot_runs(runs: Mapping[str, Sequence[dict]], path: str | os.PathLike, *, title: str) -> None:
  """Overlay runs' test accuracy against server steps (left) and simulated wall-clock (right)."""
  fig, axes, metric = *plt.subplots(1, 2, figsize=(11, 4)), 'test_accuracy'
  for label, records in runs.items():
    records = [r for r in records if metric in r]
    steps = [r['step'] for r in records]
    wall = [r['wall_clock'] for r in records]
    values = [r[metric] for r in records]
    axes[0].plot(steps, values, marker='.', label=label)
    axes[1].plot(wall, values, marker='.', label=label)
  for ax, xlabel in zip(axes, ('server steps', 'simulated wall-clock')):
    _label(ax, xlabel, metric)
  axes[1].legend(fontsize=8)
  fig.suptitle(title)
  fig.tight_layout()
  save_figure(fig, path)


def _label(ax, xlabel: str, metric: str) -> None:
  ax.set_xlabel(xlabel)
  ax.set_ylabel(metric.replace('_', ' '))
  ax.grid(alpha=0.3)


# The image formats a figure is written in (matplotlib's own, by file name extension).
FORMATS = tuple(sorted(FigureCanvasBase.get_supported_filetypes()))


def image_format(path: str | os.PathLike) -> str:
  """The format of an image file ``path`` (its extension; none: png)."""
  return os.path.splitext(os.fspath(path))[1].lstrip('.').lower() or 'png'


def save_figure(fig, path: str | os.PathLike, dpi: int = 110) -> None:
  """Write ``fig`` atomically (never through a link) and close it; ValueError for a format not
  in :data:`FORMATS`."""
  try:
    kind = image_format(path)
    if kind not in FORMATS:
      raise ValueError(f'{path}: cannot write a figure as {kind!r}; formats: {", ".join(FORMATS)}')
    write_text(path, lambda f: fig.savefig(f, dpi=dpi, format=kind))
  finally:
    plt.close(fig)


def plot_methods(
  curves: Mapping[str, Mapping[str, Sequence[float]]],
  path: str | os.PathLike,
  *,
  xlabel: str = 'server steps',
  metric: str = 'test_accuracy',
  title: str = '',
) -> None:
  """One curve per method with its interval band (``afl_jax.results.curves``: ``x``,
  ``mean``, ``lo``, ``hi``, ``n``)."""
  fig, ax = plt.subplots(figsize=(7, 4.5))
  for label, c in curves.items():
    (line,) = ax.plot(c['x'], c['mean'], marker='.', label=f'{label} (n={c["n"]})')
    if c['n'] > 1:
      ax.fill_between(c['x'], c['lo'], c['hi'], color=line.get_color(), alpha=0.2, lw=0)
  _label(ax, xlabel, metric)
  ax.legend(fontsize=8)
  if title:
    ax.set_title(title)
  fig.tight_layout()
  save_figure(fig, path)
