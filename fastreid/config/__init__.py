from .config import CfgNode, ConfigError, configurable, get_cfg, global_cfg, set_global_cfg
from .validate import ensure_output_dir, validate_config

__all__ = [
    "CfgNode",
    "ConfigError",
    "configurable",
    "ensure_output_dir",
    "get_cfg",
    "global_cfg",
    "set_global_cfg",
    "validate_config",
]
