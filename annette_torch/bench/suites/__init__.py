"""Benchmark suites: a parametric graph (``builder(config) -> Network``) plus a parameter space.

Micro-kernel suites measure one layer (``conv``, ``dwconv``, ``gconv``, ``gconv_same``, ``maxpool``, ``avgpool``,
``fc``, ``add``, ``concat``, ``act``, ``bn``, ``resize``); multi-layer suites have the shapes of the paper's Fig. 4
(``conv_bn_relu``, ``conv_pool``, ``residual``, ``concat_branches``, ``dwsep``, ``conv_act``, ``dw_act``,
``stem``);
attention-era suites run on token tensors, built as the torch.fx front end traces them (`tokens.TokenGraph`):
micro-kernels ``linear`` (over token rows), ``matmul`` (attention's scores and context products), ``softmax``,
``layernorm``, ``gelu``, ``heads`` (head split / merge), ``interp`` (nearest / bilinear) and ``dilconv`` (dilated
convolutions), blocks ``attention``, ``mlp``, ``convnext`` and ``window_attention``; ``cold_weights`` measures
weighted layers after a pool that streams a chosen amount of activations through the caches (whether a layer's
weights are still cached inside a network, `annette_torch.models.cache`); ``paper_conv`` replays the paper's ~35k
convolution configurations (``paper35k.csv`` of the reference data). Value ranges follow the paper (spatial 1..224,
channels 3..2048, kernels 1/3/5/7, strides 1/2, pools 2..10); a config is feasible when its model stays within
`MAX_OPS` operations, `MAX_ACT_BYTES` of activations and `MAX_WEIGHT_BYTES` of weights (float32), so one config runs
in well under a second on a small CPU (a suite may set its own: ``fc`` and ``cold_weights`` more weights, ``interp``
4x the activations, the size of segmentation logits upsampled to a 512 x 512 input). The caps are checked analytically and vectorised (a suite's grid of ~400k
configs is counted in milliseconds); a test keeps the formulas equal to the built networks'.

Conventions of the generated networks: NCHW, batch 1 unless the suite has ``n``; convolutions use "same"
padding (``k // 2`` per side, so the output is ``ceil(size / stride)``, as the original ANNETTE generator's
TensorFlow ``SAME``); pools use no padding; inputs are called ``x`` (``x0``, ``x1``... for several); layer
names are short and fixed (``conv``, ``bn``, ``relu``, ``pool``; ``conv1``, ``bn1``... in chains), and the
network is called ``<suite>-<config_id>``.

Loaders for the original ANNETTE material: `from_annette_template` fills a benchmark graph template and
`load_sweep_table` reads a sweep table; `reference_dir` finds the reference data folder.

Modules: `base` (the `Suite` object, caps, ids), `registry` (all suites by name), `values` (shared parameter
values), `layers` (building blocks), one module per family of suites (`weighted`, `pool`, `elementwise`,
`tensor`, `fused`, `blocks`, `context`, `tokens`, `transformer`), `combine` (`multi_kernel`), `reference`,
`templates`, `paper`.
"""

from __future__ import annotations

from .base import DEFAULT_N, MAX_ACT_BYTES, MAX_OPS, MAX_WEIGHT_BYTES, Cost, Suite, SuiteError, config_id
from .blocks import SE_CHANNELS, SE_PROJECT, SE_REDUCE, SE_SPATIAL, SHUFFLE_CHANNELS
from .combine import multi_kernel
from .elementwise import CONST_OPS
from .fused import CONV_MUL_KINDS, STRIDE_MIDS
from .layers import LEADS, TAILS
from .paper import PAPER_CHANNELS, PAPER_SPATIAL
from .reference import load_sweep_table, reference_dir
from .registry import SUITES, get_suite, list_suites
from .templates import from_annette_template
from .values import (ACTIVATIONS, CHANNELS, FC_INPUTS, FEATURES, GROUP_CHANNELS, GROUPS, KERNELS, POOL_KERNELS,
                     PW_ACTIVATIONS, SPATIAL, STEM_SPATIAL, STRIDES)
from .weighted import DECONV

__all__ = ["Suite", "SUITES", "list_suites", "get_suite", "config_id", "multi_kernel", "from_annette_template",
           "load_sweep_table", "reference_dir", "SuiteError", "MAX_OPS", "MAX_ACT_BYTES", "MAX_WEIGHT_BYTES",
           "ACTIVATIONS", "SPATIAL", "CHANNELS"]
