"""The model generator: measurements in a store -> mapping model, layer models and network-level
calibration -> a platform file (``annette calibrate``). Needs the ``fit`` extra (scikit-learn, scipy)."""

from ..errors import require

require("the model generator (annette_torch.fit)", "sklearn", "scipy")
