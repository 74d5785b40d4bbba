"""The mapping model: what a platform's toolchain does to a network before its layers run (stride
propagation, pattern folds, pairwise fusions and what fused layers still cost), as one vectorised pass."""

from .costs import MappingCosts
from .folds import FOLDS, apply_folds, hardswish_groups, swish_diamonds
from .model import Condition, FusionRule, MappedNetwork, MappingModel, attr_values, expand_types

__all__ = ["MappingModel", "MappedNetwork", "FusionRule", "Condition", "MappingCosts", "FOLDS", "apply_folds",
           "swish_diamonds", "hardswish_groups", "attr_values", "expand_types"]
