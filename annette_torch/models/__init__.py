"""Layer models: roofline, refined roofline (and, fitted later, statistical and mixed) — one interface."""

from .base import MODEL_KINDS, LayerFeatures, LayerModel, model_from_dict, register
from .refined import RefinedRoofline
from .roofline import Roofline

__all__ = ["LayerFeatures", "LayerModel", "MODEL_KINDS", "model_from_dict", "register", "Roofline",
           "RefinedRoofline"]
