"""fastreid: person re-identification training that runs the same everywhere."""

import re
from pathlib import Path

from setuptools import find_packages, setup

HERE = Path(__file__).parent
VERSION = re.search(r'__version__ = "([^"]+)"', (HERE / "fastreid" / "__init__.py").read_text()).group(1)

# ONNX export (tools/deploy/export.py): the exporter, its runtime check, torch's dynamo exporter backend.
DEPLOY = ["onnx>=1.15", "onnxruntime>=1.17", "onnxscript>=0.1"]

setup(
    name="fastreid",
    version=VERSION,
    description="FastReID-compatible person re-identification toolkit that trains the same on every platform",
    long_description=(HERE / "README.md").read_text(encoding="utf-8"),
    long_description_content_type="text/markdown",
    python_requires=">=3.9",
    packages=find_packages(include=["fastreid", "fastreid.*"]),
    install_requires=[
        "torch>=1.13,<3",
        "torchvision>=0.14,<1",
        "yacs>=0.1.8",
        "fvcore>=0.1.5",
        "faiss-cpu>=1.7",
        "numpy>=1.21",
        "pillow>=9",
        "tabulate>=0.8",
        "termcolor>=1.1",
        "tqdm>=4.50",
        "matplotlib>=3.5",
        "psutil>=5.8",
        "pyyaml>=5.4",
    ],
    extras_require={
        "dev": ["pytest>=7", "ruff>=0.4", *DEPLOY],
        "deploy": DEPLOY,
        "tensorboard": ["tensorboard"],
    },
    entry_points={
        "console_scripts": [
            "fastreid-platform=fastreid.utils.platform:main",
            "fastreid-extract=fastreid.inference.extract_tool:run",
            "fastreid-search=fastreid.inference.search_tool:run",
            "fastreid-export=fastreid.inference.export_tool:run",
        ]
    },
)
