"""Search spaces with direct IR builders (fast estimation) and torch builders (training).

``nb201`` (NAS-Bench-201 cells), ``nb101`` (NAS-Bench-101 cells), ``mbv2`` (MobileNetV2 / ProxylessNAS
blocks) and ``anb`` (Accel-NASBench: EfficientNet-B0 stages with expansion, kernel, depth and SE choices); each module has ``build_network`` (IR, no torch) and ``build_module`` (``nn.Module``), which trace
to the same IR. ``registry`` adapts them to the Optuna searches (``get_space``).
"""
