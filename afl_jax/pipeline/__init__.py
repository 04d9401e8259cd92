"""The experiment pipeline: one straight path from a config to results.

``build(config) -> Run`` (validated once), then a loop that only runs, evaluates,
checkpoints and writes. Modules (being rebuilt; see issue 13):

  config      the default config and one validator per section
  build       build(config) -> Run (data, model, schedule, algorithm, problem, evaluator)
  task        the task loss and the evaluator
  loop        the train loop (train_and_evaluate)
  checkpoint  checkpoints, the config fingerprint, resume refusal and fallback
  metrics_io  metrics.jsonl (strict JSON, torn-line repair) and TensorBoard writers
  sweep       sweeps declared in config.sweep, many runs per compile
  tuning      the tuning protocol: validation selection, edge flags, paired comparison
  plotting    plots of metrics
"""
