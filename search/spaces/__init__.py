"""Search spaces with IR builders (fast estimation) and torch builders (training).

``nb201`` (NAS-Bench-201 cells), ``nb101`` (NAS-Bench-101 cells), ``mbv2`` (MobileNetV2 / ProxylessNAS
blocks) and ``anb`` (Accel-NASBench: EfficientNet-B0 stages with expansion, kernel, depth and SE choices);
each module has ``build_network`` (IR, no torch) and ``build_module`` (``nn.Module``), which trace to the
same IR. ``vit`` (vision transformers: embedding, depth, per block heads and MLP ratio) and ``hybrid``
(convolution then attention stages) build their IR by tracing their modules, block by block
(``stitched_network``). ``registry`` adapts them to the Optuna searches (``get_space``).
"""
