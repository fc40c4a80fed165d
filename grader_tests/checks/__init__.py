"""Every check of the graders, one module per concept; importing this package registers
them with ``core.check`` in the order a student meets the functions."""

from . import softmax, masks, attention, heads, positions, layer_norm  # noqa: F401
from . import attention_block, formulas, exercises  # noqa: F401
