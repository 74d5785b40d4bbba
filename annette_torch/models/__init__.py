"""Layer models: roofline, refined roofline, statistical and mixed — one interface."""

from .base import MODEL_KINDS, LayerFeatures, LayerModel, model_from_dict, register
from .refined import RefinedRoofline
from .roofline import Roofline
from .statistical import Statistical  # registers kind "statistical"
from .mixed import Mixed  # registers kind "mixed" (after statistical: it uses it)
from .trees import TreeEnsemble

__all__ = ["LayerFeatures", "LayerModel", "MODEL_KINDS", "model_from_dict", "register", "Roofline",
           "RefinedRoofline", "Statistical", "Mixed", "TreeEnsemble"]
