"""The algorithms on non-IID Fashion-MNIST in the five papers' settings, scaled to 2 CPU cores.

  python scripts/train.py --config=configs/fmnist.py:fedfa_delta --workdir=runs/fedfa_delta

One entry per config name: the paper's shared setting (dotted fields over
:func:`afl_jax.pipeline.config.default`), then the algorithm (the entry's name unless a
field says otherwise) and its hyperparameters. The comment above an entry cites the
paper and what was set or scaled; docs/configs.md gives each entry's provenance in
full, under its name, and docs/results/ how each setting reproduces the paper.
"""

from afl_jax.pipeline import config as config_lib

# ---- the papers' shared settings, scaled ---------------------------------------------------
# MasFL paper (000) Sec. 6: N=100, Dir(0.5), FedBuff clock Mc=20, M=10, U(0, 20). Scaled:
# logistic regression, 12,000 training samples, K=5 steps of batch 50 (about two local
# epochs of a median client), 300 server steps.
MASFL = {
  'train_subset': 12000,
  'model': 'logreg',
  'batch_size': 50,
  'local_steps': 5,
  'num_rounds': 300,
  'eval_every': 25,
  'eval_train_samples': 1000,
}
# FedGM paper (003) Table 1: 100 clients, 5 per step, Dir(0.5), 3 local epochs. Scaled: MLP,
# 10,000 training samples; the schedule is set per entry (synchronous rounds, FEDGM_SYNC,
# or App. H.1's random staleness).
FEDGM = {'train_subset': 10000, 'schedule.clients_per_step': 5, 'eval_train_samples': 2000}
# Table 1's synchronous rounds: 3 local epochs, every job of the same length.
FEDGM_SYNC = FEDGM | {
  'local_epochs': 3,
  'schedule.kind': 'synchronous',
  'schedule.durations': 'constant',
  'schedule.durations_params': {'value': 1.0},
}
# FedFa paper (001): long-tailed (log-normal) job durations, target accuracy 0.75. Scaled:
# MLP, 15,000 training samples.
FEDFA = {
  'train_subset': 15000,
  'schedule.durations': 'lognormal',
  'schedule.durations_params': {'mu': 1.0, 'sigma': 1.0},
  'target_accuracy': 0.75,
  'eval_train_samples': 1000,
}
# FEDFA fully asynchronous (one server step per arrival): Mc = 10 clients training at
# once, 1,000 arrivals, evaluation every 50.
FEDFA_ASYNC = FEDFA | {
  'schedule.kind': 'fully_async',
  'schedule.concurrency': 10,
  'num_rounds': 1000,
  'eval_every': 50,
}
# AsynFL paper (004) Sec. V: Dir(0.4), Normal job times, a fixed waiting window. Scaled: 20
# clients, 12,000 training samples, K=5, 100 rounds; the server waits 5 s for jobs of
# Normal(10, 3) s.
ASYNFL = {
  'num_clients': 20,
  'dirichlet_alpha': 0.4,
  'train_subset': 12000,
  'local_steps': 5,
  'schedule.kind': 'waiting_windows',
  'schedule.wait_seconds': 5.0,
  'schedule.durations': 'normal',
  'schedule.durations_params': {'mean': 10.0, 'std': 3.0},
  'num_rounds': 100,
  'eval_every': 5,
  'eval_train_samples': 1000,
  'target_accuracy': 0.75,
}
# FedEcho paper (002) Sec. 5.1 / Table 2: N=50, Dir(0.1), FedBuff clock Mc=25, M=5, Table
# 1's large-delay job times. Scaled: MLP, an 11,000-sample training subset of which 1,000
# are held out as the unlabeled set (unlabeled_source = 'digits': an external set
# instead), K=5 steps of batch 32, 150 server steps (docs/configs.md, fedecho, gives the
# reasons). Baselines of FedEcho's Table 2 start from the same setting.
FEDECHO = {
  'num_clients': 50,
  'partition': 'dirichlet',
  'dirichlet_alpha': 0.1,
  'train_subset': 11000,
  'unlabeled_size': 1000,
  'model': 'mlp',
  'batch_size': 32,
  'local_steps': 5,
  'schedule.kind': 'fedecho_large',
  'schedule.concurrency': 25,
  'schedule.buffer_size': 5,
  'num_rounds': 150,
  'eval_every': 10,
  'eval_train_samples': 1000,
}
# configs/default.py's setting: FedBuff's clock, Mc = 20, M = 10, 100 clients, Dir(0.5).
DEFAULT = {}

# Hyperparameters several entries share.
FEDGM_RATES = {'client_lr': 0.01, 'server_lr': 1.0}  # Table 1: eta_l = 0.01; eta = 1
FEDFA_DELTA = {'client_lr': 0.01, 'server_lr': 1.0, 'window_size': 5}  # Sec. 5.2, window K = 5
ASYNFLC = {'client_lr': 0.05, 'server_lr': 1.0, 'compressor': 'top_k', 'fraction': 0.03}
FEDBUFF = {'client_lr': 0.05, 'server_lr': 1.0}

# ---- name: (setting and other fields, hyperparameters) ------------------------------------
CONFIGS = {
  # MasFL (Yan et al., paper 000, Alg. 1-2): beta = sqrt(SK/T) of Thm 3.1 from the run;
  # Thm 3.1's gamma and eta need the smoothness L, so set: gamma 0.1 (best of {0.1, 0.3, 1}).
  'masfl': (MASFL, {'client_lr': 0.03, 'server_lr': 0.1}),
  # AdaMasFL (paper 000, Alg. 3-4): Thm 4.1's tuning-free rates, from the run (no hparams).
  'adamasfl': (MASFL, {}),
  # CA2FL (Wang et al., ICLR 2024, Alg. 1), MasFL's baseline: eta = 1, eta_l = 0.03 (best
  # of {0.003, 0.03, 0.3}).
  'ca2fl': (MASFL, {'client_lr': 0.03, 'server_lr': 1.0}),
  # FADAS (Wang et al., ICML 2024, Alg. 1), MasFL's baseline: AMSGrad server, tau_c = 1,
  # eta_l = 0.1 (the authors'); eta 1e-4 raised to 1e-3 (best of {1e-4, 1e-3, 1e-2}).
  'fadas': (
    MASFL,
    {
      'client_lr': 0.1,
      'server_lr': 0.001,
      'beta1': 0.9,
      'beta2': 0.99,
      'epsilon': 1e-08,
      'delay_adaptive': True,
      'tau_c': 1,
    },
  ),
  # FedGM (Sun et al., paper 003, Sec. 3 eq. (2)): one point of Sec. 6.1's grid
  # eta in {0.5, ..., 5}, beta and nu in {0.7, 0.9, 0.95}.
  'fedgm': (FEDGM_SYNC, FEDGM_RATES | {'beta': 0.9, 'nu': 0.7}),
  # FedAvgM = FedGM with nu = 1 (Sec. 3), Sec. 6.1's baseline (Fig. 1(a,b)).
  'fedavgm': (FEDGM_SYNC, FEDGM_RATES | {'beta': 0.9}),
  # FedNAG = FedGM with nu = beta (Sec. 3): server Nesterov momentum.
  'fednag': (FEDGM_SYNC, FEDGM_RATES | {'beta': 0.9}),
  # FedSGD = FedGM with nu = 0 (Sec. 3): Remark 4.5's "FedAvg" with a server rate eta.
  'fedsgd': (FEDGM_SYNC, FEDGM_RATES),
  # FedOPT with Adam (Reddi et al. 2021; Alg. 1 of Sun et al.): beta1 0.9, beta2 0.99,
  # tau 1e-3 and eta = 0.01 from Reddi et al.'s range.
  'fedopt': (
    FEDGM_SYNC,
    {
      'client_lr': 0.01,
      'server_lr': 0.01,
      'server_optimizer': 'adam',
      'beta1': 0.9,
      'beta2': 0.99,
      'tau': 0.001,
    },
  ),
  # Multistage FedGM (Alg. 3; Sec. 6.2, Fig. 2): eta = (2, 1, 0.5), beta_s = 0.9,
  # nu_s = (0.25, 0.5, 1) so that constraint (3) holds; 200 rounds split 1 : 2 : 4.
  'multistage_fedgm': (
    FEDGM_SYNC,
    {
      'client_lr': 0.01,
      'stage_lengths': [29, 57, 114],
      'server_lrs': [2.0, 1.0, 0.5],
      'betas': [0.9, 0.9, 0.9],
      'nus': [0.25, 0.5, 1.0],
    },
  ),
  # Autonomous FedGM (Alg. 4; Sec. 6.3, App. H.1): a model from the last 5 versions, local
  # epochs drawn from {1, ..., 6}, one stage of (eta, beta, nu) from the paper's grid.
  'autonomous_fedgm': (
    FEDGM
    | {
      'local_epochs': 1,
      'schedule.kind': 'random_staleness',
      'schedule.local_steps_multipliers': '1,2,3,4,5,6',
    },
    {'client_lr': 0.01, 'stage_lengths': [200], 'server_lrs': [5.0], 'betas': [0.9], 'nus': [0.7]},
  ),
  # FedFa-Delta (Xu et al., IJCAI 2024, paper 001, Alg. 1 + eq. (4)), Sec. 5.2: window
  # K = 5, rate 0.01, batch 32; E = 10 epochs scaled to 10 local steps, 1,000 arrivals.
  'fedfa_delta': (FEDFA_ASYNC, FEDFA_DELTA),
  # FedFa-Delta with FedNova normalization: Table 6 "Fednova w/"; one local epoch per job
  # so local steps differ per client.
  'fedfa_delta_nova': (FEDFA_ASYNC | {'local_epochs': 1}, FEDFA_DELTA),
  # FedFa-Delta with FedProx clients (mu = 0.01): Table 6 "Fedprox w/".
  'fedfa_delta_prox': (FEDFA_ASYNC, FEDFA_DELTA | {'mu': 0.01}),
  # FedFa-Param (Alg. 1 + eq. (3)): the mean of the K = 5 windowed client models.
  'fedfa_param': (FEDFA_ASYNC, {'client_lr': 0.01, 'window_size': 5}),
  # FedFa-Param with FedNova normalization (not in the paper; built as Table 6's).
  'fedfa_param_nova': (FEDFA_ASYNC | {'local_epochs': 1}, {'client_lr': 0.01, 'window_size': 5}),
  # FedFa-Param with FedProx clients, mu = 0.01 (not in the paper; built as Table 6's).
  'fedfa_param_prox': (FEDFA_ASYNC, {'client_lr': 0.01, 'mu': 0.01, 'window_size': 5}),
  # fedfa_delta whose uploads pass through QSGD (Alistarh et al., NeurIPS 2017) at 4 bits.
  'fedfa_qsgd': (
    FEDFA_ASYNC | {'algorithm': 'fedfa_delta', 'compressor.kind': 'qsgd', 'compressor.bits': 4},
    FEDFA_DELTA,
  ),
  # FedBuff with FedNova normalization: Mc = 10, M = 5, one local epoch per job.
  'fedbuff_nova': (
    FEDFA
    | {
      'local_epochs': 1,
      'schedule.concurrency': 10,
      'schedule.buffer_size': 5,
      'eval_every': 10,
    },
    {'client_lr': 0.01, 'server_lr': 1.0},
  ),
  # FedBuff with FedProx clients (mu = 0.01): Mc = 10, M = 5 (= FedFa's window K).
  'fedbuff_prox': (
    FEDFA | {'schedule.concurrency': 10, 'schedule.buffer_size': 5, 'eval_every': 10},
    {'client_lr': 0.01, 'server_lr': 1.0, 'mu': 0.01},
  ),
  # FedNova (Wang et al., NeurIPS 2020), synchronous cohorts of 10: Table 6 "Fednova w/o".
  'fednova': (
    FEDFA | {'local_epochs': 1, 'schedule.kind': 'synchronous', 'num_rounds': 100, 'eval_every': 5},
    {'client_lr': 0.01},
  ),
  # FedProx (Li et al., MLSys 2020), synchronous cohorts of 10, mu = 0.01: Table 6
  # "Fedprox w/o"; 100 rounds = FedFa's 1,000 client updates.
  'fedprox': (
    FEDFA | {'schedule.kind': 'synchronous', 'num_rounds': 100, 'eval_every': 5},
    {'client_lr': 0.01, 'mu': 0.01},
  ),
  # Port (Su & Li, IWQoS 2022), FedFa's Table 2 baseline, on FedBuff's clock (Mc = 10,
  # M = 5); weights of the authors' CIFAR-10 configuration (Plato port_cifar10.yml).
  'port': (
    FEDFA
    | {
      'schedule.kind': 'fedbuff',
      'schedule.concurrency': 10,
      'schedule.buffer_size': 5,
      'num_rounds': 300,
      'eval_every': 25,
    },
    {
      'client_lr': 0.05,
      'server_lr': 1.0,
      'similarity_weight': 1.0,
      'staleness_weight': 3.0,
      'staleness_bound': 10.0,
      'reference': 'last_step',
    },
  ),
  # AsynFL (Yang, Hou, Wu; paper 004, eqs. 2-5), Sec. V-A / Table III (FMNIST row, MLP):
  # eta_l = 0.05 instead of 0.01 (to converge within 100 rounds).
  'asynfl': (ASYNFL, {'client_lr': 0.05, 'server_lr': 1.0}),
  # AsynFLC (eq. 7): Top-3% compressed uploads without error feedback (Fig. 1, Table III).
  'asynflc': (ASYNFL, ASYNFLC),
  # AsynFLC-EF (Alg. 1, eqs. 8-10): AsynFLC with error feedback, Top-3% (Figs. 1-2).
  'asynflc_ef': (ASYNFL, ASYNFLC),
  # FedBuff (Nguyen et al., 2022), AsynFL's Sec. V baseline: Mc = 12, M = 8 (about the 8
  # reports AsynFL's 5 s window aggregates; the paper gives neither).
  'fedbuff_asynfl': (
    ASYNFL
    | {
      'algorithm': 'fedbuff',
      'schedule.kind': 'fedbuff',
      'schedule.concurrency': 12,
      'schedule.buffer_size': 8,
      'schedule.wait_seconds': 0.0,
    },
    FEDBUFF,
  ),
  # FedEcho (Wang, Ma, Chen; paper 002, Alg. 1, eqs. 2-4), Sec. 5.1 / Tables 2, 7, 8: Adam
  # distillation, nu = 5, alpha in [0.2, 0.8]; eta_d 1e-4 instead of 3e-6, Q = 5 steps of
  # 250 (the paper gives neither Q nor the batch).
  'fedecho': (
    FEDECHO,
    {
      'client_lr': 0.03,
      'server_lr': 1.0,
      'distill_lr': 1e-4,
      'distill_steps': 5,
      'distill_batch': 250,
      'clip_norm': 5.0,
      'alpha_min': 0.2,
      'alpha_max': 0.8,
      'alpha_mode': 'dynamic',
      'optimizer': 'adam',
    },
  ),
  # FedAC (Zang et al., AAAI 2024), FedEcho's Table 2 baseline: FedEcho's Table 8 rates,
  # AFL-Lib's FedAC defaults otherwise (not tuned here).
  'fedac': (
    FEDECHO,
    {
      'client_lr': 0.1,
      'server_lr': 1e-4,
      'beta1': 0.6,
      'beta2': 0.9,
      'epsilon': 1e-8,
      'min_similarity': 0.0,
      'history': 2,
      'correction': True,
    },
  ),
  # FedAsync (Xie et al., 2019): fully asynchronous, Mc = 20.
  'fedasync': (
    DEFAULT | {'schedule.kind': 'fully_async', 'num_rounds': 1000, 'eval_every': 100},
    {'client_lr': 0.05, 'alpha': 0.6, 'staleness': 'polynomial', 'a': 0.5},
  ),
  # FedAvg (McMahan et al., 2017): synchronous cohorts of 10 clients.
  'fedavg': (
    DEFAULT | {'schedule.kind': 'synchronous', 'schedule.clients_per_step': 10},
    {'client_lr': 0.05},
  ),
  # FedBuff (Nguyen et al., 2022) on its event clock.
  'fedbuff': (DEFAULT, FEDBUFF),
  # FedBuff, a learning-rate grid over 3 seeds in one compiled program, selected on a
  # 5,000-sample validation split (as the reproductions select).
  'fedbuff_sweep': (
    DEFAULT
    | {
      'algorithm': 'fedbuff',
      'validation_size': 5000,
      'num_rounds': 100,
      'sweep': {'hparams': {'client_lr': [0.02, 0.05, 0.1]}, 'seed': [0, 1, 2]},
    },
    FEDBUFF,
  ),
  # FedBuff whose uploads pass through Top-k (3%, AsynFLC's "top3") with error feedback.
  'fedbuff_topk_ef': (
    DEFAULT
    | {
      'algorithm': 'fedbuff',
      'compressor.kind': 'top_k',
      'compressor.fraction': 0.03,
      'compressor.error_feedback': True,
    },
    FEDBUFF,
  ),
}


def get_config(name: str = ''):
  """The config ``name`` of :data:`CONFIGS` (``--config=configs/fmnist.py:<name>``)."""
  fields, hparams = config_lib.entry(CONFIGS, name, 'configs/fmnist.py')
  return config_lib.build({'algorithm': name} | fields, hparams)
