from .config import CfgNode, ConfigError, configurable, get_cfg

__all__ = ["CfgNode", "ConfigError", "configurable", "get_cfg"]
