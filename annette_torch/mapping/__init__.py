"""The mapping model: what a platform's toolchain does to a network before its layers run (stride
propagation, pattern folds, pairwise fusions, what fused layers still cost, and which layers the accelerator
leaves to its host), as one vectorised pass."""

from .costs import MappingCosts
from .folds import FOLDS, apply_folds, hardswish_groups, pad_consumers, shuffle_groups, swish_diamonds
from .model import (ACTIVATIONS, GROUP_ATTRS, Condition, FusionRule, MappedNetwork, MappingModel, attr_values,
                    expand_types)
from .support import NEUTRAL_TYPES, OperatorSupport, Placement, Switch, TypeSupport

__all__ = ["MappingModel", "MappedNetwork", "FusionRule", "Condition", "MappingCosts", "FOLDS", "apply_folds",
           "swish_diamonds", "hardswish_groups", "shuffle_groups", "pad_consumers", "attr_values", "expand_types",
           "OperatorSupport", "TypeSupport", "Switch", "Placement", "NEUTRAL_TYPES", "ACTIVATIONS", "GROUP_ATTRS"]
